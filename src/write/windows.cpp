/*
 * windows.cpp: thresholds on a sliding-window sum ("a hashtag trends when it reaches 10,000 uses in a region within
 * 24 hours").
 *
 * An exact counter keyed by a time bucket (and other keys: the prefix) has at most one window: its bucket key column
 * and a width. A value column's window sum for a prefix is the sum of its rows whose bucket is later than
 * now() - width. Which thresholds each prefix's window sum is at or above, as announced, is kept in a table of the
 * counter owner's (counters.counter.crossings, <table>_crossings); a crossing is announced when that changes, once:
 *   - a statement that writes the counter checks the prefixes it wrote, once its deltas are applied (what it wrote and
 *     what others committed count; a concurrent writer of another bucket of the same prefix can be missed, and is
 *     found by the next check_windows()). Usually nothing changes, so the check reads directly, without a statement:
 *     each prefix's buckets in the window through the counter table's key index, its recorded crossings through the
 *     state table's; only a prefix whose state changes goes to the statement that records it (SumsDirect). Where
 *     the key index cannot serve (the bucket not its last column, a prefix key of another type, a NULL prefix) a
 *     statement computes the sums (SumsByQuery), as check_windows() does for every prefix;
 *   - counters.check_windows() checks every prefix: buckets ageing out of the window (no write happens then) and
 *     anything missed. compact() calls it, so the compaction worker or a scheduler does it.
 * Crossings are announced as thresholds' are: NOTIFY "counters.<name>" (delivered at commit) with the window in the
 * payload, then the callback, with old NULL (a window sum checked now has no "before" to compare with).
 */
#include "write/write.hpp"
#include "compat.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "funcapi.h"
#include "utils/tuplestore.h"
}

namespace counters {

/*
 * What the direct check of written prefixes found once per compiled counter (see CheckDirect), in the window's memory
 * context; the relations and indexes are checked to still be there at each statement.
 */
struct WindowDirect {
	bool usable;               /* false: the window sums statement checks this counter */
	Oid key_index;             /* the counter table's key index (its columns in key order, the bucket last) */
	RegProcedure *procs;       /* per index column: its = (the prefix), then > (the bucket) */
	Oid *digest_type;          /* per prefix key: indexed by its digest, the base type; else InvalidOid */
	AttrNumber *value_attnums; /* per window column: its attribute in the counter table */
	Oid *value_types;          /* ... and type (int2, int4, int8 or numeric) */
	Oid crossings_index;       /* the state table's unique index (column_name, key_digest(prefix::text), threshold) */
	RegProcedure crossings_procs[2];
	AttrNumber prefix_attnum, threshold_attnum;
};

struct WrittenPrefixes {
	uint32 n;
	DeltaEntry **entries; /* one per prefix where sorting put equal prefixes side by side (else one per key) */
	bool any_null;        /* a prefix key is NULL */
};

namespace {

/* The window sums of some prefixes: per prefix its key as jsonb and per window column its sum (numeric). */
struct WindowRows {
	uint64 n;
	Datum *prefixes;
	Datum **sums; /* [column][row] */
};

/* The window of counter `c` as its options have it, where it is compiled (CompiledCounter.window_bucket); else NULL. */
const WindowOptions *
WindowOf(const CompiledCounter *c)
{
	return c->window_thresholds != nullptr ? c->counter->options->window : nullptr;
}

/* Its width, as text (set_window_thresholds always sets it). */
const char *
WindowWidth(const WindowOptions *w)
{
	return w->width != nullptr ? w->width : "";
}

/*
 * The window's bucket key of counter `c` (an error if the definition has no such key any more, or the state table is
 * gone). The options name it as the definition does, and compile.cpp found it so: the counter table's column may have
 * been renamed since (it is followed by position).
 */
int
RequireWindow(const CompiledCounter *c, const WindowOptions *w)
{
	int bucket = c->window_bucket;
	if (bucket < 0)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
		                errmsg("counter \"%s\": its window's bucket column \"%s\" is gone", c->def->name, w->bucket),
		                errhint("Set its window thresholds again with counters.set_window_thresholds().")));
	if (!OidIsValid(c->counter->crossings))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("counter \"%s\" has window thresholds but no table of their state", c->def->name),
		                errhint("Set its window thresholds again with counters.set_window_thresholds().")));
	return bucket;
}

