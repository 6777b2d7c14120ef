/*
 * parent.cpp: counters through a parent row. A source's statement counts its rows with their parents, read here with
 * their keys locked (PrefetchParents, for capture.cpp); on the parent's side, a parent row updated or deleted
 * (counters_parent_row), or inserted, moves its children's contributions.
 */
#include "write/write.hpp"
#include "compat.hpp"

extern "C" {
#include "access/genam.h"
#include "access/heapam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_am.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"
}

namespace counters {

namespace {

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
	MemoryContext old = MemoryContextSwitchTo(TransactionContext(&key_locks_cxt, "counters key locks", ForgetKeyLocks));
	KeyLocks *held = (KeyLocks *)palloc0(sizeof(KeyLocks));
	held->parent = parent;
	key_locks = lappend(key_locks, held);
	MemoryContextSwitchTo(old);
	return held;
}

/* Lock (parent, key) of `kind` in `mode`; returns whether it had to wait for another transaction. */
bool
LockParentTag(Oid parent, uint32 key, uint16 kind, LOCKMODE mode)
{
	LOCKTAG tag;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, parent, key, kind);
	if (LockAcquire(&tag, mode, false, true) != LOCKACQUIRE_NOT_AVAIL)
		return false;
	(void)LockAcquire(&tag, mode, false, false);
	return true;
}

/*
 * Lock keys `keys` (n, sorted) of `parent`: shared for a child's statement, exclusively for a parent's write
 * (parent_side). Returns whether one of the locks had to wait for another transaction. (A lock a transaction holds is
 * taken again from its own table, without waiting: after a subtransaction rolled back, with the locks it took, the
 * next statement takes them again.)
 */
bool
LockParentKeys(Oid parent, const int64 *keys, int n, bool parent_side)
{
	if (n == 0)
		return false;
	KeyLocks *held = KeyLocksOf(parent);
	int *taken = &held->keys[parent_side ? 1 : 0];
	if (*taken + n > KEY_LOCKS_PER_TRANSACTION) {
		*taken = KEY_LOCKS_PER_TRANSACTION + 1;
		return LockParentTag(parent, 0, PARENT_TABLE_LOCK, parent_side ? ExclusiveLock : ShareLock);
	}
	bool waited = LockParentTag(parent, 0, PARENT_TABLE_LOCK, parent_side ? RowExclusiveLock : RowShareLock);
	for (int i = 0; i < n; i++)
		waited |= LockParentTag(parent, (uint32)((uint64)keys[i] ^ ((uint64)keys[i] >> 32)), PARENT_KEY_LOCK,
		                        parent_side ? ExclusiveLock : ShareLock);
	*taken += n;
	return waited;
}

