/*
 * capture.cpp: the universal formula, per statement.
 *
 *     delta[key(old)] -= value(old)   for every old row
 *     delta[key(new)] += value(new)   for every new row
 *
 * Rows come from the statement's transition tables (or from a scan of a partition about to be truncated). Every
 * counter of the source is evaluated in one pass, its definition's expressions run as the counter's owner; the
 * deltas are summed per key (delta.cpp) and applied when the statement ends (apply.cpp): the events of one
 * statement (MERGE, INSERT ... ON CONFLICT, writable CTEs, cascades) are collected in one frame, applied together.
 *
 * Everything here calls PostgreSQL functions that may raise errors, so no object with a destructor lives on these
 * stacks; all memory is palloc'd in a per-statement context that is freed with the statement (or the aborted
 * transaction).
 */
#include "capture.hpp"
#include "compat.hpp"

extern "C" {
#include "access/heapam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/tupconvert.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "rewrite/rewriteManip.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "optimizer/optimizer.h"
#include "utils/datum.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"
}

namespace counters {

int statement_memory_kb = 65536;

namespace {

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
	int counting;  /* the counter whose definition is being evaluated on a row, or -1 */
	bool has_join; /* a counter through a parent row is among runs */
};

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

/* A parent row of a counter through a parent row, by key. */
struct ParentEntry {
	int64 key;
	HeapTuple tuple;
};

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
	RequireOwnerScope(r->c->owner);
	ExprContext *econtext = run->econtext;
	CounterDef *def = r->c->def;
	if (OidIsValid(def->parent)) {
		/* the row's parent: given, or looked up by the row's key (no parent, nothing counted: an inner join) */
		HeapTuple parent = r->fixed_parent;
		if (parent == nullptr) {
			bool isnull;
			Datum key = slot_getattr(econtext->ecxt_scantuple, def->child_key, &isnull);
			if (isnull || r->parents == nullptr)
				return;
			int64 k = IntegerDatum(def->join_type, key);
			ParentEntry *found = (ParentEntry *)hash_search(r->parents, &k, HASH_FIND, nullptr);
			if (found == nullptr)
				return;
			parent = found->tuple;
		}
		ExecStoreHeapTuple(parent, r->parent_slot, false);
		econtext->ecxt_innertuple = r->parent_slot;
	}
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
		r->row_key.values[k] = ExecEvalExprSwitchContext(r->key_exprs[k], econtext, &r->row_key.nulls[k]);
	DeltaEntry *e = DeltaOfRowKey(r);
	for (int v = 0; v < def->nvalues; v++) {
		if (!run->row_present[v])
			continue;
		if (def->values[v].accum == AccumKind::Int64)
			e->Ints(def->nvalues)[v] += sign < 0 ? -(int128)run->row_ints[v] : (int128)run->row_ints[v];
		else
			DeltaAddNumeric(r, e, v, sign, run->row_numerics[v]);
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
		OwnerScope owner;
		EnterOwner(&owner, r->c->owner, 0);
		CountRowFor(run, r, sign);
		LeaveOwner(&owner);
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

/* An expression of a counter through a parent row reads the parent's columns (varno 2) from the inner slot. */
Expr *
ForRun(const CounterDef *def, Expr *expr)
{
	if (expr == nullptr || !OidIsValid(def->parent))
		return expr;
	Expr *copy = (Expr *)copyObject(expr);
	ChangeVarNodes((Node *)copy, 2, INNER_VAR, 0);
	return copy;
}

void
ResetDeltas(Run *run)
{
	MemoryContextReset(run->delta_cxt);
	for (int i = 0; i < run->ncounters; i++)
		DeltaStart(&run->runs[i]);
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
		OwnerScope owner;
		EnterOwner(&owner, c->owner, 0);
		r->quals = def->quals ? ExecInitQual((List *)ForRun(def, (Expr *)def->quals), nullptr) : nullptr;
		r->key_exprs = (ExprState **)palloc(sizeof(ExprState *) * def->nkeys);
		for (int k = 0; k < def->nkeys; k++)
			r->key_exprs[k] = InitExpr(ForRun(def, def->keys[k].expr));
		r->arg_exprs = (ExprState **)palloc0(sizeof(ExprState *) * def->nvalues);
		r->filter_exprs = (ExprState **)palloc0(sizeof(ExprState *) * def->nvalues);
		for (int v = 0; v < def->nvalues; v++) {
			r->arg_exprs[v] = InitExpr(ForRun(def, def->values[v].arg));
			r->filter_exprs[v] = def->values[v].filter
			                         ? ExecInitQual(make_ands_implicit(ForRun(def, def->values[v].filter)), nullptr)
			                         : nullptr;
		}
		LeaveOwner(&owner);
		if (OidIsValid(def->parent)) {
			Relation parent = table_open(def->parent, AccessShareLock);
			r->parent_slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(RelationGetDescr(parent)), &TTSOpsHeapTuple);
			table_close(parent, AccessShareLock);
			Relation source = table_open(def->source, AccessShareLock);
			r->child_slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(RelationGetDescr(source)), &TTSOpsHeapTuple);
			table_close(source, AccessShareLock);
			/* the parent's columns the counter reads: a change of any other column of a parent changes nothing */
			r->parent_attrs = bms_make_singleton(def->parent_key - FirstLowInvalidHeapAttributeNumber);
			for (int k = 0; k < def->nkeys; k++)
				pull_varattnos((Node *)def->keys[k].expr, 2, &r->parent_attrs);
			for (int v = 0; v < def->nvalues; v++) {
				pull_varattnos((Node *)def->values[v].arg, 2, &r->parent_attrs);
				pull_varattnos((Node *)def->values[v].filter, 2, &r->parent_attrs);
			}
			pull_varattnos((Node *)def->quals, 2, &r->parent_attrs);
			run->has_join = true;
		}
		r->row_key.values = (Datum *)palloc((sizeof(Datum) + sizeof(bool)) * def->nkeys);
		r->row_key.nulls = (bool *)(r->row_key.values + def->nkeys);
		maxvalues = Max(maxvalues, def->nvalues);
	}
	run->row_ints = (int64 *)palloc(sizeof(int64) * maxvalues);
	run->row_numerics = (Datum *)palloc(sizeof(Datum) * maxvalues);
	run->row_present = (bool *)palloc(sizeof(bool) * maxvalues);
	run->delta_cxt = AllocSetContextCreate(run->cxt, "counters deltas", ALLOCSET_DEFAULT_SIZES);
	for (int i = 0; i < sc->ncounters; i++)
		run->runs[i].delta_cxt = run->delta_cxt;
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
		rd->map = compat::AttrMapByName(RelationGetDescr(rel), root_desc);
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