/*
 * The window sums by the window sums statement (SPI connected, settings pinned): with `prefixes` (one array per
 * prefix key column) of the prefixes a statement wrote, those whose state would change; else of every prefix.
 */
WindowRows
SumsByQuery(CompiledCounter *c, const WindowOptions *w, int bucket, Datum *prefixes)
{
	int np = c->def->nkeys - 1;
	int nargs = prefixes != nullptr ? np + 1 + 2 * w->ncolumns : 1;
	Oid *argtypes = (Oid *)palloc(sizeof(Oid) * nargs);
	Datum *args = (Datum *)palloc(sizeof(Datum) * nargs);
	int a = 0;
	if (prefixes != nullptr)
		for (int k = 0, p = 0; k < c->def->nkeys; k++)
			if (k != bucket) {
				argtypes[a] = get_array_type(c->def->keys[k].type);
				args[a++] = prefixes[p++];
			}
	argtypes[a] = TEXTOID;
	args[a++] = CStringGetTextDatum(WindowWidth(w));
	if (prefixes != nullptr) {
		for (int i = 0; i < w->ncolumns; i++) {
			argtypes[a] = TEXTOID;
			args[a++] = CStringGetTextDatum(w->columns[i].column);
			argtypes[a] = NUMERICARRAYOID;
			args[a++] = c->window_thresholds[i];
		}
	}
	OwnerScope owner;
	EnterOwner(&owner, c->auth, 0);
	int ret;
	if (prefixes != nullptr) {
		/* (the latest snapshot, and this command's writes: what others committed to the prefix's other buckets) */
		Snapshot latest = RegisterSnapshot(GetLatestSnapshot());
		latest->curcid = GetCurrentCommandId(false);
		ret = SPI_execute_snapshot(FetchPlan(c, PLAN_WINDOW_SUMS, nargs, argtypes), args, nullptr, latest,
		                           InvalidSnapshot, true, false, 0);
		UnregisterSnapshot(latest);
	} else
		ret = QueryLatest(WindowSumsStatement(c, false), nargs, argtypes, args, nullptr, false);
	LeaveOwner(&owner);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: window sums of counter \"%s\" failed: %s", c->def->name, SPI_result_code_string(ret));
	WindowRows rows;
	rows.n = SPI_processed;
	rows.prefixes = (Datum *)palloc(sizeof(Datum) * Max(rows.n, 1));
	rows.sums = (Datum **)palloc(sizeof(Datum *) * w->ncolumns);
	for (int i = 0; i < w->ncolumns; i++)
		rows.sums[i] = (Datum *)palloc(sizeof(Datum) * Max(rows.n, 1));
	bool isnull;
	for (uint64 r = 0; r < rows.n; r++) {
		HeapTuple tup = SPI_tuptable->vals[r];
		rows.prefixes[r] = SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull);
		for (int i = 0; i < w->ncolumns; i++)
			rows.sums[i][r] = SPI_getbinval(tup, SPI_tuptable->tupdesc, 2 + i, &isnull);
	}
	return rows;
}

/* The prefix key types whose jsonb form and index comparisons are built in (no code of a type's owner runs). */
bool
BuiltInPrefixType(Oid type)
{
	switch (type) {
	case INT2OID:
	case INT4OID:
	case INT8OID:
	case BOOLOID:
	case TEXTOID:
	case VARCHAROID:
	case BPCHAROID:
	case DATEOID:
	case TIMESTAMPOID:
	case TIMESTAMPTZOID:
	case UUIDOID:
		return true;
	default:
		return false;
	}
}

