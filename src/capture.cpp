/*
 * capture.cpp: the universal formula, applied per statement.
 *
 *     delta[key(old)] -= value(old)   for every old row
 *     delta[key(new)] += value(new)   for every new row
 *     apply every nonzero delta, keys in sorted order
 *
 * Rows come from the statement's transition tables (or from a scan of a partition about to be truncated). Every
 * counter of the source is evaluated in one pass; deltas are summed in a hash table per counter; the nonzero ones
 * are sorted by key (the keys' btree order, so that two statements touching the same keys lock them in the same
 * order and cannot deadlock) and applied with prepared statements, as the counter table's owner, with a pinned
 * search_path.
 *
 * Everything here calls PostgreSQL functions that may raise errors, so no object with a destructor lives on these
 * stacks; all memory is palloc'd in a per-statement context that is freed with the trigger call (or the aborted
 * transaction).
 */
#include "counters.hpp"

extern "C" {
#include "access/heapam.h"
#include "access/relscan.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/tupconvert.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "commands/trigger.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "executor/executor.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/regproc.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace counters {

int statement_memory_kb = 65536;

namespace {

/* The summed delta of one key of one counter. */
struct DeltaEntry {
	DeltaEntry *next; /* hash chain */
	uint32 hash;
	Datum *keys;
	bool *key_nulls;
	int128 *ints;    /* Int64 accumulators (128-bit: intermediate sums may exceed bigint), per value column */
	Datum *numerics; /* Numeric accumulators (NULL datum = zero), per value column */
};

/* Per-counter state of one statement. */
struct CounterRun {
	CompiledCounter *c;
	ExprState *quals;
	ExprState **key_exprs;
	ExprState **arg_exprs;
	ExprState **filter_exprs;
	/* scratch for one row */
	Datum *row_keys;
	bool *row_key_nulls;
	/* hash table */
	DeltaEntry **buckets;
	uint32 nbuckets;
	uint32 nentries;
};

struct Run {
	Oid source;              /* the source whose counters these are */
	MemoryContext cxt;       /* compiled expressions of this statement */
	MemoryContext delta_cxt; /* the deltas: reset whenever they are applied */
	uint64 rows;
	ExprContext *econtext;
	int ncounters;
	CounterRun *runs;
	int64 *row_ints; /* scratch contributions of one row */
	Datum *row_numerics;
	bool *row_present;
	int counting; /* the counter whose definition is being evaluated on a row, or -1 */
};

/* A 64-bit mixer (the splitmix64 finalizer) for pass-by-value keys hashed as they are. */
inline uint32
MixDatum(Datum d)
{
	uint64 x = (uint64)d;
	x ^= x >> 30;
	x *= UINT64CONST(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64CONST(0x94d049bb133111eb);
	x ^= x >> 31;
	return (uint32)x;
}

inline uint32
HashKeys(CounterRun *r, Datum *keys, bool *nulls)
{
	CounterDef *def = r->c->def;
	uint32 h = 0;
	for (int i = 0; i < def->nkeys; i++) {
		uint32 k;
		if (nulls[i])
			k = 0x9e3779b9U;
		else if (r->c->key_fast[i])
			k = MixDatum(keys[i]);
		else
			k = DatumGetUInt32(FunctionCall1Coll(&r->c->key_hash[i], def->keys[i].collation, keys[i]));
		h = hash_combine(h, k);
	}
	return h;
}

inline bool
KeysEqual(CounterRun *r, Datum *a, bool *anull, Datum *b, bool *bnull)
{
	CounterDef *def = r->c->def;
	for (int i = 0; i < def->nkeys; i++) {
		if (anull[i] || bnull[i]) {
			if (anull[i] != bnull[i])
				return false;
			continue;
		}
		if (r->c->key_fast[i]) {
			if (a[i] != b[i])
				return false;
		} else if (!DatumGetBool(FunctionCall2Coll(&r->c->key_eq[i], def->keys[i].collation, a[i], b[i])))
			return false;
	}
	return true;
}

void
Grow(Run *run, CounterRun *r)
{
	uint32 nbuckets = r->nbuckets * 2;
	DeltaEntry **buckets = (DeltaEntry **)MemoryContextAllocZero(run->delta_cxt, sizeof(DeltaEntry *) * nbuckets);
	for (uint32 b = 0; b < r->nbuckets; b++) {
		DeltaEntry *e = r->buckets[b];
		while (e) {
			DeltaEntry *next = e->next;
			e->next = buckets[e->hash & (nbuckets - 1)];
			buckets[e->hash & (nbuckets - 1)] = e;
			e = next;
		}
	}
	pfree(r->buckets);
	r->buckets = buckets;
	r->nbuckets = nbuckets;
}

DeltaEntry *
FindOrAddEntry(Run *run, CounterRun *r)
{
	CounterDef *def = r->c->def;
	uint32 hash = HashKeys(r, r->row_keys, r->row_key_nulls);
	for (DeltaEntry *e = r->buckets[hash & (r->nbuckets - 1)]; e; e = e->next)
		if (e->hash == hash && KeysEqual(r, e->keys, e->key_nulls, r->row_keys, r->row_key_nulls))
			return e;

	MemoryContext old = MemoryContextSwitchTo(run->delta_cxt);
	DeltaEntry *e = (DeltaEntry *)palloc(sizeof(DeltaEntry));
	e->hash = hash;
	e->keys = (Datum *)palloc(sizeof(Datum) * def->nkeys);
	e->key_nulls = (bool *)palloc(sizeof(bool) * def->nkeys);
	for (int i = 0; i < def->nkeys; i++) {
		e->key_nulls[i] = r->row_key_nulls[i];
		e->keys[i] =
		    r->row_key_nulls[i] ? (Datum)0 : datumCopy(r->row_keys[i], r->c->key_byval[i], r->c->key_typlen[i]);
	}
	e->ints = (int128 *)palloc0(sizeof(int128) * def->nvalues);
	e->numerics = (Datum *)palloc0(sizeof(Datum) * def->nvalues);
	MemoryContextSwitchTo(old);

	e->next = r->buckets[hash & (r->nbuckets - 1)];
	r->buckets[hash & (r->nbuckets - 1)] = e;
	if (++r->nentries > r->nbuckets)
		Grow(run, r);
	return e;
}

/*
 * Take the part of a summed integer delta that fits in bigint, leaving the rest in the entry. Within a statement
 * integer deltas are summed in 128 bits; a net change beyond bigint (moving a row whose value is the smallest bigint,
 * say) is applied in more than one step, each moving the stored value towards its final value.
 */
int64
TakeInt64(DeltaEntry *e, int value)
{
	int128 d = e->ints[value];
	int64 part = d > (int128)PG_INT64_MAX ? PG_INT64_MAX : d < (int128)PG_INT64_MIN ? PG_INT64_MIN : (int64)d;
	e->ints[value] -= part;
	return part;
}

/* Take a numeric delta (NULL datum = zero), leaving zero in the entry. */
Datum
TakeNumeric(DeltaEntry *e, int value, Datum zero)
{
	Datum d = e->numerics[value] != (Datum)0 ? e->numerics[value] : zero;
	e->numerics[value] = (Datum)0;
	return d;
}

/* NaN and infinities cannot be subtracted back out of a sum (Infinity - Infinity is NaN): refuse them. */
void
CheckFinite(CounterRun *r, int value, Datum d)
{
	Numeric n = DatumGetNumeric(d);
	if (unlikely(numeric_is_nan(n) || numeric_is_inf(n)))
		ereport(ERROR,
		        (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
		         errmsg("counter \"%s\": column \"%s\" cannot sum %s", r->c->def->name,
		                r->c->def->values[value].column_name, numeric_is_nan(n) ? "NaN" : "an infinite value"),
		         errdetail("A sum that holds NaN or an infinity cannot be corrected when the row changes again."),
		         errhint("Exclude such values with the counter's WHERE or FILTER clause.")));
}

int64
IntegerDatum(Oid type, Datum d)
{
	switch (type) {
	case INT2OID:
		return DatumGetInt16(d);
	case INT4OID:
		return DatumGetInt32(d);
	default:
		return DatumGetInt64(d);
	}
}

/* Add sign * the contribution of the row in econtext's scan slot to its key's delta of one counter. */
void
CountRowFor(Run *run, CounterRun *r, int sign)
{
	ExprContext *econtext = run->econtext;
	CounterDef *def = r->c->def;
	if (r->quals && !ExecQual(r->quals, econtext))
		return;

	bool any = false;
	for (int v = 0; v < def->nvalues; v++) {
		ValueDef *vd = &def->values[v];
		run->row_present[v] = false;
		if (r->filter_exprs[v] && !ExecQual(r->filter_exprs[v], econtext))
			continue;
		bool isnull = false;
		Datum d = (Datum)0;
		if (vd->kind != ValueKind::CountStar) {
			d = ExecEvalExprSwitchContext(r->arg_exprs[v], econtext, &isnull);
			if (isnull)
				continue;
		}
		if (vd->kind == ValueKind::Sum) {
			if (vd->accum == AccumKind::Int64) {
				run->row_ints[v] = IntegerDatum(vd->arg_type, d);
				if (run->row_ints[v] == 0)
					continue;
			} else {
				CheckFinite(r, v, d);
				run->row_numerics[v] = d;
			}
		} else {
			run->row_ints[v] = 1;
		}
		run->row_present[v] = true;
		any = true;
	}
	if (!any)
		return;

	for (int k = 0; k < def->nkeys; k++)
		r->row_keys[k] = ExecEvalExprSwitchContext(r->key_exprs[k], econtext, &r->row_key_nulls[k]);
	DeltaEntry *e = FindOrAddEntry(run, r);
	for (int v = 0; v < def->nvalues; v++) {
		if (!run->row_present[v])
			continue;
		if (def->values[v].accum == AccumKind::Int64) {
			e->ints[v] += sign < 0 ? -(int128)run->row_ints[v] : (int128)run->row_ints[v];
		} else {
			MemoryContext old = MemoryContextSwitchTo(run->delta_cxt);
			Datum add = run->row_numerics[v];
			Datum sum;
			if (e->numerics[v] == (Datum)0)
				sum = sign < 0 ? DirectFunctionCall1(numeric_uminus, add) : datumCopy(add, false, -1);
			else {
				sum = DirectFunctionCall2(sign < 0 ? numeric_sub : numeric_add, e->numerics[v], add);
				pfree(DatumGetPointer(e->numerics[v]));
			}
			e->numerics[v] = sum;
			MemoryContextSwitchTo(old);
		}
	}
}

/*
 * Evaluate every counter on one row (in econtext's scan slot). A definition's expressions are its owner's code: they
 * run as the owner of the counter's table, in a security-restricted operation, whoever wrote the row.
 */
void
CountRow(Run *run, int sign)
{
	for (int ci = 0; ci < run->ncounters; ci++) {
		CounterRun *r = &run->runs[ci];
		run->counting = ci;
		AsOwner owner;
		BecomeOwner(&owner, r->c->owner);
		CountRowFor(run, r, sign);
		RestoreUser(&owner);
	}
	run->counting = -1;
	ResetExprContext(run->econtext);
}

/* An error evaluating a definition on a row (a division by zero, an overflow) names the counter. */
void
CountErrorContext(void *arg)
{
	Run *run = (Run *)arg;
	if (run->counting >= 0)
		errcontext("computing counter \"%s\" for a row written to its source", run->runs[run->counting].c->def->name);
}

void
PushCountContext(ErrorContextCallback *context, Run *run)
{
	run->counting = -1;
	context->callback = CountErrorContext;
	context->arg = run;
	context->previous = error_context_stack;
	error_context_stack = context;
}

ExprState *
InitExpr(Expr *expr)
{
	return expr ? ExecInitExpr(expr, nullptr) : nullptr;
}

void
ResetDeltas(Run *run)
{
	MemoryContextReset(run->delta_cxt);
	for (int i = 0; i < run->ncounters; i++) {
		CounterRun *r = &run->runs[i];
		r->nentries = 0;
		r->nbuckets = 64;
		r->buckets = (DeltaEntry **)MemoryContextAllocZero(run->delta_cxt, sizeof(DeltaEntry *) * r->nbuckets);
	}
}

void ApplyDeltas(Run *run);

/* The per-statement state of the counters of `sc`, in a context under `parent`. */
Run *
StartRun(SourceCounters *sc, MemoryContext parent)
{
	MemoryContext cxt = AllocSetContextCreate(parent, "counters statement", ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	Run *run = (Run *)palloc0(sizeof(Run));
	run->cxt = cxt;
	run->source = sc->source;
	run->econtext = CreateStandaloneExprContext();
	run->ncounters = sc->ncounters;
	run->counting = -1;
	run->runs = (CounterRun *)palloc0(sizeof(CounterRun) * sc->ncounters);
	int maxvalues = 1;
	for (int i = 0; i < sc->ncounters; i++) {
		CompiledCounter *c = &sc->counters[i];
		CounterDef *def = c->def;
		CounterRun *r = &run->runs[i];
		r->c = c;
		/* (as the owner: compiling an expression checks the EXECUTE privilege of its functions) */
		AsOwner owner;
		BecomeOwner(&owner, c->owner);
		r->quals = def->quals ? ExecInitQual(def->quals, nullptr) : nullptr;
		r->key_exprs = (ExprState **)palloc(sizeof(ExprState *) * def->nkeys);
		for (int k = 0; k < def->nkeys; k++)
			r->key_exprs[k] = InitExpr(def->keys[k].expr);
		r->arg_exprs = (ExprState **)palloc0(sizeof(ExprState *) * def->nvalues);
		r->filter_exprs = (ExprState **)palloc0(sizeof(ExprState *) * def->nvalues);
		for (int v = 0; v < def->nvalues; v++) {
			r->arg_exprs[v] = InitExpr(def->values[v].arg);
			r->filter_exprs[v] =
			    def->values[v].filter ? ExecInitQual(make_ands_implicit(def->values[v].filter), nullptr) : nullptr;
		}
		RestoreUser(&owner);
		r->row_keys = (Datum *)palloc(sizeof(Datum) * def->nkeys);
		r->row_key_nulls = (bool *)palloc(sizeof(bool) * def->nkeys);
		maxvalues = Max(maxvalues, def->nvalues);
	}
	run->row_ints = (int64 *)palloc(sizeof(int64) * maxvalues);
	run->row_numerics = (Datum *)palloc(sizeof(Datum) * maxvalues);
	run->row_present = (bool *)palloc(sizeof(bool) * maxvalues);
	run->delta_cxt = AllocSetContextCreate(run->cxt, "counters deltas", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(old);
	ResetDeltas(run);
	return run;
}

/* Slots to read rows of `rel` and, for a partition, to convert them to the source's row type. */
struct RowReader {
	TupleTableSlot *slot;      /* rows as stored in rel */
	TupleTableSlot *root_slot; /* rows as the source sees them (== slot unless converting) */
	AttrMap *map;
};

void
InitReader(RowReader *rd, Relation rel, Oid source, const TupleTableSlotOps *ops)
{
	rd->slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), ops);
	rd->root_slot = rd->slot;
	rd->map = nullptr;
	if (source != RelationGetRelid(rel)) {
		Relation root = table_open(source, AccessShareLock);
		TupleDesc root_desc = CreateTupleDescCopy(RelationGetDescr(root));
		table_close(root, AccessShareLock);
		rd->map = build_attrmap_by_name_if_req(RelationGetDescr(rel), root_desc);
		if (rd->map)
			rd->root_slot = MakeSingleTupleTableSlot(root_desc, &TTSOpsVirtual);
	}
}

void
DropReader(RowReader *rd)
{
	if (rd->root_slot != rd->slot)
		ExecDropSingleTupleTableSlot(rd->root_slot);
	ExecDropSingleTupleTableSlot(rd->slot);
}

inline void
CountSlot(Run *run, RowReader *rd, int sign)
{
	TupleTableSlot *slot = rd->map ? execute_attr_map_slot(rd->map, rd->slot, rd->root_slot) : rd->slot;
	run->econtext->ecxt_scantuple = slot;
	CountRow(run, sign);
	/*
	 * Bounded memory: when the deltas of a huge statement outgrow counters.statement_memory, apply them and go on.
	 * Each batch is applied in sorted key order; only statements larger than one batch lose the global order.
	 */
	if (unlikely(++run->rows % 1024 == 0) &&
	    MemoryContextMemAllocated(run->delta_cxt, true) > (Size)statement_memory_kb * 1024) {
		ApplyDeltas(run);
		ResetDeltas(run);
	}
}

void
CountTuplestore(Run *run, RowReader *rd, Tuplestorestate *ts, int sign)
{
	if (ts == nullptr)
		return;
	ErrorContextCallback context;
	PushCountContext(&context, run);
	tuplestore_rescan(ts);
	while (tuplestore_gettupleslot(ts, true, false, rd->slot)) {
		CHECK_FOR_INTERRUPTS();
		CountSlot(run, rd, sign);
	}
	error_context_stack = context.previous;
}

/* Sort support for the entries of one counter. */
int
CompareEntries(const void *pa, const void *pb, void *arg)
{
	CounterRun *r = (CounterRun *)arg;
	const DeltaEntry *a = *(DeltaEntry *const *)pa;
	const DeltaEntry *b = *(DeltaEntry *const *)pb;
	CounterDef *def = r->c->def;
	for (int i = 0; i < def->nkeys; i++) {
		if (a->key_nulls[i] || b->key_nulls[i]) {
			if (a->key_nulls[i] == b->key_nulls[i])
				continue;
			return a->key_nulls[i] ? 1 : -1; /* NULLS LAST, as ORDER BY */
		}
		int cmp = DatumGetInt32(FunctionCall2Coll(&r->c->key_cmp[i], def->keys[i].collation, a->keys[i], b->keys[i]));
		if (cmp != 0)
			return cmp;
	}
	return 0;
}

bool
EntryIsZero(CounterDef *def, DeltaEntry *e)
{
	for (int v = 0; v < def->nvalues; v++) {
		if (def->values[v].accum == AccumKind::Int64) {
			if (e->ints[v] != 0)
				return false;
		} else if (e->numerics[v] != (Datum)0 &&
		           !DatumGetBool(DirectFunctionCall2(numeric_eq, e->numerics[v],
		                                             DirectFunctionCall1(int8_numeric, Int64GetDatum(0)))))
			return false;
	}
	return true;
}

Datum
ZeroNumeric()
{
	return DirectFunctionCall1(int8_numeric, Int64GetDatum(0));
}

/* One prepared statement per key: the cheapest path for the one or few keys of an OLTP statement. */
void
ApplyEach(CounterRun *r, DeltaEntry **sorted, uint32 n, Datum *params, char *nulls)
{
	CounterDef *def = r->c->def;
	Datum zero_numeric = ZeroNumeric();
	/* Rows that exist are updated directly; the upsert inserts the others (and serves tables that need it). */
	DirectTarget *direct = DirectBegin(r->c);
	for (uint32 i = 0; i < n; i++) {
		DeltaEntry *e = sorted[i];
		for (int k = 0; k < def->nkeys; k++) {
			params[k] = e->keys[k];
			nulls[k] = e->key_nulls[k] ? 'n' : ' ';
		}
		for (int v = 0; v < def->nvalues; v++) {
			int p = def->nkeys + v;
			nulls[p] = ' ';
			if (def->values[v].accum == AccumKind::Int64)
				params[p] = Int64GetDatum(TakeInt64(e, v));
			else
				params[p] = TakeNumeric(e, v, zero_numeric);
		}
		int free_slot = 0;
		if (direct != nullptr && DirectAdd(direct, params, nulls, &free_slot) == DirectResult::Applied)
			continue;
		if (r->c->sharded) {
			/* no slot row free: create one (or wait for this backend's own, if all max_slots exist) */
			params[def->nkeys + def->nvalues] = Int32GetDatum(free_slot);
			nulls[def->nkeys + def->nvalues] = ' ';
		}
		int ret;
		/* (a table with CHECK constraints: an existing row is updated first, see PreparePlans) */
		if (r->c->update_plan != nullptr &&
		    (ret = SPI_execute_plan(r->c->update_plan, params, nulls, false, 0)) == SPI_OK_UPDATE_RETURNING &&
		    SPI_processed == 1)
			ret = SPI_OK_INSERT_RETURNING;
		else
			ret = SPI_execute_plan(r->c->apply_plan, params, nulls, false, 0);
		if (r->c->append_only) {
			if (ret != SPI_OK_INSERT)
				elog(ERROR, "counters: logging a delta of counter \"%s\" failed: %s", def->name,
				     SPI_result_code_string(ret));
		} else if (r->c->owns_target) {
			if (ret != SPI_OK_INSERT_RETURNING || SPI_processed != 1)
				elog(ERROR, "counters: applying a delta to counter \"%s\" failed: %s", def->name,
				     SPI_result_code_string(ret));
			SPITupleTable *upserted = SPI_tuptable;
			bool isnull;
			for (int v = 0; (r->c->has_min != nullptr || r->c->has_thresholds) && v < def->nvalues; v++) {
				Datum value = SPI_getbinval(upserted->vals[0], upserted->tupdesc, 3 + v, &isnull);
				Oid type = SPI_gettypeid(upserted->tupdesc, 3 + v);
				CheckBounds(r->c, v, value, type, params, nulls);
				NoteCrossings(r->c, v, value, type, params[def->nkeys + v], params, nulls);
			}
			bool all_zero = DatumGetBool(SPI_getbinval(upserted->vals[0], upserted->tupdesc, 2, &isnull));
			if (all_zero) {
				Datum ctid = SPI_getbinval(upserted->vals[0], upserted->tupdesc, 1, &isnull);
				ret = SPI_execute_plan(r->c->delete_plan, &ctid, nullptr, false, 0);
				if (ret != SPI_OK_DELETE)
					elog(ERROR, "counters: deleting a zero row of counter \"%s\" failed: %s", def->name,
					     SPI_result_code_string(ret));
			}
			SPI_freetuptable(upserted);
		} else if (ret != SPI_OK_UPDATE_RETURNING) {
			elog(ERROR, "counters: applying a delta to counter \"%s\" failed: %s", def->name,
			     SPI_result_code_string(ret));
		} else {
			for (uint64 row = 0; row < SPI_processed && (r->c->has_min != nullptr || r->c->has_thresholds); row++)
				for (int v = 0; v < def->nvalues; v++) {
					bool isnull;
					Datum value = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 1 + v, &isnull);
					Oid type = SPI_gettypeid(SPI_tuptable->tupdesc, 1 + v);
					if (isnull)
						continue;
					CheckBounds(r->c, v, value, type, params, nulls);
					NoteCrossings(r->c, v, value, type, params[def->nkeys + v], params, nulls);
				}
			SPI_freetuptable(SPI_tuptable);
		}
	}
	DirectEnd(direct);
}

/* Delete the rows the bulk upsert just brought back to all zeros (its RETURNING says which); `scratch` holds n. */
void
DeleteZeroRows(CompiledCounter *c, Datum *scratch)
{
	SPITupleTable *upserted = SPI_tuptable;
	uint64 nrows = SPI_processed;
	uint32 nzero = 0;
	CounterDef *def = c->def;
	if (c->has_min != nullptr) {
		/* RETURNING ctid, all zero, the values, then the keys */
		Datum *keys = (Datum *)palloc(sizeof(Datum) * def->nkeys);
		char *key_nulls = (char *)palloc(sizeof(char) * def->nkeys);
		for (uint64 i = 0; i < nrows; i++) {
			bool isnull;
			for (int k = 0; k < def->nkeys; k++) {
				keys[k] = SPI_getbinval(upserted->vals[i], upserted->tupdesc, 3 + def->nvalues + k, &isnull);
				key_nulls[k] = isnull ? 'n' : ' ';
			}
			for (int v = 0; v < def->nvalues; v++)
				CheckBounds(c, v, SPI_getbinval(upserted->vals[i], upserted->tupdesc, 3 + v, &isnull),
				            SPI_gettypeid(upserted->tupdesc, 3 + v), keys, key_nulls);
		}
	}
	for (uint64 i = 0; i < nrows; i++) {
		bool isnull;
		if (DatumGetBool(SPI_getbinval(upserted->vals[i], upserted->tupdesc, 2, &isnull)))
			scratch[nzero++] = SPI_getbinval(upserted->vals[i], upserted->tupdesc, 1, &isnull);
	}
	if (nzero > 0) {
		Datum tids =
		    PointerGetDatum(construct_array(scratch, nzero, TIDOID, sizeof(ItemPointerData), false, TYPALIGN_SHORT));
		int ret = SPI_execute_plan(c->bulk_delete_plan, &tids, nullptr, false, 0);
		if (ret != SPI_OK_DELETE)
			elog(ERROR, "counters: deleting zero rows of counter \"%s\" failed: %s", c->def->name,
			     SPI_result_code_string(ret));
	}
	SPI_freetuptable(upserted);
}

/* All keys in one upsert fed by arrays (sorted), then one delete of the rows that came back to zero. */
void
ApplyBulk(CounterRun *r, DeltaEntry **sorted, uint32 n, Datum *params)
{
	CompiledCounter *c = r->c;
	CounterDef *def = c->def;
	Datum *elems = (Datum *)palloc(sizeof(Datum) * n);
	bool *elem_nulls = (bool *)palloc(sizeof(bool) * n);
	int dims[1] = {(int)n};
	int lbs[1] = {1};
	for (int k = 0; k < def->nkeys; k++) {
		for (uint32 i = 0; i < n; i++) {
			elems[i] = sorted[i]->keys[k];
			elem_nulls[i] = sorted[i]->key_nulls[k];
		}
		params[k] = PointerGetDatum(construct_md_array(elems, elem_nulls, 1, dims, lbs, def->keys[k].type,
		                                               c->key_typlen[k], c->key_byval[k], c->key_typalign[k]));
	}
	Datum zero_numeric = ZeroNumeric();
	for (int v = 0; v < def->nvalues; v++) {
		bool ints = def->values[v].accum == AccumKind::Int64;
		for (uint32 i = 0; i < n; i++)
			elems[i] = ints ? Int64GetDatum(TakeInt64(sorted[i], v)) : TakeNumeric(sorted[i], v, zero_numeric);
		params[def->nkeys + v] = PointerGetDatum(ints ? construct_array(elems, n, INT8OID, 8, true, TYPALIGN_DOUBLE)
		                                              : construct_array(elems, n, NUMERICOID, -1, false, TYPALIGN_INT));
	}
	int ret = SPI_execute_plan(c->bulk_plan, params, nullptr, false, 0);
	if (c->append_only) {
		if (ret != SPI_OK_INSERT || SPI_processed != n)
			elog(ERROR, "counters: logging deltas of counter \"%s\" failed: %s", def->name,
			     SPI_result_code_string(ret));
	} else {
		if (ret != SPI_OK_INSERT_RETURNING || SPI_processed != n)
			elog(ERROR, "counters: applying deltas to counter \"%s\" failed: %s", def->name,
			     SPI_result_code_string(ret));
		DeleteZeroRows(c, elems);
	}
	for (int p = 0; p < def->nkeys + def->nvalues; p++)
		pfree(DatumGetPointer(params[p]));
	pfree(elems);
	pfree(elem_nulls);
}

/* now() - keep, as the bucket column's type (date, timestamp in the session's time zone, or timestamptz). */
Datum
RetentionHorizon(CompiledCounter *c)
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

void
ApplyErrorContext(void *arg)
{
	const char *name = (const char *)arg;
	/* A key too long for the counter table's btree index: say what to do about it. */
	if (geterrcode() == ERRCODE_PROGRAM_LIMIT_EXCEEDED)
		errhint("The keys of counter \"%s\" must fit in its table's index (about 2,700 bytes): count a shorter key, "
		        "e.g. left(tag, 1000) or md5(tag).",
		        name);
	errcontext("applying deltas to counter \"%s\"", name);
}

void
ApplyCounter(CounterRun *r, Datum *params, char *nulls)
{
	CounterDef *def = r->c->def;
	if (r->nentries == 0)
		return;
	DeltaEntry **sorted = (DeltaEntry **)palloc(sizeof(DeltaEntry *) * r->nentries);
	uint32 n = 0;
	/* Retention: buckets older than the horizon are no longer kept (counters.set_retention); their deltas go. */
	int rk = r->c->retention_key;
	Datum horizon = rk >= 0 ? RetentionHorizon(r->c) : (Datum)0;
	for (uint32 b = 0; b < r->nbuckets; b++)
		for (DeltaEntry *e = r->buckets[b]; e; e = e->next)
			if (!EntryIsZero(def, e) && (rk < 0 || e->key_nulls[rk] ||
			                             DatumGetInt32(FunctionCall2Coll(&r->c->key_cmp[rk], def->keys[rk].collation,
			                                                             e->keys[rk], horizon)) >= 0))
				sorted[n++] = e;
	if (n == 0)
		return;
	if (n > 1)
		qsort_arg(sorted, n, sizeof(DeltaEntry *), CompareEntries, r);

	/* Errors raised while applying (an overflow of a stored value, a constraint) name the counter. */
	ErrorContextCallback context;
	context.callback = ApplyErrorContext;
	context.arg = (void *)def->name;
	context.previous = error_context_stack;
	error_context_stack = &context;
	/*
	 * Deltas are applied with the privileges of the counter table's owner, so that a role that may write the source
	 * but not the counter table still keeps the counter exact; triggers the owner put on its table run as the owner.
	 */
	AsOwner owner;
	BecomeOwner(&owner, r->c->owner);
	/* (Crossing thresholds needs each key's delta next to its new value: key by key.) */
	if (n > 1 && r->c->bulk_plan != nullptr && !r->c->has_thresholds && !r->c->has_check)
		ApplyBulk(r, sorted, n, params);
	else
		ApplyEach(r, sorted, n, params, nulls);
	/* What did not fit in bigint in one step (rare), in further steps, in the same order. */
	for (;;) {
		uint32 left = 0;
		for (uint32 i = 0; i < n; i++)
			if (!EntryIsZero(def, sorted[i]))
				sorted[left++] = sorted[i];
		if (left == 0)
			break;
		n = left;
		ApplyEach(r, sorted, n, params, nulls);
	}
	error_context_stack = context.previous;
	RestoreUser(&owner);
	pfree(sorted);
}

/* A value that crossed a threshold (counters.set_thresholds). */
struct Crossing {
	CompiledCounter *c;
	int v;
	Datum *keys;
	bool *key_nulls;
	Datum old_value; /* numeric */
	Datum new_value;
	Datum threshold;
	bool up;
};

/* The crossings of the statement being applied (allocated in CurTransactionContext). */
List *crossings = NIL;

/*
 * The first counter whose threshold crossing this transaction announced, and the subtransaction level it was
 * announced at (a subtransaction that rolls back takes its notifications with it).
 */
char notified_counter[NAMEDATALEN];
int notified_level = 0;

void
AppendJsonValue(StringInfo buf, Oid type, Datum value)
{
	Oid out;
	bool varlena;
	getTypeOutputInfo(type, &out, &varlena);
	char *text = OidOutputFunctionCall(out, value);
	switch (type) {
	case INT2OID:
	case INT4OID:
	case INT8OID:
	case NUMERICOID:
	case OIDOID:
		appendStringInfoString(buf, text);
		break;
	case BOOLOID:
		appendStringInfoString(buf, DatumGetBool(value) ? "true" : "false");
		break;
	default:
		escape_json(buf, text);
	}
}

/*
 * Announce each crossing: NOTIFY on channel "counters.<counter>" (delivered if the transaction commits) with a JSON
 * payload, then the counter's callback for the column, if any, called as the user whose statement crossed it.
 */
void
AnnounceCrossings(List *list)
{
	ListCell *lc;
	foreach (lc, list) {
		Crossing *x = (Crossing *)lfirst(lc);
		CompiledCounter *c = x->c;
		CounterDef *def = c->def;
		StringInfoData key;
		initStringInfo(&key);
		appendStringInfoChar(&key, '{');
		for (int k = 0; k < def->nkeys; k++) {
			if (k > 0)
				appendStringInfoString(&key, ", ");
			escape_json(&key, c->key_columns[k]);
			appendStringInfoString(&key, ": ");
			if (x->key_nulls[k])
				appendStringInfoString(&key, "null");
			else
				AppendJsonValue(&key, def->keys[k].type, x->keys[k]);
		}
		appendStringInfoChar(&key, '}');
		char *old_text = DatumGetCString(DirectFunctionCall1(numeric_out, x->old_value));
		char *new_text = DatumGetCString(DirectFunctionCall1(numeric_out, x->new_value));
		char *threshold_text = DatumGetCString(DirectFunctionCall1(numeric_out, x->threshold));
		const char *direction = x->up ? "up" : "down";
		StringInfoData payload;
		initStringInfo(&payload);
		appendStringInfoString(&payload, "{\"counter\": ");
		escape_json(&payload, def->name);
		appendStringInfo(&payload, ", \"key\": %s, \"column\": ", key.data);
		escape_json(&payload, def->values[x->v].column_name);
		appendStringInfo(&payload, ", \"old\": %s, \"new\": %s, \"threshold\": %s, \"direction\": \"%s\"}", old_text,
		                 new_text, threshold_text, direction);
		Async_Notify(psprintf("counters.%s", def->name), payload.data);
		if (notified_counter[0] == '\0') {
			strlcpy(notified_counter, def->name, sizeof(notified_counter));
			notified_level = GetCurrentTransactionNestLevel();
		}
		Oid callback = c->callbacks[x->v];
		if (c->callback_missing[x->v] ||
		    (OidIsValid(callback) && !SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(callback))))
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
			                errmsg("counter \"%s\": the threshold callback of column \"%s\" no longer exists",
			                       def->name, def->values[x->v].column_name),
			                errhint("Set the thresholds again with counters.set_thresholds().")));
		if (OidIsValid(callback)) {
			/* The callback is the owner's code: it runs as the owner, restricted (called directly; its result is
			 * ignored). */
			if (pg_proc_aclcheck(callback, c->owner, ACL_EXECUTE) != ACLCHECK_OK)
				ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				                errmsg("counter \"%s\": its owner %s may not execute the threshold callback %s",
				                       def->name, GetUserNameFromId(c->owner, false), format_procedure(callback))));
			FmgrInfo flinfo;
			fmgr_info(callback, &flinfo);
			LOCAL_FCINFO(fcinfo, 7);
			InitFunctionCallInfoData(*fcinfo, &flinfo, 7, InvalidOid, nullptr, nullptr);
			Datum args[7] = {CStringGetTextDatum(def->name),
			                 DirectFunctionCall1(jsonb_in, CStringGetDatum(key.data)),
			                 CStringGetTextDatum(def->values[x->v].column_name),
			                 x->old_value,
			                 x->new_value,
			                 x->threshold,
			                 CStringGetTextDatum(direction)};
			for (int a = 0; a < 7; a++) {
				fcinfo->args[a].value = args[a];
				fcinfo->args[a].isnull = false;
			}
			AsOwner owner;
			BecomeOwner(&owner, c->owner);
			(void)FunctionCallInvoke(fcinfo);
			RestoreUser(&owner);
		}
	}
}