/*
 * The rows of a statement's transition tables: old rows count -1, new rows +1. An UPDATE's old and new rows are read
 * in step (any order gives the same sums), so that a row's two contributions meet in the same batch of deltas and
 * cancel there when the counter's columns did not change, instead of being applied twice in different batches.
 */
int
CompareInt64(const void *a, const void *b)
{
	int64 x = *(const int64 *)a, y = *(const int64 *)b;
	return x < y ? -1 : x > y ? 1 : 0;
}

/*
 * Parent keys. A child's statement that reads the parent of key k, and a parent's insert (or key change) to k, cannot
 * see each other's rows until they commit: each alone would count the child nowhere (with a foreign key, the child's
 * check fails instead). So they take locks of their own on (parent, k), held until their transactions end: a child's
 * statement shares them, a parent's write takes them exclusively. The later one waits for the earlier to end, then
 * reads with the latest snapshot and counts what it committed. They are advisory locks of the counters' own kind
 * (pg_locks: locktype advisory, classid the parent's OID, objsubid PARENT_KEY_LOCK or PARENT_TABLE_LOCK). Past
 * KEY_LOCKS_PER_TRANSACTION keys of one parent and side in a transaction, one lock on the whole parent takes their
 * place (a child's share lock, a parent's exclusive one), so that bulk statements do not fill the lock table; the keys'
 * side locks the whole parent weakly first (a child: row share, a parent: row exclusive), so that it waits for the
 * other side's whole-parent lock.
 */
enum : uint16 { PARENT_TABLE_LOCK = 0x6370, PARENT_KEY_LOCK = 0x636B };
enum { KEY_LOCKS_PER_TRANSACTION = 64 };

struct KeyLocks {
	Oid parent;
	int keys[2]; /* key locks taken in this transaction: by children's statements, by parents' writes */
};

MemoryContext key_locks_cxt = nullptr; /* under TopTransactionContext */
List *key_locks = NIL;                 /* KeyLocks * */

void
ForgetKeyLocks(void *)
{
	key_locks_cxt = nullptr;
	key_locks = NIL;
}

KeyLocks *
KeyLocksOf(Oid parent)
{
	ListCell *lc;
	foreach (lc, key_locks)
		if (((KeyLocks *)lfirst(lc))->parent == parent)
			return (KeyLocks *)lfirst(lc);
	if (key_locks_cxt == nullptr) {
		key_locks_cxt = AllocSetContextCreate(TopTransactionContext, "counters key locks", ALLOCSET_SMALL_SIZES);
		MemoryContextCallback *cb =
		    (MemoryContextCallback *)MemoryContextAlloc(key_locks_cxt, sizeof(MemoryContextCallback));
		cb->func = ForgetKeyLocks;
		cb->arg = nullptr;
		MemoryContextRegisterResetCallback(key_locks_cxt, cb);
	}
	MemoryContext old = MemoryContextSwitchTo(key_locks_cxt);
	KeyLocks *held = (KeyLocks *)palloc0(sizeof(KeyLocks));
	held->parent = parent;
	key_locks = lappend(key_locks, held);
	MemoryContextSwitchTo(old);
	return held;
}

void
LockParentTag(Oid parent, uint32 key, uint16 kind, LOCKMODE mode)
{
	LOCKTAG tag;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, parent, key, kind);
	(void)LockAcquire(&tag, mode, false, false);
}

/*
 * Lock keys `keys` (n, sorted) of `parent`: shared for a child's statement, exclusively for a parent's write
 * (parent_side). (A lock a transaction holds is taken again from its own table, without waiting: after a subtransaction
 * rolled back, with the locks it took, the next statement takes them again.)
 */
void
LockParentKeys(Oid parent, const int64 *keys, int n, bool parent_side)
{
	if (n == 0)
		return;
	KeyLocks *held = KeyLocksOf(parent);
	int *taken = &held->keys[parent_side ? 1 : 0];
	if (*taken + n > KEY_LOCKS_PER_TRANSACTION) {
		LockParentTag(parent, 0, PARENT_TABLE_LOCK, parent_side ? ExclusiveLock : ShareLock);
		*taken = KEY_LOCKS_PER_TRANSACTION + 1;
		return;
	}
	LockParentTag(parent, 0, PARENT_TABLE_LOCK, parent_side ? RowExclusiveLock : RowShareLock);
	for (int i = 0; i < n; i++)
		LockParentTag(parent, (uint32)((uint64)keys[i] ^ ((uint64)keys[i] >> 32)), PARENT_KEY_LOCK,
		              parent_side ? ExclusiveLock : ShareLock);
	*taken += n;
}

/*
 * The parent rows of counter `r`'s rows with keys `keys` (n of them, sorted, distinct), read as the counter's owner
 * with the latest snapshot, whatever the isolation level, and locked FOR SHARE: a concurrent change of a parent waits
 * for this transaction, then counts this statement's rows itself; this statement waits for one in progress, then
 * reads the parent as it committed (at REPEATABLE READ too: the count follows the parent as committed). A
 * parent inserted, or given one of these keys, by a transaction this one cannot see yet waits for this one, or is
 * waited for (LockParentKeys).
 */