/* Whether `expr` is counters.key_digest(<column prefix>::text), as the state table's index has it. */
bool
IsPrefixDigest(Node *expr, AttrNumber prefix)
{
	if (!IsA(expr, FuncExpr))
		return false;
	FuncExpr *f = (FuncExpr *)expr;
	if (list_length(f->args) != 1 || f->funcresulttype != BYTEAOID ||
	    strcmp(get_func_name(f->funcid), KEY_DIGEST_NAME) != 0 ||
	    get_func_namespace(f->funcid) != get_namespace_oid("counters", false))
		return false;
	Node *arg = (Node *)linitial(f->args);
	if (!IsA(arg, CoerceViaIO) || ((CoerceViaIO *)arg)->resulttype != TEXTOID)
		return false;
	Node *var = (Node *)((CoerceViaIO *)arg)->arg;
	return IsA(var, Var) && ((Var *)var)->varattno == prefix && ((Var *)var)->vartype == JSONBOID;
}

/* The state table's unique index on (column_name, counters.key_digest(prefix::text), threshold): its operators. */
struct CrossingsQuery {
	AttrNumber name;
	WindowDirect *d;
};

bool
IsCrossingsIndex(Relation index, void *arg)
{
	CrossingsQuery *q = (CrossingsQuery *)arg;
	WindowDirect *d = q->d;
	Form_pg_index form = index->rd_index;
	bool ok = form->indisunique && form->indisvalid && index->rd_rel->relam == BTREE_AM_OID && form->indnkeyatts == 3 &&
	          heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL) && form->indkey.values[0] == q->name &&
	          form->indkey.values[1] == 0 && form->indkey.values[2] == d->threshold_attnum &&
	          index->rd_opcintype[0] == TEXTOID && index->rd_opcintype[1] == BYTEAOID &&
	          index->rd_opcintype[2] == NUMERICOID;
	if (ok) {
		List *exprs = RelationGetIndexExpressions(index);
		ok = list_length(exprs) == 1 && IsPrefixDigest((Node *)linitial(exprs), d->prefix_attnum);
	}
	if (ok) {
		d->crossings_procs[0] = IndexColumnOperator(index, 0, BTEqualStrategyNumber);
		d->crossings_procs[1] = IndexColumnOperator(index, 1, BTEqualStrategyNumber);
		ok = OidIsValid(d->crossings_procs[0]) && OidIsValid(d->crossings_procs[1]);
	}
	return ok;
}

/* The state table's index (see IsCrossingsIndex), or InvalidOid. */
Oid
FindCrossingsIndex(Relation crel, WindowDirect *d)
{
	Oid relid = RelationGetRelid(crel);
	CrossingsQuery q = {get_attnum(relid, "column_name"), d};
	d->prefix_attnum = get_attnum(relid, "prefix");
	d->threshold_attnum = get_attnum(relid, "threshold");
	if (q.name == InvalidAttrNumber || d->prefix_attnum == InvalidAttrNumber ||
	    d->threshold_attnum == InvalidAttrNumber)
		return InvalidOid;
	return FirstIndexOf(crel, IsCrossingsIndex, &q);
}

/*
 * Whether counter `c`'s written prefixes can be checked directly, found once per compiled counter: an exact counter
 * whose table has its key index (found by DirectBegin) with the key columns in order and the bucket last, prefix keys
 * of built-in types, window columns of integer or numeric types, no row-level security, and the state table's index.
 */