/*
 * Apply the deltas of `n` counters, in the order given (counters in name order, each counter's keys in sorted order),
 * then announce the threshold crossings of all of them.
 */
void
ApplyCounters(CounterRun **list, int n)
{
	int maxparams = 1;
	bool any = false;
	int pin = PIN_SEARCH_PATH;
	for (int i = 0; i < n; i++) {
		maxparams = Max(maxparams, list[i]->c->def->nkeys + list[i]->c->def->nvalues + 1);
		any |= list[i]->nentries > 0;
		/* (threshold events render keys as text: in the same format in every session) */
		if (list[i]->c->has_thresholds)
			pin |= PIN_OUTPUT;
		/* Policies that would hide counter rows from their owner make the write fail, not drop deltas. */
		if (list[i]->c->has_rls)
			pin |= PIN_ROW_SECURITY;
	}
	if (!any)
		return;
	int level = PinSettings(pin);
	Datum *params = (Datum *)palloc(sizeof(Datum) * maxparams);
	char *nulls = (char *)palloc(sizeof(char) * maxparams);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "counters: SPI_connect failed");
	/*
	 * This statement's threshold crossings; a nested statement (a callback's) collects its own. The outer list is put
	 * back even when applying fails, so no pointer into an aborted context outlives the error.
	 */
	List *outer = crossings;
	crossings = NIL;
	PG_TRY();
	{
		for (int i = 0; i < n; i++)
			ApplyCounter(list[i], params, nulls);
	}
	PG_FINALLY();
	{
		List *mine = crossings;
		crossings = outer;
		outer = mine;
	}
	PG_END_TRY();
	AnnounceCrossings(outer);
	SPI_finish();
	UnpinSettings(level);
	pfree(params);
	pfree(nulls);
}