void
ReadParents(Run *run, CounterRun *r, int64 *keys, int n)
{
	const CounterDef *def = r->c->def;
	MemoryContext old = MemoryContextSwitchTo(run->cxt);
	HASHCTL ctl;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(int64);
	ctl.entrysize = sizeof(ParentEntry);
	ctl.hcxt = run->cxt;
	if (r->parents != nullptr)
		hash_destroy(r->parents);
	r->parents = hash_create("counters parents", Max(n, 16), &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	MemoryContextSwitchTo(old);
	if (n == 0)
		return;
	Datum *elems = (Datum *)palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
		elems[i] = Int64GetDatum(keys[i]);
	Datum array = PointerGetDatum(construct_array(elems, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
	Oid argtypes[1] = {INT8ARRAYOID};
	LockParentKeys(def->parent, keys, n, false);
	SpiConnect();
	/* (row-level security that would hide a parent makes this fail, rather than count its rows as orphans) */
	OwnerScope owner;
	EnterOwner(&owner, r->c->owner, PIN_ROW_SECURITY);
	if (r->c->parent_plan == nullptr) {
		/* (a generic plan: an index probe per key, whatever the number of keys) */
		SPIPlanPtr plan = SPI_prepare_cursor(ParentRowsStatement(def), 1, argtypes, CURSOR_OPT_GENERIC_PLAN);
		if (plan == nullptr || SPI_keepplan(plan) != 0)
			elog(ERROR, "counters: preparing the parents of counter \"%s\" failed", def->name);
		r->c->parent_plan = plan;
	}
	Snapshot latest = RegisterSnapshot(GetLatestSnapshot());
	int ret = SPI_execute_snapshot(r->c->parent_plan, &array, nullptr, latest, InvalidSnapshot, false, false, 0);
	UnregisterSnapshot(latest);
	LeaveOwner(&owner);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: reading the parents of counter \"%s\" failed: %s", def->name,
		     SPI_result_code_string(ret));
	for (uint64 i = 0; i < SPI_processed; i++) {
		bool isnull;
		int64 key = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		HeapTupleHeader th =
		    DatumGetHeapTupleHeader(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		HeapTupleData tuple;
		tuple.t_len = HeapTupleHeaderGetDatumLength(th);
		ItemPointerSetInvalid(&tuple.t_self);
		tuple.t_tableOid = def->parent;
		tuple.t_data = th;
		ParentEntry *e = (ParentEntry *)hash_search(r->parents, &key, HASH_ENTER, nullptr);
		e->tuple = (HeapTuple)MemoryContextAlloc(run->cxt, HEAPTUPLESIZE + tuple.t_len);
		e->tuple->t_len = tuple.t_len;
		e->tuple->t_self = tuple.t_self;
		e->tuple->t_tableOid = tuple.t_tableOid;
		e->tuple->t_data = (HeapTupleHeader)((char *)e->tuple + HEAPTUPLESIZE);
		memcpy(e->tuple->t_data, th, tuple.t_len);
	}
	SPI_finish();
}

/* The parents of the rows in the transition tables, for each counter through a parent row. */
void
PrefetchParents(Run *run, RowReader *rd, Tuplestorestate *old_rows, Tuplestorestate *new_rows)
{
	for (int ci = 0; ci < run->ncounters; ci++) {
		CounterRun *r = &run->runs[ci];
		const CounterDef *def = r->c->def;
		if (!OidIsValid(def->parent))
			continue;
		int cap = 64, n = 0;
		int64 *keys = (int64 *)palloc(sizeof(int64) * cap);
		Tuplestorestate *stores[2] = {old_rows, new_rows};
		for (int s = 0; s < 2; s++) {
			if (stores[s] == nullptr)
				continue;
			tuplestore_rescan(stores[s]);
			while (tuplestore_gettupleslot(stores[s], true, false, rd->slot)) {
				TupleTableSlot *slot = rd->map ? execute_attr_map_slot(rd->map, rd->slot, rd->root_slot) : rd->slot;
				bool isnull;
				Datum key = slot_getattr(slot, def->child_key, &isnull);
				if (isnull)
					continue;
				if (n == cap) {
					cap *= 2;
					keys = (int64 *)repalloc(keys, sizeof(int64) * cap);
				}
				keys[n++] = IntegerDatum(def->join_type, key);
			}
		}
		qsort(keys, n, sizeof(int64), CompareInt64);
		int distinct = 0;
		for (int i = 0; i < n; i++)
			if (distinct == 0 || keys[distinct - 1] != keys[i])
				keys[distinct++] = keys[i];
		ReadParents(run, r, keys, distinct);
		pfree(keys);
	}
}

void
CountTuplestores(Run *run, RowReader *rd, Tuplestorestate *old_rows, Tuplestorestate *new_rows)
{
	if (run->has_join)
		PrefetchParents(run, rd, old_rows, new_rows);
	ErrorContextCallback context;
	PushCountContext(&context, run);
	if (old_rows)
		tuplestore_rescan(old_rows);
	if (new_rows)
		tuplestore_rescan(new_rows);
	while (old_rows || new_rows) {
		CHECK_FOR_INTERRUPTS();
		if (old_rows) {
			if (tuplestore_gettupleslot(old_rows, true, false, rd->slot))
				CountSlot(run, rd, -1);
			else
				old_rows = nullptr;
		}
		if (new_rows) {
			if (tuplestore_gettupleslot(new_rows, true, false, rd->slot))
				CountSlot(run, rd, 1);
			else
				new_rows = nullptr;
		}
	}
	error_context_stack = context.previous;
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
	CommandId cid;        /* the statement's command: what it wrote has this cmin */
	MemoryContext parent; /* where the frame's context is created, when first needed */
	MemoryContext cxt;
	List *runs; /* Run *, one per source */
};

Frame *current_frame = nullptr;
ExecutorFinish_hook_type prev_executor_finish = nullptr;
ProcessUtility_hook_type prev_process_utility = nullptr;

void
PushFrame(Frame *frame, CommandId cid)
{
	frame->prev = current_frame;
	frame->cid = cid;
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
#define WITH_FRAME(cid, body)                                                                                          \
	do {                                                                                                               \
		Frame frame;                                                                                                   \
		PushFrame(&frame, cid);                                                                                        \
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
	WITH_FRAME(query->estate->es_output_cid, if (prev_executor_finish) prev_executor_finish(query);
	           else standard_ExecutorFinish(query));
}

void
CountersProcessUtility(PlannedStmt *pstmt, const char *query_string, bool read_only_tree, ProcessUtilityContext context,
                       ParamListInfo params, QueryEnvironment *env, DestReceiver *dest, QueryCompletion *qc)
{
	/* COPY FROM fires its AFTER triggers itself, outside the executor. */
	if (IsA(pstmt->utilityStmt, CopyStmt))
		WITH_FRAME(GetCurrentCommandId(false), if (prev_process_utility) prev_process_utility(
		                                           pstmt, query_string, read_only_tree, context, params, env, dest, qc);
		           else standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, env, dest, qc));
	else if (prev_process_utility)
		prev_process_utility(pstmt, query_string, read_only_tree, context, params, env, dest, qc);
	else
		standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, env, dest, qc);
}

/*
 * Sinks. Their rows are taken by the sink trigger (BEFORE INSERT, for each row), which returns NULL so that they are
 * not stored, and counted by counters_sink_end (AFTER INSERT, for each statement), which fires in the statement's
 * frame: a sink's rows are applied with the statement's other deltas. In between they wait here, per sink and
 * subtransaction: a subtransaction that aborts takes its rows with it; the transaction's end clears the rest, and a
 * commit with rows left uncounted (counters_sink_end disabled) fails rather than lose them.
 */
struct SinkRows {
	Oid relid;
	SubTransactionId subxid;
	Tuplestorestate *rows;
	TupleDesc desc;
	EState *estate; /* the constraints each row is checked against */
	ResultRelInfo *rri;
};

MemoryContext sink_cxt = nullptr; /* under TopTransactionContext, created when a first row waits */
List *sink_rows = NIL;            /* SinkRows *, in sink_cxt */

void
ForgetSinkRows(void *)
{
	sink_cxt = nullptr;
	sink_rows = NIL;
}

void
EndSinkRows(SinkRows *w)
{
	tuplestore_end(w->rows);
	FreeExecutorState(w->estate);
	sink_rows = list_delete_ptr(sink_rows, w);
}

SinkRows *
WaitingRows(Relation rel)
{
	SubTransactionId subxid = GetCurrentSubTransactionId();
	ListCell *lc;
	foreach (lc, sink_rows) {
		SinkRows *w = (SinkRows *)lfirst(lc);
		if (w->relid == RelationGetRelid(rel) && w->subxid == subxid)
			return w;
	}
	if (sink_cxt == nullptr) {
		sink_cxt = AllocSetContextCreate(TopTransactionContext, "counters sink rows", ALLOCSET_DEFAULT_SIZES);
		MemoryContextCallback *cb =
		    (MemoryContextCallback *)MemoryContextAlloc(sink_cxt, sizeof(MemoryContextCallback));
		cb->func = ForgetSinkRows;
		cb->arg = nullptr;
		MemoryContextRegisterResetCallback(sink_cxt, cb);
	}
	RequireSinkShape(rel); /* (once per statement: DDL may have added what a sink cannot keep) */
	MemoryContext old = MemoryContextSwitchTo(sink_cxt);
	SinkRows *w = (SinkRows *)palloc0(sizeof(SinkRows));
	w->relid = RelationGetRelid(rel);
	w->subxid = subxid;
	w->desc = CreateTupleDescCopy(RelationGetDescr(rel));
	w->rows = tuplestore_begin_heap(false, false, work_mem);
	w->estate = CreateExecutorState();
	w->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(w->rri, rel, 0, nullptr, 0);
	sink_rows = lappend(sink_rows, w);
	MemoryContextSwitchTo(old);
	return w;
}

void
SinkSubXactCallback(SubXactEvent event, SubTransactionId subxid, SubTransactionId parent, void *)
{
	ListCell *lc;
	if (event == SUBXACT_EVENT_ABORT_SUB) {
		List *ended = NIL;
		foreach (lc, sink_rows)
			if (((SinkRows *)lfirst(lc))->subxid == subxid)
				ended = lappend(ended, lfirst(lc));
		foreach (lc, ended)
			EndSinkRows((SinkRows *)lfirst(lc));
		list_free(ended);
	} else if (event == SUBXACT_EVENT_COMMIT_SUB) {
		foreach (lc, sink_rows)
			if (((SinkRows *)lfirst(lc))->subxid == subxid)
				((SinkRows *)lfirst(lc))->subxid = parent;
	}
}

void
SinkXactCallback(XactEvent event, void *)
{
	if ((event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_PRE_PREPARE) && sink_rows != NIL)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("rows inserted into sink %s were not counted",
		                       QualifiedName(((SinkRows *)linitial(sink_rows))->relid)),
		                errdetail("Its trigger counters_sink_end did not fire (disabled?)."),
		                errhint("Enable the triggers of the sink, or re-create them with counters.attach().")));
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
	CountTuplestores(run, &rd, old_rows, new_rows);
	DropReader(&rd);
	if (current_frame == nullptr)
		FinishRun(run);
}