WindowDirect *
PrepareDirect(CompiledCounter *c, const WindowOptions *w, int bucket, Relation rel, Relation crel)
{
	const CounterDef *def = c->def;
	MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(c->window_thresholds));
	WindowDirect *d = (WindowDirect *)palloc0(sizeof(WindowDirect));
	c->window_direct = d;
	bool ok = bucket == def->nkeys - 1 && !c->has_rls && c->key_attnums != nullptr && c->value_attnums != nullptr &&
	          c->key_of_column != nullptr && OidIsValid(c->key_index) &&
	          (def->keys[bucket].type == TIMESTAMPOID || def->keys[bucket].type == TIMESTAMPTZOID ||
	           def->keys[bucket].type == DATEOID);
	for (int k = 0; ok && k < def->nkeys; k++)
		ok = c->key_of_column[k] == k && (k == bucket || BuiltInPrefixType(def->keys[k].type));
	if (ok) {
		d->value_attnums = (AttrNumber *)palloc(sizeof(AttrNumber) * w->ncolumns);
		d->value_types = (Oid *)palloc(sizeof(Oid) * w->ncolumns);
		for (int i = 0; ok && i < w->ncolumns; i++) {
			int v = -1;
			for (int j = 0; j < def->nvalues; j++)
				if (strcmp(c->value_columns[j], w->columns[i].column) == 0)
					v = j;
			ok = v >= 0;
			if (ok) {
				d->value_attnums[i] = c->value_attnums[v];
				d->value_types[i] = TupleDescAttr(RelationGetDescr(rel), d->value_attnums[i] - 1)->atttypid;
				ok = d->value_types[i] == INT2OID || d->value_types[i] == INT4OID || d->value_types[i] == INT8OID ||
				     d->value_types[i] == NUMERICOID;
			}
		}
	}
	if (ok) {
		Relation index = index_open(c->key_index, AccessShareLock);
		d->key_index = c->key_index;
		d->procs = (RegProcedure *)palloc(sizeof(RegProcedure) * def->nkeys);
		d->digest_type = (Oid *)palloc0(sizeof(Oid) * def->nkeys);
		for (int j = 0; ok && j < def->nkeys; j++) {
			d->procs[j] = IndexColumnOperator(index, j, j == bucket ? BTGreaterStrategyNumber : BTEqualStrategyNumber);
			ok = OidIsValid(d->procs[j]);
			if (j != bucket && c->key_digested != nullptr && c->key_digested[j])
				d->digest_type[j] = getBaseType(def->keys[j].type);
		}
		ok = ok && index->rd_opcintype[bucket] == def->keys[bucket].type;
		index_close(index, AccessShareLock);
	}
	if (ok) {
		d->crossings_index = FindCrossingsIndex(crel, d);
		ok = OidIsValid(d->crossings_index);
	}
	d->usable = ok;
	MemoryContextSwitchTo(old);
	return d;
}

/*
 * The written prefixes whose thresholds' state would change, and their window sums, read directly: per prefix, its
 * bucket rows later than now() - width through the counter table's key index, and its recorded crossings through the
 * state table's index -- what the window sums statement computes, without a statement per write (the common case is
 * that nothing changed). False, with nothing read, where it cannot (see PrepareDirect; or a prefix key is NULL): the
 * statement does it. As the counter's owner; settings pinned.
 */