void
ApplyDeltas(Run *run)
{
	CounterRun **list = (CounterRun **)palloc(sizeof(CounterRun *) * run->ncounters);
	for (int i = 0; i < run->ncounters; i++)
		list[i] = &run->runs[i];
	ApplyCounters(list, run->ncounters);
	pfree(list);
}

void
FinishRun(Run *run)
{
	ApplyDeltas(run);
	FreeExprContext(run->econtext, true);
	MemoryContextDelete(run->cxt);
}

} // namespace

Datum
ToNumeric(Datum value, Oid type)
{
	switch (type) {
	case INT8OID:
		return DirectFunctionCall1(int8_numeric, value);
	case INT4OID:
		return DirectFunctionCall1(int4_numeric, value);
	case INT2OID:
		return DirectFunctionCall1(int2_numeric, value);
	default:
		return value;
	}
}

void
CheckBounds(CompiledCounter *c, int v, Datum value, Oid type, Datum *keys, const char *key_nulls)
{
	if (c->has_min == nullptr || (!c->has_min[v] && !c->has_max[v]))
		return;
	Datum n = ToNumeric(value, type);
	bool below = c->has_min[v] && DatumGetInt32(DirectFunctionCall2(numeric_cmp, n, c->min[v])) < 0;
	bool above = c->has_max[v] && DatumGetInt32(DirectFunctionCall2(numeric_cmp, n, c->max[v])) > 0;
	if (!below && !above)
		return;
	CounterDef *def = c->def;
	StringInfoData names, vals;
	initStringInfo(&names);
	initStringInfo(&vals);
	for (int k = 0; k < def->nkeys; k++) {
		appendStringInfo(&names, "%s%s", k ? ", " : "", quote_identifier(c->key_columns[k]));
		if (key_nulls != nullptr && key_nulls[k] == 'n')
			appendStringInfo(&vals, "%snull", k ? ", " : "");
		else {
			Oid out;
			bool varlena;
			getTypeOutputInfo(def->keys[k].type, &out, &varlena);
			appendStringInfo(&vals, "%s%s", k ? ", " : "", OidOutputFunctionCall(out, keys[k]));
		}
	}
	char *would = DatumGetCString(DirectFunctionCall1(numeric_out, n));
	char *bound = DatumGetCString(DirectFunctionCall1(numeric_out, below ? c->min[v] : c->max[v]));
	ereport(ERROR,
	        (errcode(ERRCODE_CHECK_VIOLATION),
	         errmsg("counter \"%s\": %s would be %s for key (%s)=(%s), %s its %s %s", def->name, c->value_columns[v],
	                would, names.data, vals.data, below ? "below" : "above", below ? "minimum" : "maximum", bound),
	         errhint("The bounds were set with counters.set_bounds().")));
}