/*
 * TRUNCATE of a source: every counter of it is emptied. A log or sharded counter first waits for a compaction in
 * progress (which holds the log's SHARE UPDATE EXCLUSIVE lock until it commits), so that the rows it folded into the
 * totals are seen. Rows are read with the latest snapshot, as TRUNCATE removes every row: at REPEATABLE READ and
 * above, a counter row written after the transaction's snapshot is a serialization failure, not a row left behind.
 */
void
ZeroCounters(SourceCounters *sc)
{
	SpiConnect();
	for (int i = 0; i < sc->ncounters; i++) {
		CompiledCounter *c = &sc->counters[i];
		OwnerScope owner;
		EnterOwner(&owner, c->owner, 0);
		if (c->mode == ApplyMode::Log || c->mode == ApplyMode::Sharded)
			LockRelationOid(c->write_rel, ShareUpdateExclusiveLock);
		Snapshot latest = RegisterSnapshot(GetLatestSnapshot());
		int ret = SPI_execute_snapshot(c->plans[PLAN_TRUNCATE], nullptr, nullptr, latest,
		                               IsolationUsesXactSnapshot() ? GetTransactionSnapshot() : InvalidSnapshot, false,
		                               false, 0);
		UnregisterSnapshot(latest);
		if (ret != SPI_OK_DELETE && ret != SPI_OK_UPDATE)
			elog(ERROR, "counters: emptying counter \"%s\" failed: %s", c->def->name, SPI_result_code_string(ret));
		LeaveOwner(&owner);
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

/*
 * The sink trigger: the row is checked as an insert would check it (NOT NULL, CHECK constraints) and waits for
 * counters_sink_end; the caller returns NULL, so it is not stored.
 */
void
SinkRow(TriggerData *td)
{
	Relation rel = td->tg_relation;
	SinkRows *w = WaitingRows(rel);
	if (unlikely(w->rri->ri_RelationDesc != rel)) {
		/*
		 * Rows of an earlier statement still wait (its counters_sink_end did not fire; the commit will fail): this
		 * statement's relation is checked with its own constraints, and must have the same columns.
		 */
		if (!equalTupleDescs(w->desc, RelationGetDescr(rel)))
			ereport(ERROR,
			        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			         errmsg("rows inserted into sink %s by an earlier statement were not counted",
			                QualifiedName(RelationGetRelid(rel))),
			         errdetail("Its trigger counters_sink_end did not fire (disabled?), and the table changed since."),
			         errhint("Enable the triggers of the sink, or re-create them with counters.attach().")));
		MemoryContext old = MemoryContextSwitchTo(sink_cxt);
		w->rri = makeNode(ResultRelInfo);
		InitResultRelInfo(w->rri, rel, 0, nullptr, 0);
		MemoryContextSwitchTo(old);
	}
	TupleTableSlot *slot = td->tg_trigslot;
	if (RelationGetDescr(rel)->constr != nullptr) {
		ExecConstraints(w->rri, slot, w->estate);
		ResetPerTupleExprContext(w->estate);
	}
	tuplestore_puttupleslot(w->rows, slot);
}

namespace {

/* counters_sink_end: count the rows the statement inserted into sink `rel` (and any still waiting in this
 * subtransaction) */
void
CountSinkRows(Relation rel, SourceCounters *sc)
{
	SubTransactionId subxid = GetCurrentSubTransactionId();
	SinkRows *w = nullptr;
	ListCell *lc;
	foreach (lc, sink_rows)
		if (((SinkRows *)lfirst(lc))->relid == RelationGetRelid(rel) && ((SinkRows *)lfirst(lc))->subxid == subxid)
			w = (SinkRows *)lfirst(lc);
	if (w == nullptr)
		return; /* (no row) */
	Run *run = current_frame != nullptr ? FrameRun(current_frame, sc) : StartRun(sc, CurrentMemoryContext);
	RowReader rd;
	rd.slot = MakeSingleTupleTableSlot(w->desc, &TTSOpsMinimalTuple);
	rd.root_slot = rd.slot;
	rd.map = nullptr;
	CountTuplestores(run, &rd, nullptr, w->rows);
	DropReader(&rd);
	EndSinkRows(w);
	if (current_frame == nullptr)
		FinishRun(run);
}

} // namespace

namespace {

/*
 * Counters through a parent row, the parent's side. A parent's UPDATE or DELETE moves its children's contributions
 * from the old parent row to the new one: its children, as they were before the statement, are counted out with the
 * old row and in with the new one, as the row is finally written (AFTER ROW trigger counters_parent_row, after every
 * BEFORE ROW trigger had its say). Foreign-key actions that then delete or re-point the children count nothing more
 * (the children find no parent, or the new one, as the statement left it). The deltas join the statement's deltas for
 * the source, applied with them when the statement ends.
 */

/* The command of the statement being counted: what it wrote has this cmin (its frame's; else the current one). */
CommandId
StatementCommand()
{
	return current_frame != nullptr ? current_frame->cid : GetCurrentCommandId(false);
}

/* The statement's run of counter `name` of `sc`'s source, and its CounterRun (in the frame, or a run of its own). */
CounterRun *
SourceCounterRun(SourceCounters *sc, const char *name, Run **run)
{
	*run = current_frame != nullptr ? FrameRun(current_frame, sc) : StartRun(sc, CurrentMemoryContext);
	for (int i = 0; i < (*run)->ncounters; i++)
		if (strcmp((*run)->runs[i].c->def->name, name) == 0)
			return &(*run)->runs[i];
	elog(ERROR, "counters: counter \"%s\" is not compiled for its source", name);
	pg_unreachable();
}

/* Whether an UPDATE of a parent changed a column counter `r` reads. */
bool
ParentChanged(CounterRun *r, TupleDesc desc, HeapTuple old_tuple, HeapTuple new_tuple)
{
	int m = -1;
	while ((m = bms_next_member(r->parent_attrs, m)) >= 0) {
		AttrNumber attnum = (AttrNumber)(m + FirstLowInvalidHeapAttributeNumber);
		if (attnum <= 0)
			return true;
		bool old_null, new_null;
		Datum a = heap_getattr(old_tuple, attnum, desc, &old_null);
		Datum b = heap_getattr(new_tuple, attnum, desc, &new_null);
		Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
		if (old_null != new_null || (!old_null && !datumIsEqual(a, b, att->attbyval, att->attlen)))
			return true;
	}
	return false;
}

/*
 * Count (sign) the source's rows whose key is one of `keys` (n, distinct) with their parent: `parent` when given, else
 * the one `parents` (key -> ParentEntry) holds. Rows are read as they were before the statement (`cid`: what it
 * wrote is not seen), as the latest snapshot has them: rows the statement changes count through the source's own
 * capture, with the parent as the statement leaves it.
 */
void
CountChildren(Run *run, CounterRun *r, int64 *keys, int n, HeapTuple parent, HTAB *parents, int sign, CommandId cid)
{
	const CounterDef *def = r->c->def;
	if (n == 0)
		return;
	Datum *elems = (Datum *)palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
		elems[i] = Int64GetDatum(keys[i]);
	Datum array = PointerGetDatum(construct_array(elems, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
	SpiConnect();
	OwnerScope owner;
	EnterOwner(&owner, r->c->owner, PIN_ROW_SECURITY);
	if (r->c->child_plan == nullptr) {
		/* (a generic plan: an index probe per key, however many keys) */
		Oid argtypes[1] = {INT8ARRAYOID};
		SPIPlanPtr plan = SPI_prepare_cursor(ChildRowsStatement(def), 1, argtypes, CURSOR_OPT_GENERIC_PLAN);
		if (plan == nullptr || SPI_keepplan(plan) != 0)
			elog(ERROR, "counters: preparing the rows of counter \"%s\" failed", def->name);
		r->c->child_plan = plan;
	}
	Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
	snapshot->curcid = cid;
	int ret = SPI_execute_snapshot(r->c->child_plan, &array, nullptr, snapshot, InvalidSnapshot, true, false, 0);
	UnregisterSnapshot(snapshot);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: reading the rows of counter \"%s\" failed: %s", def->name, SPI_result_code_string(ret));
	ErrorContextCallback context;
	PushCountContext(&context, run);
	for (uint64 i = 0; i < SPI_processed; i++) {
		bool isnull;
		int64 key = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		HeapTupleHeader th =
		    DatumGetHeapTupleHeader(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		HeapTupleData child;
		child.t_len = HeapTupleHeaderGetDatumLength(th);
		ItemPointerSetInvalid(&child.t_self);
		child.t_tableOid = def->source;
		child.t_data = th;
		HeapTuple p = parent;
		if (p == nullptr) {
			ParentEntry *found = (ParentEntry *)hash_search(parents, &key, HASH_FIND, nullptr);
			if (found == nullptr)
				continue;
			p = found->tuple;
		}
		ExecStoreHeapTuple(&child, r->child_slot, false);
		run->econtext->ecxt_scantuple = r->child_slot;
		r->fixed_parent = p;
		run->counting = (int)(r - run->runs);
		CountRowFor(run, r, sign);
		run->counting = -1;
		r->fixed_parent = nullptr;
		ExecClearTuple(r->child_slot);
		ResetExprContext(run->econtext);
	}
	error_context_stack = context.previous;
	LeaveOwner(&owner);
	SPI_finish();
}

/* The parent rows of a statement's new parents (AFTER INSERT): their children, if any, count in. */
void
ParentInserted(Relation rel, SourceCounters *pc, Tuplestorestate *new_rows)
{
	/* (the keys, sorted and distinct, and the parent rows by key; a key the unique index allows once) */
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "counters new parents", ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	TupleTableSlot *slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsMinimalTuple);
	const CounterDef *first = pc->counters[0].def;
	HASHCTL ctl;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(int64);
	ctl.entrysize = sizeof(ParentEntry);
	ctl.hcxt = cxt;
	HTAB *parents = hash_create("counters new parents", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	int cap = 64, n = 0;
	int64 *keys = (int64 *)palloc(sizeof(int64) * cap);
	tuplestore_rescan(new_rows);
	while (tuplestore_gettupleslot(new_rows, true, false, slot)) {
		bool isnull;
		Datum key = slot_getattr(slot, first->parent_key, &isnull);
		if (isnull)
			continue;
		int64 k = IntegerDatum(first->join_type, key);
		bool found;
		ParentEntry *e = (ParentEntry *)hash_search(parents, &k, HASH_ENTER, &found);
		e->tuple = ExecCopySlotHeapTuple(slot);
		if (found)
			continue;
		if (n == cap) {
			cap *= 2;
			keys = (int64 *)repalloc(keys, sizeof(int64) * cap);
		}
		keys[n++] = k;
	}
	ExecDropSingleTupleTableSlot(slot);
	qsort(keys, n, sizeof(int64), CompareInt64);
	MemoryContextSwitchTo(old);
	/* A child written meanwhile to one of these keys, by a transaction this one cannot see, waits (or is waited for).
	 */
	LockParentKeys(RelationGetRelid(rel), keys, n, true);
	CommandId cid = StatementCommand();
	for (int ci = 0; ci < pc->ncounters; ci++) {
		Run *run;
		CounterRun *r =
		    SourceCounterRun(GetSourceCounters(pc->counters[ci].def->source), pc->counters[ci].def->name, &run);
		CountChildren(run, r, keys, n, nullptr, parents, 1, cid);
		if (current_frame == nullptr)
			FinishRun(run);
	}
	MemoryContextDelete(cxt);
}

} // namespace

/* counters_parent_row: after a parent row was updated or deleted, its children move to the new row or away. */
void
ParentRow(TriggerData *td)
{
	Relation rel = td->tg_relation;
	SourceCounters *pc = GetParentCounters(RelationGetRelid(rel));
	if (pc->ncounters == 0)
		return;
	int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT);
	HeapTuple old_tuple = td->tg_trigtuple;
	HeapTuple new_tuple = TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : nullptr;
	TupleDesc desc = RelationGetDescr(rel);
	CommandId cid = StatementCommand();
	for (int i = 0; i < pc->ncounters; i++) {
		const CounterDef *pdef = pc->counters[i].def;
		Run *run;
		CounterRun *r = SourceCounterRun(GetSourceCounters(pdef->source), pdef->name, &run);
		const CounterDef *def = r->c->def;
		if (new_tuple == nullptr || ParentChanged(r, desc, old_tuple, new_tuple)) {
			bool isnull;
			Datum key = heap_getattr(old_tuple, def->parent_key, desc, &isnull);
			int64 old_key = isnull ? 0 : IntegerDatum(def->join_type, key);
			if (!isnull)
				CountChildren(run, r, &old_key, 1, old_tuple, nullptr, -1, cid);
			key = new_tuple != nullptr ? heap_getattr(new_tuple, def->parent_key, desc, &isnull) : (Datum)0;
			if (new_tuple != nullptr && !isnull) {
				int64 k = IntegerDatum(def->join_type, key);
				/* (a key the parent takes: a child written to it meanwhile waits, or is waited for) */
				if (k != old_key)
					LockParentKeys(RelationGetRelid(rel), &k, 1, true);
				CountChildren(run, r, &k, 1, new_tuple, nullptr, 1, cid);
			}
		}
		if (current_frame == nullptr)
			FinishRun(run);
	}
	UnpinSettings(level);
}

void
Capture(TriggerData *td)
{
	TriggerEvent ev = td->tg_event;
	Relation rel = td->tg_relation;
	/* The statement triggers on the parent of counters through a parent row. */
	if (strncmp(td->tg_trigger->tgname, "counters_parent_", 16) == 0) {
		SourceCounters *pc = GetParentCounters(RelationGetRelid(rel));
		/* (counters_parent_begin, BEFORE the statement, loads this library before its AFTER triggers: nothing else) */
		int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT);
		if (pc->ncounters > 0 && strcmp(td->tg_trigger->tgname, ParentTriggerName(PARENT_INSERT_TRIGGER)) == 0) {
			if (td->tg_newtable == nullptr)
				ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				                errmsg("counters.capture() on \"%s\" needs REFERENCING NEW TABLE",
				                       RelationGetRelationName(rel))));
			ParentInserted(rel, pc, td->tg_newtable);
		} else if (pc->ncounters > 0 && strcmp(td->tg_trigger->tgname, ParentTriggerName(PARENT_TRUNCATE_TRIGGER)) == 0)
			ZeroCounters(pc); /* (every parent is gone: no row has one) */
		UnpinSettings(level);
		return;
	}
	/*
	 * counters_begin, BEFORE the statement: nothing to do. Its call loads this library before the statement's AFTER
	 * triggers fire, so that even a backend's first statement collects its events' deltas in one frame.
	 */
	if (TRIGGER_FIRED_BEFORE(ev) && !TRIGGER_FIRED_BY_TRUNCATE(ev)) {
		if (TRIGGER_FIRED_BY_INSERT(ev) || strcmp(td->tg_trigger->tgname, CaptureTriggerName(SINK_GUARD_TRIGGER)) != 0)
			return;
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		         errmsg("table %s is a sink: its rows are counted, not stored, and cannot be %s",
		                QualifiedName(RelationGetRelid(rel)), TRIGGER_FIRED_BY_UPDATE(ev) ? "updated" : "deleted"),
		         errhint("counters.set_sink('%s', false) makes it a table that stores its rows again.",
		                 QualifiedName(RelationGetRelid(rel)))));
	}
	/*
	 * Nothing the extension runs may depend on the caller's search_path, and definitions that turn values into text
	 * (directly or inside a function) get the same text in every session.
	 */
	int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT);
	/* counters_guard: a counter's own table is not truncated by itself */
	if (TRIGGER_FIRED_BY_TRUNCATE(ev) && strcmp(td->tg_trigger->tgname, guard_trigger) == 0) {
		GuardCounterRelation(RelationGetRelid(rel), "truncate");
		UnpinSettings(level);
		return;
	}
	SourceCounters *sc = GetSourceCounters(RelationGetRelid(rel));
	/*
	 * Citus: a shard's TRUNCATE trigger does nothing (the shell's, on the coordinator, empties the counter tables as a
	 * whole), nor one left behind on a shard or shell once the table's counters are dropped (Citus does not propagate
	 * dropping it); a shard without counters was distributed behind the counters' back.
	 */
	if (TRIGGER_FIRED_BY_TRUNCATE(ev) && citus::Present() &&
	    (OidIsValid(citus::TableOfShard(RelationGetRelid(rel))) ||
	     (sc->ncounters == 0 && citus::IsCitusRelation(RelationGetRelid(rel))))) {
		UnpinSettings(level);
		return;
	}
	if (sc->ncounters == 0)
		citus::RefuseCapture(rel);
	RequireCounters(rel, sc);
	if (TRIGGER_FIRED_BY_TRUNCATE(ev)) {
		if (TRIGGER_FIRED_BEFORE(ev))
			CountRelationRows(rel, sc->source, -1); /* a partition: take its rows away before they vanish */
		else
			ZeroCounters(sc); /* the whole source is empty */
	} else if (strcmp(td->tg_trigger->tgname, CaptureTriggerName(SINK_END_TRIGGER)) == 0)
		CountSinkRows(rel, sc);
	else {
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
	UnpinSettings(level);
}