bool
SumsDirect(CompiledCounter *c, const WindowOptions *w, int bucket, const WrittenPrefixes *p, WindowRows *rows)
{
	const CounterDef *def = c->def;
	if (p->any_null || (c->window_direct != nullptr && !c->window_direct->usable) || c->key_of_column == nullptr)
		return false;
	int nkeys = def->nkeys;
	OwnerScope owner;
	EnterOwner(&owner, c->auth, 0);
	Relation rel = table_open(c->write_rel, AccessShareLock);
	Relation crel = table_open(c->counter->crossings, AccessShareLock);
	WindowDirect *d = c->window_direct != nullptr ? c->window_direct : PrepareDirect(c, w, bucket, rel, crel);
	/* (the indexes found once must still be there) */
	List *indexes = d->usable ? RelationGetIndexList(rel) : NIL;
	List *cindexes = d->usable ? RelationGetIndexList(crel) : NIL;
	bool ok = d->usable && list_member_oid(indexes, d->key_index) && list_member_oid(cindexes, d->crossings_index);
	list_free(indexes);
	list_free(cindexes);
	if (!ok) {
		table_close(crel, NoLock);
		table_close(rel, NoLock);
		LeaveOwner(&owner);
		return false;
	}
	Relation index = index_open(d->key_index, AccessShareLock);
	Relation cindex = index_open(d->crossings_index, AccessShareLock);
	/* The window: buckets later than now() - width, in the bucket's type (as the statement casts it). */
	Datum width = DirectFunctionCall3(interval_in, CStringGetDatum(WindowWidth(w)), ObjectIdGetDatum(InvalidOid),
	                                  Int32GetDatum(-1));
	Datum since =
	    DirectFunctionCall2(timestamptz_mi_interval, TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()), width);
	if (def->keys[bucket].type == TIMESTAMPOID)
		since = DirectFunctionCall1(timestamptz_timestamp, since);
	else if (def->keys[bucket].type == DATEOID)
		since = DirectFunctionCall1(timestamptz_date, since);
	/* (the latest snapshot, and this command's writes: what others committed to the prefix's other buckets) */
	Snapshot latest = RegisterSnapshot(GetLatestSnapshot());
	latest->curcid = GetCurrentCommandId(false);
	ScanKeyData *keys = (ScanKeyData *)palloc0(sizeof(ScanKeyData) * nkeys);
	for (int j = 0; j < nkeys; j++)
		ScanKeyEntryInitialize(&keys[j], 0, j + 1, j == bucket ? BTGreaterStrategyNumber : BTEqualStrategyNumber,
		                       InvalidOid, index->rd_indcollation[j], d->procs[j], j == bucket ? since : (Datum)0);
	ScanKeyData ckeys[2];
	for (int j = 0; j < 2; j++)
		ScanKeyEntryInitialize(&ckeys[j], 0, j + 1, BTEqualStrategyNumber, InvalidOid, cindex->rd_indcollation[j],
		                       d->crossings_procs[j], (Datum)0);
	IndexScanDesc scan = compat::BeginIndexScan(rel, index, latest, nkeys);
	IndexScanDesc cscan = compat::BeginIndexScan(crel, cindex, latest, 2);
	TupleTableSlot *slot = table_slot_create(rel, nullptr);
	TupleTableSlot *cslot = table_slot_create(crel, nullptr);
	Datum zero = NumericGetDatum(int64_to_numeric(0));
	Datum *column_names = (Datum *)palloc(sizeof(Datum) * w->ncolumns);
	for (int i = 0; i < w->ncolumns; i++)
		column_names[i] = CStringGetTextDatum(w->columns[i].column);
	Oid *types = (Oid *)palloc(sizeof(Oid) * nkeys);
	for (int k = 0; k < nkeys; k++)
		types[k] = def->keys[k].type;
	Datum *sums = (Datum *)palloc(sizeof(Datum) * w->ncolumns);
	int maxth = 1;
	for (int i = 0; i < w->ncolumns; i++)
		maxth = Max(maxth, w->columns[i].nvalues);
	bool *recorded = (bool *)palloc(sizeof(bool) * maxth);
	rows->n = 0;
	rows->prefixes = (Datum *)palloc(sizeof(Datum) * p->n);
	rows->sums = (Datum **)palloc(sizeof(Datum *) * w->ncolumns);
	for (int i = 0; i < w->ncolumns; i++)
		rows->sums[i] = (Datum *)palloc(sizeof(Datum) * p->n);
	for (uint32 r = 0; r < p->n; r++) {
		const Datum *key = p->entries[r]->key;
		CHECK_FOR_INTERRUPTS();
		/* The sums of the prefix's buckets in the window. */
		for (int j = 0; j < nkeys; j++)
			if (j != bucket)
				keys[j].sk_argument = OidIsValid(d->digest_type[j]) ? KeyDigest(key[j], d->digest_type[j]) : key[j];
		for (int i = 0; i < w->ncolumns; i++)
			sums[i] = zero;
		index_rescan(scan, keys, nkeys, nullptr, 0);
		while (index_getnext_slot(scan, ForwardScanDirection, slot)) {
			bool same = true, isnull;
			/* (a row found by a digest is the prefix's when its key is: another key would be a SHA-256 collision) */
			for (int j = 0; same && j < nkeys; j++)
				if (j != bucket && OidIsValid(d->digest_type[j])) {
					Datum stored = slot_getattr(slot, c->key_attnums[j], &isnull);
					same = !isnull && KeyBytesEqual(stored, key[j], d->digest_type[j]);
				}
			for (int i = 0; same && i < w->ncolumns; i++) {
				Datum v = slot_getattr(slot, d->value_attnums[i], &isnull);
				if (!isnull)
					sums[i] = DirectFunctionCall2(numeric_add, sums[i], ToNumeric(v, d->value_types[i]));
			}
		}
		/* The prefix as the state table has it, and which of each column's thresholds are recorded as reached. */
		Datum prefix = RenderKey(c->auth.role(), nkeys - 1, c->key_columns, key, nullptr, types);
		Datum digest = KeyDigest(DirectFunctionCall1(textin, DirectFunctionCall1(jsonb_out, prefix)), TEXTOID);
		bool changed = false;
		for (int i = 0; i < w->ncolumns && !changed; i++) {
			const ColumnThresholds *th = &w->columns[i];
			for (int t = 0; t < th->nvalues; t++)
				recorded[t] = false;
			ckeys[0].sk_argument = column_names[i];
			ckeys[1].sk_argument = digest;
			index_rescan(cscan, ckeys, 2, nullptr, 0);
			while (index_getnext_slot(cscan, ForwardScanDirection, cslot)) {
				bool isnull;
				Datum stored = slot_getattr(cslot, d->prefix_attnum, &isnull);
				if (isnull || !DatumGetBool(DirectFunctionCall2(jsonb_eq, stored, prefix)))
					continue;
				Datum threshold = slot_getattr(cslot, d->threshold_attnum, &isnull);
				for (int t = 0; !isnull && t < th->nvalues; t++)
					if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, threshold, th->values[t])) == 0)
						recorded[t] = true;
			}
			for (int t = 0; t < th->nvalues && !changed; t++)
				changed = (DatumGetInt32(DirectFunctionCall2(numeric_cmp, sums[i], th->values[t])) >= 0) != recorded[t];
		}
		if (changed) {
			rows->prefixes[rows->n] = prefix;
			for (int i = 0; i < w->ncolumns; i++)
				rows->sums[i][rows->n] = sums[i];
			rows->n++;
		}
	}
	index_endscan(cscan);
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(cslot);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(latest);
	index_close(cindex, NoLock);
	index_close(index, NoLock);
	table_close(crel, NoLock);
	table_close(rel, NoLock);
	LeaveOwner(&owner);
	return true;
}