void
NoteCrossings(CompiledCounter *c, int v, Datum value, Oid type, Datum delta, Datum *keys, const char *key_nulls)
{
	if (!c->has_thresholds || c->nthresholds[v] == 0)
		return;
	CounterDef *def = c->def;
	MemoryContext old = MemoryContextSwitchTo(CurTransactionContext);
	Datum new_value = ToNumeric(value, type);
	Datum old_value = DirectFunctionCall2(
	    numeric_sub, new_value,
	    def->values[v].accum == AccumKind::Int64 ? DirectFunctionCall1(int8_numeric, delta) : delta);
	for (int t = 0; t < c->nthresholds[v]; t++) {
		Datum threshold = c->thresholds[v][t];
		bool was_below = DatumGetInt32(DirectFunctionCall2(numeric_cmp, old_value, threshold)) < 0;
		bool is_below = DatumGetInt32(DirectFunctionCall2(numeric_cmp, new_value, threshold)) < 0;
		if (was_below == is_below)
			continue;
		Crossing *x = (Crossing *)palloc(sizeof(Crossing));
		x->c = c;
		x->v = v;
		x->keys = (Datum *)palloc(sizeof(Datum) * def->nkeys);
		x->key_nulls = (bool *)palloc(sizeof(bool) * def->nkeys);
		for (int k = 0; k < def->nkeys; k++) {
			x->key_nulls[k] = key_nulls != nullptr && key_nulls[k] == 'n';
			x->keys[k] = x->key_nulls[k] ? (Datum)0 : datumCopy(keys[k], c->key_byval[k], c->key_typlen[k]);
		}
		x->old_value = old_value;
		x->new_value = new_value;
		x->threshold = threshold;
		x->up = was_below;
		crossings = lappend(crossings, x);
	}
	MemoryContextSwitchTo(old);
}