/*
 * counters_target_key: a row of an existing table that keeps counter-cache columns takes another key (an UPDATE of a
 * key column, such as ON UPDATE CASCADE from the row it counts for). Its counter columns count for its key: they are
 * set to the new key's values, recounted from the definition as the counter's owner (usually zeros: the cascade that
 * follows moves the source's rows, whose deltas then add to them). Else the row would carry the old key's values to
 * the new key, and the cascade add them again.
 */
HeapTuple
TargetKeyRow(TriggerData *td)
{
	Relation rel = td->tg_relation;
	Oid relid = RelationGetRelid(rel);
	HeapTuple old_tuple = td->tg_trigtuple;
	HeapTuple new_tuple = td->tg_newtuple;
	TupleDesc desc = RelationGetDescr(rel);
	/* (fired when a key column is set at all: most such updates set it to what it was) */
	bool changed = false;
	for (int i = 0; i < td->tg_trigger->tgnattr && !changed; i++) {
		AttrNumber attnum = td->tg_trigger->tgattr[i];
		bool old_null, new_null;
		Datum a = heap_getattr(old_tuple, attnum, desc, &old_null);
		Datum b = heap_getattr(new_tuple, attnum, desc, &new_null);
		Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
		changed = old_null != new_null || (!old_null && !datumIsEqual(a, b, att->attbyval, att->attlen));
	}
	if (!changed)
		return new_tuple;
	int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT);
	Datum *values = (Datum *)palloc0(sizeof(Datum) * desc->natts);
	bool *nulls = (bool *)palloc0(sizeof(bool) * desc->natts);
	bool *replace = (bool *)palloc0(sizeof(bool) * desc->natts);
	ListCell *lc;
	foreach (lc, ReadCatalogOfRelation(relid)) {
		CatalogEntry *e = (CatalogEntry *)lfirst(lc);
		if (e->owns_target || e->target != relid)
			continue;
		Oid owner = CounterOwner(e);
		CounterDef *def = AnalyzeView(e->name, e->query, owner);
		Datum *keys = (Datum *)palloc(sizeof(Datum) * def->nkeys);
		char *key_nulls = (char *)palloc(sizeof(char) * def->nkeys);
		Oid *types = (Oid *)palloc(sizeof(Oid) * def->nkeys);
		bool moved = false;
		for (int k = 0; k < def->nkeys; k++) {
			AttrNumber attnum = get_attnum(relid, def->keys[k].column_name);
			bool old_null, new_null;
			Datum a = heap_getattr(old_tuple, attnum, desc, &old_null);
			keys[k] = heap_getattr(new_tuple, attnum, desc, &new_null);
			key_nulls[k] = new_null ? 'n' : ' ';
			types[k] = def->keys[k].type;
			Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
			moved |= old_null != new_null || (!old_null && !datumIsEqual(a, keys[k], att->attbyval, att->attlen));
		}
		if (!moved)
			continue;
		MemoryContext caller = CurrentMemoryContext;
		SpiConnect();
		OwnerScope scope;
		EnterOwner(&scope, owner, PIN_ROW_SECURITY);
		SPIPlanPtr plan = SPI_prepare(KeyRecountStatement(def, e->query, relid), def->nkeys, types);
		if (plan == nullptr)
			elog(ERROR, "counters: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		/* (the latest snapshot: the source's rows as committed, and as this transaction left them) */
		Snapshot latest = RegisterSnapshot(GetLatestSnapshot());
		int ret = SPI_execute_snapshot(plan, keys, key_nulls, latest, InvalidSnapshot, true, false, 1);
		UnregisterSnapshot(latest);
		LeaveOwner(&scope);
		if (ret != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "counters: recounting counter \"%s\" for a row's new key failed: %s", e->name,
			     SPI_result_code_string(ret));
		for (int v = 0; v < def->nvalues; v++) {
			AttrNumber attnum = get_attnum(relid, def->values[v].column_name);
			Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
			bool isnull;
			Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, v + 1, &isnull);
			MemoryContext old = MemoryContextSwitchTo(caller);
			values[attnum - 1] = isnull ? (Datum)0 : datumCopy(d, att->attbyval, att->attlen);
			MemoryContextSwitchTo(old);
			nulls[attnum - 1] = isnull;
			replace[attnum - 1] = true;
		}
		SPI_finish();
	}
	UnpinSettings(level);
	return heap_modify_tuple(new_tuple, desc, values, nulls, replace);
}

