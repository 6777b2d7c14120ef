/*
 * apply.cpp: a statement's deltas, written to its counters.
 *
 * Counters are applied in the order given (name order), each counter's nonzero deltas in sorted key order, so that
 * two statements touching the same keys lock them in the same order and cannot deadlock. Each counter is written as
 * the owner of its table, with the statements compile.cpp prepared (write_statements.cpp wrote them), one path per
 * mode:
 *
 *   exact    add to the key's row (direct.cpp finds and updates it; the upsert creates a missing one), delete a row
 *            whose values all came back to zero;
 *   sharded  the same on one of the key's slot rows, the one this backend can lock without waiting;
 *   target   add to the counter-cache columns of the key's rows of an existing table (rows are never created);
 *   log      append the delta to the log (compaction folds it into the totals later).
 *
 * Many keys of an exact or log counter go in one statement fed by arrays. Every new value passes the counter's
 * decisions (decide.cpp): bounds, thresholds.
 */
#include "write/write.hpp"
#include "compat.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/numeric.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "access/xact.h"
}

namespace counters {

namespace {

void Require(bool ok, const char *what, const CompiledCounter *c, int ret);

Datum
ZeroNumeric()
{
	return NumericGetDatum(int64_to_numeric(0));
}

/* A key's parameters: its values, then its deltas (taken out of the entry) as int8 or numeric. */
void
KeyParams(const CounterDef *def, DeltaEntry *e, Datum *params, char *nulls, Datum zero)
{
	for (int k = 0; k < def->nkeys; k++) {
		params[k] = e->key[k];
		nulls[k] = e->KeyNulls(def->nkeys)[k] ? 'n' : ' ';
	}
	for (int v = 0; v < def->nvalues; v++) {
		int p = def->nkeys + v;
		nulls[p] = ' ';
		switch (def->values[v].accum) {
		case AccumKind::Int64:
			params[p] = Int64GetDatum(TakeInt64(def, e, v));
			break;
		case AccumKind::Numeric:
			params[p] = TakeNumeric(def, e, v, zero);
			break;
		case AccumKind::Extreme:
			/* (the value added, or NULL, which GREATEST and LEAST pass over; what was removed is settled after) */
			if (!TakeExtreme(def, e, v, EXTREME_ADDED, &params[p]))
				nulls[p] = 'n';
			break;
		}
	}
}

/*
 * The extremes of a row just written (at `tid`, its values `stored` and `stored_null` per value column) that a removal
 * of entry `e` reached are read again, and the row updated with them: true, and SPI_tuptable holds the row as the
 * update returned it (the apply statement's RETURNING; the caller frees it). False: no removal reached the value
 * stored. The removals stay in the entry (a counter-cache key may have many rows) until ForgetRemovals.
 */
bool
SettleExtremes(CounterRun *r, DeltaEntry *e, Datum tid, const Datum *stored, const bool *stored_null)
{
	CompiledCounter *c = r->c;
	RequireOwnerScope(c->auth.role());
	const CounterDef *def = c->def;
	Datum *params = (Datum *)palloc(sizeof(Datum) * (def->nvalues + 1));
	char *nulls = (char *)palloc(sizeof(char) * (def->nvalues + 1));
	int p = 1;
	bool reread = false;
	Snapshot snapshot = nullptr;
	for (int v = 0; v < def->nvalues; v++) {
		const ExtremeColumn *x = &c->extremes[v];
		if (x->distinct) {
			/* (each changed pair: new to the key, or gone from it) */
			uint32 n;
			const PairChange *pairs = PairsOf(r, e, v, &n);
			int64 delta = 0;
			for (uint32 i = 0; i < n; i++) {
				if (snapshot == nullptr)
					snapshot = SourceSnapshot();
				delta += PairDelta(r, v, e, pairs[i].x, pairs[i].net, snapshot);
			}
			reread |= delta != 0;
			params[p] = Int64GetDatum(delta);
			nulls[p++] = ' ';
			continue;
		}
		if (!x->kept)
			continue;
		Datum removed;
		/* (removed at or beyond the extreme stored now: the row that held it may be gone) */
		bool reached = ExtremeOf(def, e, v, EXTREME_REMOVED, &removed) &&
		               (stored_null[v] || ExtremeCompare(c, v, removed, stored[v]) >= 0);
		if (reached) {
			reread = true;
			if (snapshot == nullptr)
				snapshot = SourceSnapshot();
			nulls[p] = ReadExtreme(r, v, e, snapshot, &params[p]) ? ' ' : 'n';
		} else {
			params[p] = stored[v];
			nulls[p] = stored_null[v] ? 'n' : ' ';
		}
		p++;
	}
	if (snapshot != nullptr)
		UnregisterSnapshot(snapshot);
	if (reread) {
		params[0] = tid;
		nulls[0] = ' ';
		int ret = SPI_execute_plan(c->plans[PLAN_EXTREMES], params, nulls, false, 0);
		Require(ret == SPI_OK_UPDATE_RETURNING && SPI_processed == 1, "re-reading the source for", c, ret);
	}
	pfree(params);
	pfree(nulls);
	return reread;
}

/* SettleExtremes of row `i` of an apply statement's RETURNING (its ctid first, its values from column `first`). */
bool
SettleReturned(CounterRun *r, DeltaEntry *e, SPITupleTable *written, uint64 i, int first)
{
	const CounterDef *def = r->c->def;
	if (r->c->extremes == nullptr)
		return false;
	Datum *stored = (Datum *)palloc(sizeof(Datum) * def->nvalues);
	bool *stored_null = (bool *)palloc(sizeof(bool) * def->nvalues);
	for (int v = 0; v < def->nvalues; v++)
		stored[v] = SPI_getbinval(written->vals[i], written->tupdesc, first + v, &stored_null[v]);
	bool isnull;
	return SettleExtremes(r, e, SPI_getbinval(written->vals[i], written->tupdesc, 1, &isnull), stored, stored_null);
}

/*
 * SettleExtremes of the row direct.cpp just wrote for entry `e` (none when it deleted it); a row whose values all came
 * back to zero then is deleted, as the upsert's are.
 */
void
SettleDirect(CounterRun *r, DeltaEntry *e, DirectTarget *direct)
{
	CompiledCounter *c = r->c;
	RequireOwnerScope(c->auth.role());
	const CounterDef *def = c->def;
	TupleTableSlot *row = DirectWritten(direct);
	if (row != nullptr) {
		Datum *stored = (Datum *)palloc(sizeof(Datum) * def->nvalues);
		bool *stored_null = (bool *)palloc(sizeof(bool) * def->nvalues);
		for (int v = 0; v < def->nvalues; v++) {
			stored[v] = row->tts_values[c->value_attnums[v] - 1];
			stored_null[v] = row->tts_isnull[c->value_attnums[v] - 1];
		}
		if (SettleExtremes(r, e, PointerGetDatum(&row->tts_tid), stored, stored_null)) {
			/* RETURNING ctid, all zero, ... */
			bool isnull;
			HeapTuple settled = SPI_tuptable->vals[0];
			if (!c->keep_zero && DatumGetBool(SPI_getbinval(settled, SPI_tuptable->tupdesc, 2, &isnull))) {
				Datum ctid = SPI_getbinval(settled, SPI_tuptable->tupdesc, 1, &isnull);
				int ret = SPI_execute_plan(c->plans[PLAN_DELETE], &ctid, nullptr, false, 0);
				Require(ret == SPI_OK_DELETE, "deleting a zero row of", c, ret);
			}
			SPI_freetuptable(SPI_tuptable);
		}
		pfree(stored);
		pfree(stored_null);
	}
	ForgetRemovals(def, e);
}

/* The new values of a written row (from column `first` on): its bounds, and the thresholds the deltas crossed. */
void
DecideRow(CompiledCounter *c, HeapTuple row, TupleDesc desc, int first, Datum *params, char *nulls)
{
	if (c->has_min == nullptr && !c->has_thresholds)
		return;
	const CounterDef *def = c->def;
	for (int v = 0; v < def->nvalues; v++) {
		bool isnull;
		if (ReadsSource(&def->values[v]))
			continue; /* (no bounds or thresholds: options.cpp refuses them) */
		Datum value = SPI_getbinval(row, desc, first + v, &isnull);
		if (isnull)
			continue;
		Oid type = SPI_gettypeid(desc, first + v);
		CheckBounds(c, v, value, type, params, nulls);
		if (CrossesAtWrite(c))
			NoteCrossings(c, v, value, type, params[def->nkeys + v], params, nulls);
	}
}

void
Require(bool ok, const char *what, const CompiledCounter *c, int ret)
{
	if (!ok)
		elog(ERROR, "counters: %s counter \"%s\" failed: %s", what, c->def->name, SPI_result_code_string(ret));
}

/* Log mode: append the key's delta. */
void
ApplyAppend(CompiledCounter *c, Datum *params, char *nulls)
{
	RequireOwnerScope(c->auth.role());
	int ret = SPI_execute_plan(c->plans[PLAN_APPLY], params, nulls, false, 0);
	Require(ret == SPI_OK_INSERT, "logging a delta of", c, ret);
}

/* Target mode: add to the key's rows of the existing table (RETURNING ctid, the values). */
void
ApplyUpdate(CounterRun *r, DeltaEntry *e, Datum *params, char *nulls)
{
	CompiledCounter *c = r->c;
	RequireOwnerScope(c->auth.role());
	int ret = SPI_execute_plan(c->plans[PLAN_APPLY], params, nulls, false, 0);
	Require(ret == SPI_OK_UPDATE_RETURNING, "applying a delta to", c, ret);
	SPITupleTable *written = SPI_tuptable;
	uint64 nrows = SPI_processed;
	for (uint64 row = 0; row < nrows; row++) {
		DecideRow(c, written->vals[row], written->tupdesc, 2, params, nulls);
		if (SettleReturned(r, e, written, row, 2))
			SPI_freetuptable(SPI_tuptable);
	}
	ForgetRemovals(c->def, e);
	SPI_freetuptable(written);
}

/*
 * Exact and sharded mode, when direct.cpp could not: the upsert adds to the key's row or creates it (sharded: slot
 * `free_slot`, or waits for this backend's own if all max_slots exist); RETURNING says whether every value came back
 * to zero, and the row is then deleted by ctid. A table with CHECK constraints has an existing row updated first.
 */
void
ApplyUpsert(CounterRun *r, DeltaEntry *e, Datum *params, char *nulls, int free_slot)
{
	CompiledCounter *c = r->c;
	RequireOwnerScope(c->auth.role());
	const CounterDef *def = c->def;
	if (c->counter->mode == Mode::Sharded) {
		params[def->nkeys + def->nvalues] = Int32GetDatum(free_slot);
		nulls[def->nkeys + def->nvalues] = ' ';
	}
	int ret;
	if (c->plans[PLAN_UPDATE] == nullptr ||
	    (ret = SPI_execute_plan(c->plans[PLAN_UPDATE], params, nulls, false, 0)) != SPI_OK_UPDATE_RETURNING ||
	    SPI_processed != 1) {
		ret = SPI_execute_plan(c->plans[PLAN_APPLY], params, nulls, false, 0);
		Require(ret == SPI_OK_INSERT_RETURNING && SPI_processed == 1, "applying a delta to", c, ret);
	}
	/* RETURNING ctid, all zero, the values, the keys (an extreme a removal reached: as re-read) */
	SPITupleTable *written = SPI_tuptable;
	if (SettleReturned(r, e, written, 0, 3)) {
		SPI_freetuptable(written);
		written = SPI_tuptable;
	}
	if (c->extremes != nullptr)
		ForgetRemovals(c->def, e);
	HeapTuple row = written->vals[0];
	DecideRow(c, row, written->tupdesc, 3, params, nulls);
	bool isnull;
	if (!c->keep_zero && DatumGetBool(SPI_getbinval(row, written->tupdesc, 2, &isnull))) {
		Datum ctid = SPI_getbinval(row, written->tupdesc, 1, &isnull);
		ret = SPI_execute_plan(c->plans[PLAN_DELETE], &ctid, nullptr, false, 0);
		Require(ret == SPI_OK_DELETE, "deleting a zero row of", c, ret);
	}
	SPI_freetuptable(written);
}

/*
 * Key by key, in order: directly where direct.cpp can (exact: every key; sharded: keys with a free slot row), else
 * one statement per key. `direct` is ended here; true if it wrote rows (not yet visible to later commands).
 */
bool
ApplyEach(CounterRun *r, DeltaEntry **sorted, uint32 n, Datum *params, char *nulls, DirectTarget *direct)
{
	CompiledCounter *c = r->c;
	Datum zero = ZeroNumeric();
	/* (a counter kept in counter-cache columns: its target's rows; else by mode) */
	Mode mode = c->counter->mode;
	bool target = !c->counter->owns_target;
	/* (exact, most of the keys: their rows found by one ordered scan of the key index, DirectAdd for the rest) */
	bool merge = direct != nullptr && !target && mode == Mode::Exact && DirectMergeBegin(direct, n);
	for (uint32 i = 0; i < n; i++) {
		/* (entries are visited in key order, not memory order: fetch a few ahead) */
		if (i + 8 < n)
			__builtin_prefetch(sorted[i + 8]->Ints(c->def->nvalues));
		KeyParams(c->def, sorted[i], params, nulls, zero);
		if (target) {
			ApplyUpdate(r, sorted[i], params, nulls);
			continue;
		}
		switch (mode) {
		case Mode::Log:
			if (direct != nullptr)
				DirectAppend(direct, params, nulls);
			else
				ApplyAppend(c, params, nulls);
			break;
		case Mode::Exact:
		case Mode::Sharded: {
			/* (sharded, without the direct path: this backend's own slot, so that writers spread out) */
			int free_slot = mode == Mode::Sharded && c->max_slots > 0 ? compat::BackendNumber() % c->max_slots : 0;
			MergeResult found = merge ? DirectMergeAdd(direct, params, nulls) : MergeResult::Unknown;
			if (found != MergeResult::Applied &&
			    (direct == nullptr ||
			     DirectAdd(direct, params, nulls, &free_slot, found == MergeResult::Absent) == DirectResult::Missing))
				ApplyUpsert(r, sorted[i], params, nulls, free_slot);
			else if (c->extremes != nullptr)
				SettleDirect(r, sorted[i], direct);
			break;
		}
		}
	}
	return DirectEnd(direct);
}

/* Delete the rows the bulk upsert just brought back to all zeros (its RETURNING says which); `scratch` holds n. */
void
DeleteZeroRows(CompiledCounter *c, Datum *scratch)
{
	RequireOwnerScope(c->auth.role());
	SPITupleTable *written = SPI_tuptable;
	uint64 nrows = SPI_processed;
	const CounterDef *def = c->def;
	if (c->has_min != nullptr) {
		/* RETURNING ctid, all zero, the values, then the keys */
		Datum *keys = (Datum *)palloc(sizeof(Datum) * def->nkeys);
		char *key_nulls = (char *)palloc(sizeof(char) * def->nkeys);
		for (uint64 i = 0; i < nrows; i++) {
			bool isnull;
			for (int k = 0; k < def->nkeys; k++) {
				keys[k] = SPI_getbinval(written->vals[i], written->tupdesc, 3 + def->nvalues + k, &isnull);
				key_nulls[k] = isnull ? 'n' : ' ';
			}
			for (int v = 0; v < def->nvalues; v++)
				CheckBounds(c, v, SPI_getbinval(written->vals[i], written->tupdesc, 3 + v, &isnull),
				            SPI_gettypeid(written->tupdesc, 3 + v), keys, key_nulls);
		}
	}
	uint32 nzero = 0;
	for (uint64 i = 0; i < nrows; i++) {
		bool isnull;
		if (!c->keep_zero && DatumGetBool(SPI_getbinval(written->vals[i], written->tupdesc, 2, &isnull)))
			scratch[nzero++] = SPI_getbinval(written->vals[i], written->tupdesc, 1, &isnull);
	}
	if (nzero > 0) {
		Datum tids =
		    PointerGetDatum(construct_array(scratch, nzero, TIDOID, sizeof(ItemPointerData), false, TYPALIGN_SHORT));
		int ret = SPI_execute_plan(c->plans[PLAN_BULK_DELETE], &tids, nullptr, false, 0);
		Require(ret == SPI_OK_DELETE, "deleting zero rows of", c, ret);
	}
	SPI_freetuptable(written);
}

/* All keys in one statement fed by arrays (in sorted order); exact mode then deletes the rows that came to zero. */
void
ApplyBulk(CounterRun *r, DeltaEntry **sorted, uint32 n, Datum *params)
{
	CompiledCounter *c = r->c;
	RequireOwnerScope(c->auth.role());
	const CounterDef *def = c->def;
	Datum *elems = (Datum *)palloc(sizeof(Datum) * n);
	bool *elem_nulls = (bool *)palloc(sizeof(bool) * n);
	int dims[1] = {(int)n};
	int lbs[1] = {1};
	for (int k = 0; k < def->nkeys; k++) {
		for (uint32 i = 0; i < n; i++) {
			elems[i] = sorted[i]->key[k];
			elem_nulls[i] = sorted[i]->KeyNulls(def->nkeys)[k];
		}
		params[k] = PointerGetDatum(construct_md_array(elems, elem_nulls, 1, dims, lbs, def->keys[k].type,
		                                               c->key_typlen[k], c->key_byval[k], c->key_typalign[k]));
	}
	Datum zero = ZeroNumeric();
	for (int v = 0; v < def->nvalues; v++) {
		bool ints = def->values[v].accum == AccumKind::Int64;
		for (uint32 i = 0; i < n; i++)
			elems[i] = ints ? Int64GetDatum(TakeInt64(def, sorted[i], v)) : TakeNumeric(def, sorted[i], v, zero);
		params[def->nkeys + v] = PointerGetDatum(ints ? construct_array(elems, n, INT8OID, 8, true, TYPALIGN_DOUBLE)
		                                              : construct_array(elems, n, NUMERICOID, -1, false, TYPALIGN_INT));
	}
	int ret = SPI_execute_plan(c->plans[PLAN_BULK], params, nullptr, false, 0);
	if (c->counter->mode == Mode::Log)
		Require(ret == SPI_OK_INSERT && SPI_processed == n, "logging deltas of", c, ret);
	else {
		Require(ret == SPI_OK_INSERT_RETURNING && SPI_processed == n, "applying deltas to", c, ret);
		DeleteZeroRows(c, elems);
	}
	for (int p = 0; p < def->nkeys + def->nvalues; p++)
		pfree(DatumGetPointer(params[p]));
	pfree(elems);
	pfree(elem_nulls);
}

/* now() - keep, as the bucket column's type (date, timestamp in the session's time zone, or timestamptz). */
Datum
RetentionHorizon(const CompiledCounter *c)
{
	Datum start = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	Datum horizon = DirectFunctionCall2(timestamptz_mi_interval, start, c->retention_keep);
	switch (c->def->keys[c->retention_key].type) {
	case TIMESTAMPOID:
		return DirectFunctionCall1(timestamptz_timestamp, horizon);
	case DATEOID:
		return DirectFunctionCall1(timestamptz_date, horizon);
	default:
		return horizon;
	}
}

/* Retention: buckets older than the horizon are no longer kept (counters.set_retention); their deltas go. */
uint32
DropExpired(const CompiledCounter *c, DeltaEntry **entries, uint32 n)
{
	RequireOwnerScope(c->auth.role());
	int rk = c->retention_key;
	if (rk < 0)
		return n;
	Datum horizon = RetentionHorizon(c);
	uint32 kept = 0;
	for (uint32 i = 0; i < n; i++)
		if (entries[i]->KeyNulls(c->def->nkeys)[rk] ||
		    DatumGetInt32(
		        FunctionCall2Coll(&c->key_cmp[rk], c->def->keys[rk].collation, entries[i]->key[rk], horizon)) >= 0)
			entries[kept++] = entries[i];
	return kept;
}

void
ApplyErrorContext(void *arg)
{
	const char *name = (const char *)arg;
	/*
	 * A key too long for the counter table's btree index (one of a type indexed as it is: jsonb, an array, a
	 * composite; or a counter declared before keys were indexed by their digest): say what to do about it.
	 */
	if (geterrcode() == ERRCODE_PROGRAM_LIMIT_EXCEEDED)
		errhint("The keys of counter \"%s\" must fit in its table's index (about 2,700 bytes): count a text key "
		        "(declared again, a text key of any length is indexed by its digest), or a shorter one, e.g. md5(key).",
		        name);
	errcontext("applying deltas to counter \"%s\"", name);
}

/*
 * Apply one counter's deltas; true if rows were written directly (not yet visible to later commands). *prefixes: for
 * a counter with window thresholds, the prefixes written, to check once every counter is applied.
 */
bool
ApplyCounter(CounterRun *r, Datum *params, char *nulls, WrittenPrefixes **prefixes)
{
	CompiledCounter *c = r->c;
	if (DeltaCount(r) == 0)
		return false;
	/*
	 * Deltas are applied with the privileges of the counter table's owner, so that a role that may write the source
	 * but not the counter table still keeps the counter exact; the keys are compared, and triggers, constraints and
	 * index expressions the owner put on its table run, as the owner (restricted).
	 */
	OwnerScope owner;
	EnterOwner(&owner, c->auth, 0);
	uint32 n;
	SumPairs(r); /* (count(DISTINCT x): the pairs that cancel out have nothing to apply) */
	DeltaEntry **sorted = NonzeroDeltas(r, &n);
	n = DropExpired(c, sorted, n);
	r->keys_written += n;
	if (n == 0) {
		LeaveOwner(&owner);
		return false;
	}
	SortDeltas(r, sorted, n);
	if (c->window_bucket >= 0)
		*prefixes = WindowPrefixes(c, sorted, n);

	/* Errors raised while applying (an overflow of a stored value, a constraint) name the counter. */
	ErrorContextCallback context;
	context.callback = ApplyErrorContext;
	context.arg = (void *)c->def->name;
	context.previous = error_context_stack;
	error_context_stack = &context;
	/*
	 * Directly, key by key, where direct.cpp can (an index probe and a row written per key, as a set-based UPDATE
	 * ... FROM with a nested loop would, without the executor); else, many keys in one statement, unless crossing
	 * thresholds needs each key's delta next to its new value.
	 */
	DirectTarget *direct = DirectBegin(c);
	bool written = false;
	if (direct == nullptr && n > 1 && c->plans[PLAN_BULK] != nullptr && !(c->has_thresholds && CrossesAtWrite(c)) &&
	    !c->has_check)
		ApplyBulk(r, sorted, n, params);
	else
		written = ApplyEach(r, sorted, n, params, nulls, direct);
	/* What did not fit in bigint in one step (rare), in further steps, in the same order, each seeing the last. */
	for (;;) {
		uint32 left = 0;
		for (uint32 i = 0; i < n; i++)
			if (!DeltaIsZero(c->def, sorted[i]))
				sorted[left++] = sorted[i];
		if (left == 0)
			break;
		n = left;
		if (written)
			CommandCounterIncrement();
		written = ApplyEach(r, sorted, n, params, nulls, DirectBegin(c));
	}
	error_context_stack = context.previous;
	LeaveOwner(&owner);
	pfree(sorted);
	return written;
}

} // namespace

void
ApplyCounters(CounterRun **list, int n)
{
	int maxparams = 1;
	bool any = false;
	int pin = PIN_SEARCH_PATH;
	for (int i = 0; i < n; i++) {
		const CompiledCounter *c = list[i]->c;
		maxparams = Max(maxparams, c->def->nkeys + c->def->nvalues + 1);
		any |= DeltaCount(list[i]) > 0;
		/* (threshold events render keys as text: in the same format in every session) */
		if (c->has_thresholds || c->window_bucket >= 0)
			pin |= PIN_OUTPUT;
		/* Policies that would hide counter rows from their owner make the write fail, not drop deltas. */
		if (c->has_rls)
			pin |= PIN_ROW_SECURITY;
	}
	if (!any)
		return;
	int level = PinSettings(pin);
	Datum *params = (Datum *)palloc(sizeof(Datum) * maxparams);
	char *nulls = (char *)palloc(sizeof(char) * maxparams);
	SpiConnect();
	/* The enclosing list is put back even when applying fails: no pointer into an aborted context outlives it. */
	List *enclosing = StartCrossings();
	List *mine = NIL;
	PG_TRY();
	{
		bool written = false;
		WrittenPrefixes **prefixes = (WrittenPrefixes **)palloc0(sizeof(WrittenPrefixes *) * n);
		bool timed = StatsKept();
		for (int i = 0; i < n; i++) {
			instr_time start;
			INSTR_TIME_SET_ZERO(start);
			if (timed)
				INSTR_TIME_SET_CURRENT(start);
			written |= ApplyCounter(list[i], params, nulls, &prefixes[i]);
			if (timed) {
				instr_time end;
				INSTR_TIME_SET_CURRENT(end);
				INSTR_TIME_ACCUM_DIFF(list[i]->apply_time, end, start);
			}
		}
		/* Later commands (a threshold callback, the next statement, the window sums) see the new versions. */
		if (written)
			CommandCounterIncrement();
		for (int i = 0; i < n; i++)
			if (prefixes[i] != nullptr)
				CheckWrittenWindows(list[i]->c, prefixes[i]);
	}
	PG_FINALLY();
	{
		mine = TakeCrossings(enclosing);
	}
	PG_END_TRY();
	AnnounceCrossings(mine);
	SPI_finish();
	UnpinSettings(level);
	pfree(params);
	pfree(nulls);
}

} // namespace counters