namespace {

/*
 * One statement's deltas, applied once when the statement ends. A statement can fire several capture triggers: MERGE
 * with INSERT, UPDATE and DELETE actions, INSERT ... ON CONFLICT DO UPDATE, writable CTEs, cascaded deletes. Applying
 * each event's deltas separately would lock counter rows in one sorted order per event, not per statement, and two
 * such statements could deadlock; so the events' deltas are summed in one frame per statement (executor's
 * ExecutorFinish, which fires the statement's AFTER triggers, or a COPY) and applied at its end, all counters in name
 * order, each counter's keys in sorted order. A trigger firing outside any frame applies at once.
 */
struct Frame {
	Frame *prev;
	MemoryContext parent; /* where the frame's context is created, when first needed */
	MemoryContext cxt;
	List *runs; /* Run *, one per source */
};

Frame *current_frame = nullptr;
ExecutorFinish_hook_type prev_executor_finish = nullptr;
ProcessUtility_hook_type prev_process_utility = nullptr;

void
PushFrame(Frame *frame)
{
	frame->prev = current_frame;
	frame->parent = CurrentMemoryContext;
	frame->cxt = nullptr;
	frame->runs = NIL;
	current_frame = frame;
}

/* The run of `sc`'s source in the current frame, started when the statement's first event for it fires. */
Run *
FrameRun(Frame *frame, SourceCounters *sc)
{
	ListCell *lc;
	foreach (lc, frame->runs) {
		Run *run = (Run *)lfirst(lc);
		if (run->source == sc->source)
			return run;
	}
	if (frame->cxt == nullptr)
		frame->cxt = AllocSetContextCreate(frame->parent, "counters statement frame", ALLOCSET_SMALL_SIZES);
	Run *run = StartRun(sc, frame->cxt);
	MemoryContext old = MemoryContextSwitchTo(frame->cxt);
	frame->runs = lappend(frame->runs, run);
	MemoryContextSwitchTo(old);
	return run;
}

int
CompareCounterNames(const void *a, const void *b)
{
	return strcmp((*(CounterRun *const *)a)->c->def->name, (*(CounterRun *const *)b)->c->def->name);
}

/* Apply a finished statement's deltas: every counter of every source it wrote, in name order. */
void
ApplyFrame(Frame *frame)
{
	if (frame->runs == NIL)
		return;
	int n = 0;
	ListCell *lc;
	foreach (lc, frame->runs)
		n += ((Run *)lfirst(lc))->ncounters;
	MemoryContext old = MemoryContextSwitchTo(frame->cxt);
	CounterRun **list = (CounterRun **)palloc(sizeof(CounterRun *) * n);
	n = 0;
	foreach (lc, frame->runs) {
		Run *run = (Run *)lfirst(lc);
		for (int i = 0; i < run->ncounters; i++)
			list[n++] = &run->runs[i];
	}
	if (n > 1)
		qsort(list, n, sizeof(CounterRun *), CompareCounterNames);
	ApplyCounters(list, n);
	MemoryContextSwitchTo(old);
	foreach (lc, frame->runs)
		FreeExprContext(((Run *)lfirst(lc))->econtext, true);
	MemoryContextDelete(frame->cxt);
}

/* Run `body` inside a frame of its own; its deltas are applied when it returns. */
#define WITH_FRAME(body)                                                                                               \
	do {                                                                                                               \
		Frame frame;                                                                                                   \
		PushFrame(&frame);                                                                                             \
		PG_TRY();                                                                                                      \
		{                                                                                                              \
			body;                                                                                                      \
		}                                                                                                              \
		PG_CATCH();                                                                                                    \
		{                                                                                                              \
			current_frame = frame.prev;                                                                                \
			PG_RE_THROW();                                                                                             \
		}                                                                                                              \
		PG_END_TRY();                                                                                                  \
		current_frame = frame.prev;                                                                                    \
		ApplyFrame(&frame);                                                                                            \
	} while (0)

void
CountersExecutorFinish(QueryDesc *query)
{
	WITH_FRAME(if (prev_executor_finish) prev_executor_finish(query); else standard_ExecutorFinish(query));
}

void
CountersProcessUtility(PlannedStmt *pstmt, const char *query_string, bool read_only_tree, ProcessUtilityContext context,
                       ParamListInfo params, QueryEnvironment *env, DestReceiver *dest, QueryCompletion *qc)
{
	/* COPY FROM fires its AFTER triggers itself, outside the executor. */
	if (IsA(pstmt->utilityStmt, CopyStmt))
		WITH_FRAME(if (prev_process_utility)
		               prev_process_utility(pstmt, query_string, read_only_tree, context, params, env, dest, qc);
		           else standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, env, dest, qc));
	else if (prev_process_utility)
		prev_process_utility(pstmt, query_string, read_only_tree, context, params, env, dest, qc);
	else
		standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, env, dest, qc);
}