void
InitCapture()
{
	prev_executor_finish = ExecutorFinish_hook;
	ExecutorFinish_hook = CountersExecutorFinish;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = CountersProcessUtility;
	InitDecisions();
	RegisterXactCallback(SinkXactCallback, nullptr);
	RegisterSubXactCallback(SinkSubXactCallback, nullptr);
}

/*
 * What a sink cannot keep: checks that need stored rows (a foreign key, row-level security's WITH CHECK), columns
 * computed after BEFORE triggers.
 */
void
RequireSinkShape(Relation rel)
{
	const char *name = QualifiedName(RelationGetRelid(rel));
	if (rel->rd_rel->relrowsecurity)
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		         errmsg("table %s cannot be a sink: it has row-level security enabled", name),
		         errdetail("Policies check the rows a statement stores; the rows of a sink are never stored, so a "
		                   "writer could count rows the policies refuse."),
		         errhint("Disable row-level security on it (ALTER TABLE %s DISABLE ROW LEVEL SECURITY).", name)));
	if (RelationGetFKeyList(rel) != NIL)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("table %s cannot be a sink: it has a foreign key", name),
		                errdetail("A foreign key is checked on stored rows; the rows of a sink are never stored, so "
		                          "it would not be checked."),
		                errhint("Drop the constraint (Django: ForeignKey(..., db_constraint=False)).")));
	TupleDesc desc = RelationGetDescr(rel);
	for (int i = 0; i < desc->natts; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, i);
		if (!att->attisdropped && att->attgenerated != '\0')
			ereport(
			    ERROR,
			    (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			     errmsg("table %s cannot be a sink: column \"%s\" is a generated column", name, NameStr(att->attname)),
			     errdetail("Generated columns are computed after the BEFORE triggers, where a sink counts rows."),
			     errhint("Count the expression in the counter's definition instead.")));
	}
}

} // namespace counters