/* Keys as the int8[] the parent-rows and child-rows statements take ($1). */
Datum
Int64Array(const int64 *keys, int n)
{
	Datum *elems = (Datum *)palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
		elems[i] = Int64GetDatum(keys[i]);
	return PointerGetDatum(construct_array(elems, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
}

/* Row `i` of a ParentRowsStatement or ChildRowsStatement result: its key, and its row (of `relid`) in *tuple. */
int64
KeyedRow(uint64 i, Oid relid, HeapTupleData *tuple)
{
	bool isnull;
	int64 key = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
	HeapTupleHeader th =
	    DatumGetHeapTupleHeader(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
	tuple->t_len = HeapTupleHeaderGetDatumLength(th);
	ItemPointerSetInvalid(&tuple->t_self);
	tuple->t_tableOid = relid;
	tuple->t_data = th;
	return key;
}

/* The parent rows of keys `array` (an int8[]) added to r->parents, read and locked as ReadParents says. */
void
FetchParents(Run *run, CounterRun *r, Datum array)
{
	const CounterDef *def = r->c->def;
	Oid argtypes[1] = {INT8ARRAYOID};
	SpiConnect();
	/* (row-level security that would hide a parent makes this fail, rather than count its rows as orphans) */
	OwnerScope owner;
	EnterOwner(&owner, r->c->auth, PIN_ROW_SECURITY);
	Snapshot latest = RegisterSnapshot(GetLatestSnapshot());
	int ret = SPI_execute_snapshot(FetchPlan(r->c, PLAN_PARENT_ROWS, 1, argtypes), &array, nullptr, latest,
	                               InvalidSnapshot, false, false, 0);
	UnregisterSnapshot(latest);
	LeaveOwner(&owner);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: reading the parents of counter \"%s\" failed: %s", def->name,
		     SPI_result_code_string(ret));
	for (uint64 i = 0; i < SPI_processed; i++) {
		HeapTupleData tuple;
		int64 key = KeyedRow(i, def->parent, &tuple);
		ParentEntry *e = (ParentEntry *)hash_search(r->parents, &key, HASH_ENTER, nullptr);
		e->tuple = (HeapTuple)MemoryContextAlloc(run->cxt, HEAPTUPLESIZE + tuple.t_len);
		e->tuple->t_len = tuple.t_len;
		e->tuple->t_self = tuple.t_self;
		e->tuple->t_tableOid = tuple.t_tableOid;
		e->tuple->t_data = (HeapTupleHeader)((char *)e->tuple + HEAPTUPLESIZE);
		memcpy(e->tuple->t_data, tuple.t_data, tuple.t_len);
	}
	SPI_finish();
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
	/*
	 * The rows first (locked FOR SHARE: found, they keep their keys until this transaction ends), then the keys'
	 * locks, then the keys not found again: a parent given one of them since (committed meanwhile, or waited for) is
	 * found now. Taken the other way round, a key's lock held while waiting for a parent row that another transaction
	 * is changing would deadlock with that change, which takes the lock of the key it gives the row once the row is
	 * written (ParentRow).
	 */
	FetchParents(run, r, Int64Array(keys, n));
	(void)LockParentKeys(r->c->def->parent, keys, n, false);
	int missing = 0;
	int64 *absent = (int64 *)palloc(sizeof(int64) * n);
	for (int i = 0; i < n; i++)
		if (hash_search(r->parents, &keys[i], HASH_FIND, nullptr) == nullptr)
			absent[missing++] = keys[i];
	if (missing > 0)
		FetchParents(run, r, Int64Array(absent, missing));
	pfree(absent);
}

/*
 * Counters through a parent row, the parent's side. A parent's UPDATE or DELETE moves its children's contributions
 * from the old parent row to the new one: its children, as they were before the statement, are counted out with the
 * old row and in with the new one, as the row is finally written (AFTER ROW trigger counters_parent_row, after every
 * BEFORE ROW trigger had its say). Foreign-key actions that then delete or re-point the children count nothing more
 * (the children find no parent, or the new one, as the statement left it). The deltas join the statement's deltas for
 * the source, applied with them when the statement ends.
 */

/* The statement's run of counter `name` of `sc`'s source, and its CounterRun (in the frame, or a run of its own). */
CounterRun *
SourceCounterRun(SourceCounters *sc, const char *name, Run **run)
{
	*run = StatementRun(sc);
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
	while ((m = bms_next_member(r->c->parent_attrs, m)) >= 0) {
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
CountChildren(Run *run, CounterRun *r, const int64 *keys, int n, HeapTuple parent, HTAB *parents, int sign,
              CommandId cid)
{
	const CounterDef *def = r->c->def;
	if (n == 0)
		return;
	Datum array = Int64Array(keys, n);
	SpiConnect();
	OwnerScope owner;
	EnterOwner(&owner, r->c->auth, PIN_ROW_SECURITY);
	Oid argtypes[1] = {INT8ARRAYOID};
	Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
	snapshot->curcid = cid;
	int ret = SPI_execute_snapshot(FetchPlan(r->c, PLAN_CHILD_ROWS, 1, argtypes), &array, nullptr, snapshot,
	                               InvalidSnapshot, true, false, 0);
	UnregisterSnapshot(snapshot);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: reading the rows of counter \"%s\" failed: %s", def->name, SPI_result_code_string(ret));
	ErrorContextCallback context;
	PushCountContext(&context, run);
	for (uint64 i = 0; i < SPI_processed; i++) {
		HeapTupleData child;
		int64 key = KeyedRow(i, def->source, &child);
		HeapTuple p = parent;
		if (p == nullptr) {
			ParentEntry *found = (ParentEntry *)hash_search(parents, &key, HASH_FIND, nullptr);
			if (found == nullptr)
				continue;
			p = found->tuple;
		}
		ExecStoreHeapTuple(&child, r->child_slot, false);
		CountRowWithParent(run, r, r->child_slot, p, sign);
		ExecClearTuple(r->child_slot);
	}
	error_context_stack = context.previous;
	LeaveOwner(&owner);
	SPI_finish();
}

/*
 * The index that finds the children of one parent key without SPI: a valid btree index of the source itself whose
 * first column is the child key, plain, in the integer operator family (whose comparisons are PostgreSQL's own). Not
 * for a source with partitions or inheritance children, or with row-level security (which the SPI statement, as the
 * owner with row_security off, refuses to read past): InvalidOid, and CountChildren reads them.
 */
bool
LeadsWithChildKey(Relation index, void *arg)
{
	Form_pg_index form = index->rd_index;
	return index->rd_rel->relam == BTREE_AM_OID && form->indisvalid && form->indnatts >= 1 &&
	       form->indkey.values[0] == *(AttrNumber *)arg && index->rd_opfamily[0] == INTEGER_BTREE_FAM_OID &&
	       heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, nullptr) &&
	       heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, nullptr);
}

Oid
ChildKeyIndex(Relation source, const CounterDef *def)
{
	if (source->rd_rel->relkind != RELKIND_RELATION || source->rd_rel->relhassubclass || source->rd_rel->relrowsecurity)
		return InvalidOid;
	AttrNumber child_key = def->child_key;
	return FirstIndexOf(source, LeadsWithChildKey, &child_key);
}

/*
 * The children of parent keys `keys` (n, distinct) move: each counts -1 with `minus` and +1 with `plus` (either may be
 * NULL; without `plus` but with `parents`, +1 with its key's row there), read as CountChildren reads them. Through
 * ChildKeyIndex where the source has one, in place and in one pass per key; else through CountChildren's statement.
 */
void
MoveChildren(Run *run, CounterRun *r, const int64 *keys, int n, HeapTuple minus, HeapTuple plus, HTAB *parents,
             CommandId cid)
{
	const CounterDef *def = r->c->def;
	if (n == 0)
		return;
	Relation source = table_open(def->source, AccessShareLock);
	/* (an owner who may not read the source gets the statement's error, as before) */
	Oid index_oid = pg_class_aclcheck(def->source, r->c->auth.role(), ACL_SELECT) == ACLCHECK_OK
	                    ? ChildKeyIndex(source, def)
	                    : InvalidOid;
	if (!OidIsValid(index_oid)) {
		table_close(source, AccessShareLock);
		if (minus != nullptr)
			CountChildren(run, r, keys, n, minus, nullptr, -1, cid);
		if (plus != nullptr || parents != nullptr)
			CountChildren(run, r, keys, n, plus, parents, 1, cid);
		return;
	}
	Oid type = TupleDescAttr(RelationGetDescr(source), def->child_key - 1)->atttypid;
	RegProcedure eq = type == INT2OID ? F_INT2EQ : type == INT4OID ? F_INT4EQ : F_INT8EQ;
	Relation index = index_open(index_oid, AccessShareLock);
	OwnerScope owner;
	EnterOwner(&owner, r->c->auth, PIN_ROW_SECURITY);
	Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
	snapshot->curcid = cid;
	TupleTableSlot *slot = table_slot_create(source, nullptr);
	IndexScanDesc scan = compat::BeginIndexScan(source, index, snapshot, 1);
	ErrorContextCallback context;
	PushCountContext(&context, run);
	for (int k = 0; k < n; k++) {
		/* (the key in the child column's own type: a key that type cannot hold has no children) */
		if ((type == INT2OID && (keys[k] < PG_INT16_MIN || keys[k] > PG_INT16_MAX)) ||
		    (type == INT4OID && (keys[k] < PG_INT32_MIN || keys[k] > PG_INT32_MAX)))
			continue;
		HeapTuple in = plus;
		if (in == nullptr && parents != nullptr) {
			ParentEntry *found = (ParentEntry *)hash_search(parents, &keys[k], HASH_FIND, nullptr);
			in = found != nullptr ? found->tuple : nullptr;
		}
		ScanKeyData skey;
		ScanKeyInit(&skey, 1, BTEqualStrategyNumber, eq,
		            type == INT2OID   ? Int16GetDatum((int16)keys[k])
		            : type == INT4OID ? Int32GetDatum((int32)keys[k])
		                              : Int64GetDatum(keys[k]));
		index_rescan(scan, &skey, 1, nullptr, 0);
		while (index_getnext_slot(scan, ForwardScanDirection, slot)) {
			if (minus != nullptr)
				CountRowWithParent(run, r, slot, minus, -1);
			if (in != nullptr)
				CountRowWithParent(run, r, slot, in, 1);
		}
	}
	error_context_stack = context.previous;
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	LeaveOwner(&owner);
	index_close(index, AccessShareLock);
	table_close(source, AccessShareLock);
}

} // namespace

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