/*
 * PostgreSQL refuses to PREPARE a transaction that sent a NOTIFY, with a message that does not say why there was one:
 * name the counter whose threshold sent it.
 */
void
TransactionCallback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_PRE_PREPARE && notified_counter[0] != '\0')
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": a threshold crossed in this transaction sent a notification, which a "
		                       "prepared transaction cannot",
		                       notified_counter),
		                errdetail("Threshold events are sent with NOTIFY, and PREPARE TRANSACTION refuses transactions "
		                          "that executed NOTIFY."),
		                errhint("Commit such transactions directly, or remove the counter's thresholds.")));
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE ||
	    event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		notified_counter[0] = '\0';
}

void
SubtransactionCallback(SubXactEvent event, SubTransactionId sub, SubTransactionId parent, void *arg)
{
	if (notified_counter[0] == '\0')
		return;
	int level = GetCurrentTransactionNestLevel();
	if (event == SUBXACT_EVENT_ABORT_SUB && level <= notified_level)
		notified_counter[0] = '\0';
	else if (event == SUBXACT_EVENT_COMMIT_SUB && level == notified_level)
		notified_level = level - 1;
}

/* A relation that carries the capture triggers must feed a counter: otherwise they count nothing, silently. */
void
RequireCounters(Relation rel, SourceCounters *sc)
{
	if (sc->ncounters > 0)
		return;
	ereport(ERROR,
	        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
	         errmsg("table %s has the triggers of counters, but no counter is declared on it",
	                QualifiedName(RelationGetRelid(rel))),
	         errdetail("counters.counter has no row for it: a schema-only dump (pg_dump --schema-only) does "
	                   "not contain the rows of the extension's catalog, so the counters it held are not "
	                   "restored."),
	         errhint("Restore counters.counter too (a full dump, or pg_dump --data-only --table=counters.counter), "
	                 "or remove the triggers with SELECT counters.detach('%s').",
	                 QualifiedName(RelationGetRelid(rel)))));
}