/*
 * Record the state of the prefixes in `rows` (all: every prefix with a window, else only these) and announce what
 * changed; SPI connected, settings pinned. Returns the crossings announced.
 */
int64
Announce(CompiledCounter *c, const WindowOptions *w, const WindowRows *rows, bool all)
{
	if (!all && rows->n == 0)
		return 0;
	int64 announced = 0;
	OwnerScope owner;
	for (int i = 0; i < w->ncolumns; i++) {
		bool isnull;
		/* What changed, as the counter's owner (the state is a table of the owner's). */
		Oid state_types[5] = {TEXTOID, JSONBARRAYOID, NUMERICARRAYOID, NUMERICARRAYOID, BOOLOID};
		const char *column = w->columns[i].column;
		Datum state_args[5] = {
		    CStringGetTextDatum(column),
		    PointerGetDatum(construct_array(rows->prefixes, (int)rows->n, JSONBOID, -1, false, TYPALIGN_INT)),
		    PointerGetDatum(construct_array(rows->sums[i], (int)rows->n, NUMERICOID, -1, false, TYPALIGN_INT)),
		    c->window_thresholds[i], BoolGetDatum(all)};
		EnterOwner(&owner, c->auth, 0);
		int ret = SPI_execute_plan(FetchPlan(c, PLAN_WINDOW_STATE, 5, state_types), state_args, nullptr, false, 0);
		LeaveOwner(&owner);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "counters: window state of counter \"%s\" failed: %s", c->def->name,
			     SPI_result_code_string(ret));
		/* up, prefix, new, threshold */
		for (uint64 r = 0; r < SPI_processed; r++) {
			HeapTuple tup = SPI_tuptable->vals[r];
			bool up = DatumGetBool(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
			NotifyCrossing(c->def->name, column);
			FmgrInfo flinfo;
			if (PrepareCallback(c, "window", column, c->window_callbacks[i], c->window_callback_missing[i], &flinfo)) {
				/* (old: none, a window sum checked now has no "before"; every: none, crossed: 1) */
				Datum fields[9] = {CStringGetTextDatum(c->def->name),
				                   SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull),
				                   CStringGetTextDatum(column),
				                   (Datum)0,
				                   SPI_getbinval(tup, SPI_tuptable->tupdesc, 3, &isnull),
				                   SPI_getbinval(tup, SPI_tuptable->tupdesc, 4, &isnull),
				                   CStringGetTextDatum(up ? "up" : "down"),
				                   (Datum)0,
				                   NumericGetDatum(int64_to_numeric(1))};
				bool nulls[9] = {false, false, false, true, false, false, false, true, false};
				OwnerScope as;
				EnterOwner(&as, c->auth, PIN_SEARCH_PATH | PIN_OUTPUT);
				InvokeCallback(c, &flinfo, fields, nulls);
				LeaveOwner(&as);
			}
			announced++;
		}
	}
	return announced;
}