/*
 * The counters that join `rel` as the parent of their rows. A parent keeps its triggers only while a counter joins it:
 * none means a restored database (its counters are adopted from their descriptions, as a source's first write
 * adopts), or an error rather than a write that moves no child.
 */
SourceCounters *
ParentCounters(Relation rel)
{
	SourceCounters *pc = GetParentCounters(RelationGetRelid(rel));
	if (pc->ncounters > 0)
		return pc;
	(void)Adopt(RelationGetRelid(rel));
	pc = GetParentCounters(RelationGetRelid(rel));
	RequireCounters(rel, pc, true);
	return pc;
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
		MoveChildren(run, r, keys, n, nullptr, nullptr, parents, cid);
		EndStatementRun(run);
	}
	MemoryContextDelete(cxt);
}

/* counters_parent_row: after a parent row was updated or deleted, its children move to the new row or away. */
void
ParentRow(TriggerData *td)
{
	Relation rel = td->tg_relation;
	SourceCounters *pc = ParentCounters(rel);
	if (counting_suspended && Suspended(pc))
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
			bool old_null, new_null = true;
			Datum key = heap_getattr(old_tuple, def->parent_key, desc, &old_null);
			int64 old_key = old_null ? 0 : IntegerDatum(def->join_type, key);
			key = new_tuple != nullptr ? heap_getattr(new_tuple, def->parent_key, desc, &new_null) : (Datum)0;
			int64 new_key = new_null ? 0 : IntegerDatum(def->join_type, key);
			if (!old_null && !new_null && new_key == old_key) /* the same children: out and in, in one pass */
				MoveChildren(run, r, &old_key, 1, old_tuple, new_tuple, nullptr, cid);
			else {
				if (!old_null)
					MoveChildren(run, r, &old_key, 1, old_tuple, nullptr, nullptr, cid);
				if (!new_null) {
					/* (a key the parent takes: a child written to it meanwhile waits, or is waited for) */
					LockParentKeys(RelationGetRelid(rel), &new_key, 1, true);
					MoveChildren(run, r, &new_key, 1, nullptr, new_tuple, nullptr, cid);
				}
			}
		}
		EndStatementRun(run);
	}
	UnpinSettings(level);
}

} // namespace counters