void
CountTransitionTables(Relation rel, SourceCounters *sc, Tuplestorestate *old_rows, Tuplestorestate *new_rows)
{
	/*
	 * Every row is evaluated, also for an UPDATE that sets no column a counter reads: its old and new rows cancel out
	 * in the delta table and nothing is written. (tg_updatedcols cannot be trusted to skip the work: BEFORE row
	 * triggers change other columns, and two UPDATEs of the table in one query fire one trigger with the columns of
	 * the last.)
	 */
	Run *run = current_frame != nullptr ? FrameRun(current_frame, sc) : StartRun(sc, CurrentMemoryContext);
	RowReader rd;
	InitReader(&rd, rel, run->source, &TTSOpsMinimalTuple);
	CountTuplestore(run, &rd, old_rows, -1);
	CountTuplestore(run, &rd, new_rows, 1);
	DropReader(&rd);
	if (current_frame == nullptr)
		FinishRun(run);
}

void
ZeroCounters(SourceCounters *sc)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "counters: SPI_connect failed");
	for (int i = 0; i < sc->ncounters; i++) {
		CompiledCounter *c = &sc->counters[i];
		AsOwner owner;
		BecomeOwner(&owner, c->owner);
		int ret = SPI_execute_plan(c->truncate_plan, nullptr, nullptr, false, 0);
		if (ret != SPI_OK_DELETE && ret != SPI_OK_UPDATE)
			elog(ERROR, "counters: emptying counter \"%s\" failed: %s", c->def->name, SPI_result_code_string(ret));
		RestoreUser(&owner);
	}
	SPI_finish();
}

} // namespace