/* The written prefixes as arrays, one per prefix key column, for the window sums statement (NULL: not possible). */
Datum *
PrefixArrays(const CompiledCounter *c, const WrittenPrefixes *p)
{
	const CounterDef *def = c->def;
	uint32 n = p->n;
	Datum *arrays = (Datum *)palloc(sizeof(Datum) * Max(def->nkeys - 1, 1));
	Datum *elems = (Datum *)palloc(sizeof(Datum) * Max(n, 1));
	bool *nulls = (bool *)palloc(sizeof(bool) * Max(n, 1));
	int dims[1] = {(int)n};
	int lbs[1] = {1};
	for (int k = 0, a = 0; k < def->nkeys; k++) {
		if (k == c->window_bucket)
			continue;
		if (!OidIsValid(get_array_type(def->keys[k].type)))
			return nullptr; /* (no array type: the next check_windows() checks it) */
		for (uint32 i = 0; i < n; i++) {
			elems[i] = p->entries[i]->key[k];
			nulls[i] = p->entries[i]->KeyNulls(def->nkeys)[k];
		}
		arrays[a++] = PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs, def->keys[k].type,
		                                                 c->key_typlen[k], c->key_byval[k], c->key_typalign[k]));
	}
	return arrays;
}

} // namespace

WrittenPrefixes *
WindowPrefixes(const CompiledCounter *c, DeltaEntry **entries, uint32 n)
{
	/* (entries are in key order: with the bucket last, a prefix's keys are side by side, and it is kept once) */
	WrittenPrefixes *p = (WrittenPrefixes *)palloc0(sizeof(WrittenPrefixes));
	p->entries = (DeltaEntry **)palloc(sizeof(DeltaEntry *) * Max(n, 1));
	int nkeys = c->def->nkeys;
	for (uint32 i = 0; i < n; i++) {
		if (p->n > 0 && SameKeysBut(c, p->entries[p->n - 1], entries[i], c->window_bucket))
			continue;
		p->entries[p->n++] = entries[i];
		for (int k = 0; k < nkeys; k++)
			p->any_null |= k != c->window_bucket && entries[i]->KeyNulls(nkeys)[k];
	}
	return p;
}

void
CheckWrittenWindows(CompiledCounter *c, WrittenPrefixes *prefixes)
{
	const WindowOptions *w = WindowOf(c);
	if (w == nullptr || prefixes->n == 0)
		return;
	int bucket = RequireWindow(c, w);
	WindowRows rows;
	if (!SumsDirect(c, w, bucket, prefixes, &rows)) {
		Datum *arrays = PrefixArrays(c, prefixes);
		if (arrays == nullptr)
			return;
		rows = SumsByQuery(c, w, bucket, arrays);
	}
	(void)Announce(c, w, &rows, false);
}

int64
CheckWindows(const char *name)
{
	List *entries = name ? list_make1(LookupCounter(name)) : ReadCatalog(nullptr);
	int64 announced = 0;
	ListCell *lc;
	foreach (lc, entries) {
		Counter *e = (Counter *)lfirst(lc);
		if (!MayMaintain(e)) {
			if (name != nullptr)
				RequireMaintainer(e);
			continue;
		}
		CompiledCounter *c = CompiledOf(e);
		const WindowOptions *w = WindowOf(c);
		if (w == nullptr)
			continue;
		CHECK_FOR_INTERRUPTS();
		int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT);
		SpiConnect();
		WindowRows rows = SumsByQuery(c, w, RequireWindow(c, w), nullptr);
		announced += Announce(c, w, &rows, true);
		SPI_finish();
		UnpinSettings(level);
	}
	return announced;
}

} // namespace counters