void
CountRelationRows(Relation rel, Oid source, int sign)
{
	SourceCounters *sc = GetSourceCounters(source);
	if (sc->ncounters == 0)
		return;
	Run *run = StartRun(sc, CurrentMemoryContext);
	RowReader rd;
	InitReader(&rd, rel, sc->source, table_slot_callbacks(rel));
	/* The latest snapshot: rows committed by anyone before our lock on rel are in the table and must count. */
	Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
	TableScanDesc scan = table_beginscan(rel, snapshot, 0, nullptr);
	ErrorContextCallback context;
	PushCountContext(&context, run);
	while (table_scan_getnextslot(scan, ForwardScanDirection, rd.slot)) {
		CHECK_FOR_INTERRUPTS();
		CountSlot(run, &rd, sign);
	}
	error_context_stack = context.previous;
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	DropReader(&rd);
	FinishRun(run);
}

void
Capture(TriggerData *td)
{
	TriggerEvent ev = td->tg_event;
	Relation rel = td->tg_relation;
	/*
	 * counters_begin, BEFORE the statement: nothing to do. Its call loads this library before the statement's AFTER
	 * triggers fire, so that even a backend's first statement collects its events' deltas in one frame.
	 */
	if (TRIGGER_FIRED_BEFORE(ev) && !TRIGGER_FIRED_BY_TRUNCATE(ev))
		return;
	/* Nothing the extension runs may depend on the caller's search_path. */
	int level = PinSettings(PIN_SEARCH_PATH);
	SourceCounters *sc = GetSourceCounters(RelationGetRelid(rel));
	RequireCounters(rel, sc);
	/* Definitions that turn dates, floats or bytea into text get the same text in every session. */
	int output_level = sc->fixed_output ? PinSettings(PIN_OUTPUT) : -1;
	if (TRIGGER_FIRED_BY_TRUNCATE(ev)) {
		if (TRIGGER_FIRED_BEFORE(ev))
			CountRelationRows(rel, sc->source, -1); /* a partition: take its rows away before they vanish */
		else
			ZeroCounters(sc); /* the whole source is empty */
	} else {
		Tuplestorestate *old_rows = nullptr;
		Tuplestorestate *new_rows = nullptr;
		if (TRIGGER_FIRED_BY_INSERT(ev))
			new_rows = td->tg_newtable;
		else if (TRIGGER_FIRED_BY_UPDATE(ev)) {
			old_rows = td->tg_oldtable;
			new_rows = td->tg_newtable;
		} else
			old_rows = td->tg_oldtable;
		if ((TRIGGER_FIRED_BY_INSERT(ev) || TRIGGER_FIRED_BY_UPDATE(ev)) && new_rows == nullptr)
			ereport(ERROR,
			        (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			         errmsg("counters.capture() on \"%s\" needs REFERENCING NEW TABLE", RelationGetRelationName(rel)),
			         errhint("Re-create the triggers with counters.attach().")));
		if ((TRIGGER_FIRED_BY_DELETE(ev) || TRIGGER_FIRED_BY_UPDATE(ev)) && old_rows == nullptr)
			ereport(ERROR,
			        (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			         errmsg("counters.capture() on \"%s\" needs REFERENCING OLD TABLE", RelationGetRelationName(rel)),
			         errhint("Re-create the triggers with counters.attach().")));
		CountTransitionTables(rel, sc, old_rows, new_rows);
	}
	if (output_level >= 0)
		UnpinSettings(output_level);
	UnpinSettings(level);
}

void
InitCapture()
{
	prev_executor_finish = ExecutorFinish_hook;
	ExecutorFinish_hook = CountersExecutorFinish;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = CountersProcessUtility;
	RegisterXactCallback(TransactionCallback, nullptr);
	RegisterSubXactCallback(SubtransactionCallback, nullptr);
}

} // namespace counters
