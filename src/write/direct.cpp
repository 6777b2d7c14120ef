/*
 * direct.cpp: adding deltas to counter rows (and appending them to logs) without the executor.
 *
 * Running INSERT ... ON CONFLICT DO UPDATE through SPI for each key costs an executor start-up, an arbiter index probe
 * and an executor shutdown per key; a set-based upsert of many keys costs a speculative insertion attempt per key.
 * This file does the same work directly, key by key in the statement's key order, the way ON CONFLICT DO UPDATE does
 * it inside the executor:
 *
 *   1. find the key's row through the counter table's unique key index with a dirty snapshot, waiting for any
 *      transaction that is inserting or changing it, then looking again;
 *   2. lock it (table_tuple_lock) where something is decided from its value (a bound, a threshold, a CHECK
 *      constraint); if a concurrent transaction changed it meanwhile, look again (READ COMMITTED) or raise a
 *      serialization failure (REPEATABLE READ, as ON CONFLICT does);
 *   3. write the new version (or delete the row when every value came back to zero), inserting index entries when
 *      the update is not HOT (or, a HOT update that changed columns of summarizing indexes, into those only). A row
 *      not locked in step 2 is written as UPDATE writes it: if a concurrent transaction changed it since it was
 *      read, the write says so, and the key is looked up again (READ COMMITTED) or fails (REPEATABLE READ);
 *   4. a key without a row gets one by speculative insertion (exact mode; sharded mode: a new slot row when a slot
 *      number is free), as INSERT ... ON CONFLICT inserts: if another transaction inserted the key meanwhile, the
 *      insertion is undone and the key looked up again.
 *
 * A log counter's deltas are appended the same way: a heap insertion and its index entries per key (DirectAppend), as
 * INSERT INTO <log> VALUES (...) would.
 *
 * Where that is not possible (a sharded key whose every slot row is busy, a counter table with other columns) the
 * key is reported Missing and the caller runs the SPI upsert. The direct path is used only where it does exactly
 * what the upsert would do: a plain heap table created by create_counter, with no triggers and no row-level security
 * (a log, also no generated columns), and not at SERIALIZABLE (whose predicate locks the executor takes); anything
 * else goes through the upsert. Stored generated columns (derived kinds') are computed and CHECK constraints checked
 * on the row as it will be, as the executor does.
 *
 * Like capture.cpp, this code calls PostgreSQL functions that raise errors, so no object with a destructor lives on
 * its stack; relations, slots and the executor state are released by the resource owner or freed with the
 * statement's memory context if an error escapes.
 */
#include "write/write.hpp"
#include "compat.hpp"

extern "C" {
#include "access/genam.h"
#include "access/heapam.h"
#include "access/itup.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace counters {

struct DirectTarget {
	CompiledCounter *c;
	Relation rel;
	Relation index;
	TupleTableSlot *found; /* the locked current version */
	TupleTableSlot *next;  /* the new version */
	ScanKeyData *scankeys;
	int *key_of_column; /* index column -> key number (the compiled counter's) */
	EState *estate;     /* for index insertions of non-HOT updates, created when first needed */
	ResultRelInfo *rri;
	Datum zero; /* numeric 0 */
	bool modified;
	bool deleted;          /* the last key's row was deleted (its values all came back to zero), not written */
	bool unlocked_update;  /* rows are updated without locking them first (DirectAdd) */
	IndexScanDesc scan;    /* LockKeyRow's scan of the key index, kept open for the next key */
	SnapshotData dirty;    /* (its snapshot) */
	bool can_insert;       /* a missing key's row is inserted here (exact mode, every column a key or value column) */
	List *arbiters;        /* the key index, for the speculative insertion of a missing key's row */
	Oid *digest_type;      /* by index column: the base type of a key indexed by its digest, else InvalidOid */
	MemoryContext digests; /* the current key's digests (reset per key) */
	IndexScanDesc merge;   /* DirectMergeBegin's ordered scan of the whole key index, or NULL */
	SnapshotData merge_dirty; /* (its snapshot) */
	bool merge_on_entry;      /* the scan stands on an entry not yet compared with a key */
	bool merge_done;          /* the scan has passed the index's last entry */
	bool generated;           /* the table has stored generated columns (derived kinds'), computed per version */
	bool indexes_open;        /* estate's result relation has its indexes open */
};

namespace {

/* Whether the counter table lets deltas be applied directly with the same effect as the SPI upsert. */
bool
DirectAllowed(Relation rel, bool generated_ok = false)
{
	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relam != HEAP_TABLE_AM_OID)
		return false;
	/* (a TRUNCATE trigger, such as counters_guard, has nothing to do with the rows written here) */
	TriggerDesc *td = rel->trigdesc;
	if (td != nullptr &&
	    (td->trig_insert_before_row || td->trig_insert_after_row || td->trig_insert_instead_row ||
	     td->trig_insert_before_statement || td->trig_insert_after_statement || td->trig_update_before_row ||
	     td->trig_update_after_row || td->trig_update_instead_row || td->trig_update_before_statement ||
	     td->trig_update_after_statement || td->trig_delete_before_row || td->trig_delete_after_row ||
	     td->trig_delete_instead_row || td->trig_delete_before_statement || td->trig_delete_after_statement))
		return false;
	if (rel->rd_rel->relrowsecurity)
		return false;
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	if (constr != nullptr && constr->has_generated_stored && !generated_ok)
		return false;
	return !IsolationIsSerializable();
}

} // namespace

namespace {

/* The scan keys of the index's key columns, for the key in params/nulls (a long key: its digest). */
void
SetScanKeys(DirectTarget *d, Datum *params, char *nulls)
{
	if (d->digests != nullptr)
		MemoryContextReset(d->digests);
	for (int j = 0; j < d->c->def->nkeys; j++) {
		int k = d->key_of_column[j];
		ScanKey sk = &d->scankeys[j];
		if (nulls[k] == 'n') {
			sk->sk_flags = SK_ISNULL | SK_SEARCHNULL;
			sk->sk_argument = (Datum)0;
		} else if (OidIsValid(d->digest_type[j])) {
			MemoryContext old = MemoryContextSwitchTo(d->digests);
			sk->sk_flags = 0;
			sk->sk_argument = KeyDigest(params[k], d->digest_type[j]);
			MemoryContextSwitchTo(old);
		} else {
			sk->sk_flags = 0;
			sk->sk_argument = params[k];
		}
	}
}

/* A row found by a key's digest is that key's row: compared exactly (a different key would be an SHA-256 collision). */
void
RequireSameKey(DirectTarget *d, Datum *params, char *nulls)
{
	if (d->digests == nullptr)
		return;
	for (int j = 0; j < d->c->def->nkeys; j++) {
		if (!OidIsValid(d->digest_type[j]))
			continue;
		int k = d->key_of_column[j];
		bool isnull;
		Datum stored = slot_getattr(d->found, d->c->key_attnums[k], &isnull);
		if (isnull != (nulls[k] == 'n') || (!isnull && !KeyBytesEqual(stored, params[k], d->digest_type[j])))
			ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
			                errmsg("counter \"%s\": two different keys have the same digest", d->c->def->name)));
	}
}

void
SerializationFailure()
{
	ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
	                errmsg("could not serialize access due to concurrent update")));
}

/*
 * Whether a transaction snapshot may build on the version found: it is visible to the snapshot, or this transaction's
 * own (a version committed after the snapshot may not be built upon, as ON CONFLICT says).
 */
bool
SnapshotMayBuildOn(DirectTarget *d, Snapshot snapshot)
{
	if (table_tuple_satisfies_snapshot(d->rel, d->found, snapshot))
		return true;
	bool isnull;
	Datum xmin = slot_getsysattr(d->found, MinTransactionIdAttributeNumber, &isnull);
	return TransactionIdIsCurrentTransactionId(DatumGetTransactionId(xmin));
}

/* Under a transaction snapshot, the version found must be one it may build on. */
void
RequireSnapshotVersion(DirectTarget *d, Snapshot snapshot)
{
	if (!SnapshotMayBuildOn(d, snapshot))
		SerializationFailure();
}

/*
 * Find the row of the key in `params` and (lock) lock it; false if there is none. On return with true, d->found holds
 * the current version (locked if asked) and *tid its location. Under a transaction snapshot, a version committed
 * after it may not be built upon (as ON CONFLICT): a serialization failure.
 */
bool
LockKeyRow(DirectTarget *d, Datum *params, char *nulls, ItemPointer tid, bool lock)
{
	CounterDef *def = d->c->def;
	int nkeys = def->nkeys;
	SetScanKeys(d, params, nulls);
	Snapshot snapshot = GetActiveSnapshot();
	CommandId cid = GetCurrentCommandId(true);
	for (;;) {
		InitDirtySnapshot(d->dirty);
		if (d->scan == nullptr)
			d->scan = compat::BeginIndexScan(d->rel, d->index, &d->dirty, nkeys);
		index_rescan(d->scan, d->scankeys, nkeys, nullptr, 0);
		bool found = index_getnext_slot(d->scan, ForwardScanDirection, d->found);
		if (!found)
			return false;
		/* Being inserted or changed by another transaction: wait for it to finish, then look again. */
		TransactionId xwait = TransactionIdIsValid(d->dirty.xmin) ? d->dirty.xmin : d->dirty.xmax;
		if (TransactionIdIsValid(xwait)) {
			/* (not holding the scan's pins while waiting) */
			index_endscan(d->scan);
			d->scan = nullptr;
			XactLockTableWait(xwait, d->rel, &d->found->tts_tid, XLTW_InsertIndex);
			continue;
		}
		RequireSameKey(d, params, nulls);
		*tid = d->found->tts_tid;
		if (!lock) {
			if (IsolationUsesXactSnapshot())
				RequireSnapshotVersion(d, snapshot);
			return true;
		}
		TM_FailureData tmfd;
		TM_Result res =
		    table_tuple_lock(d->rel, tid, snapshot, d->found, cid, LockTupleNoKeyExclusive, LockWaitBlock, 0, &tmfd);
		switch (res) {
		case TM_Ok:
			if (IsolationUsesXactSnapshot())
				RequireSnapshotVersion(d, snapshot);
			return true;
		case TM_Updated:
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				SerializationFailure();
			continue; /* changed or removed meanwhile: look again */
		default:
			elog(ERROR, "counters: unexpected result %d locking a row of counter \"%s\"", (int)res, def->name);
		}
	}
}

/*
 * The executor state index insertions and constraint checks need, created when first needed; its indexes opened when
 * first needed too (generated columns need none: a HOT update of a counter row with a derived column opens nothing).
 */
void
EnsureExecutorState(DirectTarget *d, bool indexes = true)
{
	if (d->estate == nullptr) {
		d->estate = CreateExecutorState();
		d->rri = makeNode(ResultRelInfo);
		InitResultRelInfo(d->rri, d->rel, 0, nullptr, 0);
	}
	if (indexes && !d->indexes_open) {
		ExecOpenIndices(d->rri, true); /* (with what a speculative insertion needs) */
		d->indexes_open = true;
	}
}

/*
 * The stored generated columns of the new version (d->next, stored), as the executor computes them for an INSERT or an
 * UPDATE: all of them (a derived kind's reads the accumulators the deltas changed).
 */
void
ComputeGenerated(DirectTarget *d)
{
	if (!d->generated)
		return;
	/* (a generated column's expression is the table owner's code: PostgreSQL 17 on may change it) */
	RequireOwnerScope(d->c->auth.role());
	EnsureExecutorState(d, false);
	ResetPerTupleExprContext(d->estate);
	ExecComputeStoredGenerated(d->rri, d->estate, d->next, CMD_INSERT);
}

/*
 * Index entries for the new version of an updated row, in the indexes table_tuple_update says need them: all of them,
 * or (a HOT update that changed only columns of summarizing indexes such as BRIN) those alone. An entry in the key's
 * unique index for a heap-only version would outlive it: once VACUUM prunes the version, a later row of another key
 * can take its line pointer, and a scan for this key would return that row.
 */
void
InsertIndexEntries(DirectTarget *d, compat::IndexUpdate indexes)
{
	EnsureExecutorState(d);
	List *r = compat::InsertIndexTuples(d->rri, d->next, d->estate, indexes);
	list_free(r);
}

/*
 * Whether every column of the counter table is one of the counter's (sharded: and the slot number): a new row is then
 * the key and its deltas.
 */
bool
OnlyCounterColumns(Relation rel, CompiledCounter *c)
{
	TupleDesc desc = RelationGetDescr(rel);
	int n = 0;
	for (int a = 0; a < desc->natts; a++)
		if (!TupleDescAttr(desc, a)->attisdropped && TupleDescAttr(desc, a)->attgenerated == '\0')
			n++;
	return n == c->def->nkeys + c->def->nvalues + (c->counter->mode == Mode::Sharded ? 1 : 0) +
	                (c->anchor != nullptr ? 1 : 0);
}

/*
 * Insert the row of a key that has none: the key and its deltas as values. Inserted speculatively, as INSERT ... ON
 * CONFLICT does: if another transaction inserted the key meanwhile, the insertion is undone and false returned, for
 * the caller to look for that row again. The key's row is written in its turn, so rows are still locked or created
 * in the statement's key order.
 */
/* A new row of the table (d->next, not yet stored): the key and its deltas, every other column NULL. */
void
FillKeyRow(DirectTarget *d, Datum *params, char *nulls)
{
	CompiledCounter *c = d->c;
	const CounterDef *def = c->def;
	TupleTableSlot *next = d->next;
	ExecClearTuple(next);
	int natts = RelationGetDescr(d->rel)->natts;
	for (int a = 0; a < natts; a++) {
		next->tts_values[a] = (Datum)0;
		next->tts_isnull[a] = true;
	}
	for (int k = 0; k < def->nkeys; k++) {
		next->tts_isnull[c->key_attnums[k] - 1] = nulls[k] == 'n';
		next->tts_values[c->key_attnums[k] - 1] = nulls[k] == 'n' ? (Datum)0 : params[k];
	}
	for (int v = 0; v < def->nvalues; v++) {
		/* (an extreme nothing was added to is NULL) */
		next->tts_isnull[c->value_attnums[v] - 1] = nulls[def->nkeys + v] == 'n';
		next->tts_values[c->value_attnums[v] - 1] = params[def->nkeys + v];
	}
	/* (a cross-shard key's log row: under the shard's anchor) */
	if (c->anchor != nullptr) {
		next->tts_isnull[c->anchor_attnum - 1] = false;
		next->tts_values[c->anchor_attnum - 1] = c->anchor_value;
	}
}

bool
InsertKeyRow(DirectTarget *d, Datum *params, char *nulls, int slot)
{
	CompiledCounter *c = d->c;
	CounterDef *def = c->def;
	TupleTableSlot *next = d->next;
	FillKeyRow(d, params, nulls);
	for (int v = 0; v < def->nvalues; v++) {
		Datum delta = params[def->nkeys + v];
		Oid type = StoredType(&def->values[v]);
		if (def->values[v].accum == AccumKind::Extreme)
			continue; /* (no bounds or thresholds) */
		CheckBounds(c, v, delta, type, params, nulls);
		if (CrossesAtWrite(c))
			NoteCrossings(c, v, delta, type, delta, params, nulls);
	}
	if (c->counter->mode == Mode::Sharded) {
		next->tts_isnull[c->slot_attnum - 1] = false;
		next->tts_values[c->slot_attnum - 1] = Int32GetDatum(slot);
	}
	ExecStoreVirtualTuple(next);
	EnsureExecutorState(d);
	ComputeGenerated(d);
	if (c->has_check)
		ExecConstraints(d->rri, next, d->estate);
	TransactionId xid = GetCurrentTransactionId();
	uint32 token = SpeculativeInsertionLockAcquire(xid);
	table_tuple_insert_speculative(d->rel, next, GetCurrentCommandId(true), 0, nullptr, token);
	bool conflict = false;
	d->deleted = false;
	List *recheck = compat::InsertIndexTuplesSpeculative(d->rri, next, d->estate, &conflict, d->arbiters);
	table_tuple_complete_speculative(d->rel, next, token, !conflict);
	SpeculativeInsertionLockRelease(xid);
	list_free(recheck);
	if (!conflict)
		d->modified = true;
	return !conflict;
}

/*
 * Log mode: the log's rows are appended directly, as the statement INSERT INTO <log> VALUES (keys, deltas) would: a
 * heap insertion and its index entries, the log's constraints checked. Only for a log of the counter's columns alone
 * that DirectAllowed (no triggers, no row-level security, not SERIALIZABLE); else NULL, and the statement runs.
 */
DirectTarget *
DirectBeginAppend(CompiledCounter *c)
{
	if (c->key_attnums == nullptr)
		return nullptr;
	Relation rel = table_open(c->write_rel, RowExclusiveLock);
	if (!DirectAllowed(rel) || !OnlyCounterColumns(rel, c)) {
		table_close(rel, NoLock);
		return nullptr;
	}
	DirectTarget *d = (DirectTarget *)palloc0(sizeof(DirectTarget));
	d->c = c;
	d->rel = rel;
	d->next = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);
	EnsureExecutorState(d);
	return d;
}

} // namespace

void
DirectAppend(DirectTarget *d, Datum *params, char *nulls)
{
	TupleTableSlot *next = d->next;
	FillKeyRow(d, params, nulls);
	ExecStoreVirtualTuple(next);
	if (RelationGetDescr(d->rel)->constr != nullptr)
		ExecConstraints(d->rri, next, d->estate);
	table_tuple_insert(d->rel, next, GetCurrentCommandId(true), 0, nullptr);
	list_free(compat::InsertIndexTuplesOfNewRow(d->rri, next, d->estate));
	d->modified = true;
}

DirectTarget *
DirectBegin(CompiledCounter *c)
{
	/* (not counter-cache columns of an existing table, whose rows the UPDATE finds) */
	Mode mode = c->counter->mode;
	if (!c->counter->owns_target || c->key_attnums == nullptr)
		return nullptr;
	if (mode == Mode::Log)
		return DirectBeginAppend(c);
	if (mode == Mode::Sharded && (c->slot_attnum == InvalidAttrNumber || c->max_slots < 1))
		return nullptr;
	Relation rel = table_open(c->write_rel, RowExclusiveLock);
	if (!DirectAllowed(rel, true)) {
		table_close(rel, NoLock);
		return nullptr;
	}
	Oid indexoid = KeyIndexOf(c, rel);
	if (!OidIsValid(indexoid)) {
		table_close(rel, NoLock);
		return nullptr;
	}
	/* A published table must be able to publish the updates and deletes (as the executor checks). */
	CheckCmdReplicaIdentity(rel, CMD_UPDATE);
	CheckCmdReplicaIdentity(rel, CMD_DELETE);
	DirectTarget *d = (DirectTarget *)palloc0(sizeof(DirectTarget));
	d->c = c;
	d->rel = rel;
	d->index = index_open(indexoid, RowExclusiveLock);
	d->key_of_column = c->key_of_column;
	d->found = table_slot_create(rel, nullptr);
	d->next = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);
	d->zero = DirectFunctionCall1(int8_numeric, Int64GetDatum(0));
	d->can_insert = OnlyCounterColumns(rel, c);
	d->generated = RelationGetDescr(rel)->constr != nullptr && RelationGetDescr(rel)->constr->has_generated_stored;
	/* (exact mode, nothing decided from a row's value: no bounds, no thresholds, no CHECK constraints) */
	d->unlocked_update = mode == Mode::Exact && c->has_min == nullptr && !c->has_thresholds && !c->has_check;
	d->arbiters = list_make1_oid(indexoid);
	KeyIndexProcs(c, d->index);
	/* Keys the index has by their digest: looked up by it (SetScanKeys), compared exactly (RequireSameKey). */
	d->digest_type = (Oid *)palloc0(sizeof(Oid) * c->def->nkeys);
	for (int j = 0; c->key_digested != nullptr && j < c->def->nkeys; j++)
		if (c->key_digested[d->key_of_column[j]]) {
			d->digest_type[j] = getBaseType(c->def->keys[d->key_of_column[j]].type);
			if (d->digests == nullptr)
				d->digests = AllocSetContextCreate(CurrentMemoryContext, "counters key digests", ALLOCSET_SMALL_SIZES);
		}
	d->scankeys = (ScanKeyData *)palloc0(sizeof(ScanKeyData) * c->def->nkeys);
	for (int j = 0; j < c->def->nkeys; j++)
		ScanKeyEntryInitialize(&d->scankeys[j], 0, j + 1, BTEqualStrategyNumber, InvalidOid,
		                       d->index->rd_indcollation[j], c->key_eq_procs[j], (Datum)0);
	return d;
}

namespace {

/*
 * Sharded mode: lock one slot row of the key without waiting. The key's slot rows are read through the index (dirty
 * snapshot: rows being inserted count as taken); then, starting at this backend's own slot so that concurrent
 * writers spread out, each is tried with a conditional lock, skipping those locked or changed by others. False if
 * none could be locked; *free_slot is then a slot number not in use (*untaken) or, if all are, this backend's own,
 * for the caller to wait on.
 */
bool
LockSlotRow(DirectTarget *d, Datum *params, char *nulls, ItemPointer tid, int *free_slot, bool *untaken)
{
	CompiledCounter *c = d->c;
	int nkeys = c->def->nkeys;
	int max_slots = c->max_slots;
	SetScanKeys(d, params, nulls);
	ItemPointerData *tids = (ItemPointerData *)palloc(sizeof(ItemPointerData) * max_slots);
	bool *taken = (bool *)palloc0(sizeof(bool) * max_slots);
	int *at = (int *)palloc(sizeof(int) * max_slots); /* slot number -> index in tids, or -1 */
	for (int i = 0; i < max_slots; i++)
		at[i] = -1;
	int n = 0;
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	IndexScanDesc scan = compat::BeginIndexScan(d->rel, d->index, &dirty, nkeys);
	index_rescan(scan, d->scankeys, nkeys, nullptr, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, d->found)) {
		bool isnull;
		int slot = DatumGetInt32(slot_getattr(d->found, c->slot_attnum, &isnull));
		if (isnull || slot < 0 || slot >= max_slots)
			continue; /* (max_slots lowered: such rows are only folded by compaction) */
		taken[slot] = true;
		if (TransactionIdIsValid(dirty.xmin) || TransactionIdIsValid(dirty.xmax))
			continue; /* being inserted or changed: busy */
		at[slot] = n;
		tids[n++] = d->found->tts_tid;
	}
	index_endscan(scan);

	Snapshot snapshot = GetActiveSnapshot();
	CommandId cid = GetCurrentCommandId(true);
	int start = compat::BackendNumber() % max_slots;
	bool locked = false;
	for (int i = 0; i < max_slots && !locked; i++) {
		int slot = (start + i) % max_slots;
		if (at[slot] < 0)
			continue;
		*tid = tids[at[slot]];
		TM_FailureData tmfd;
		TM_Result res =
		    table_tuple_lock(d->rel, tid, snapshot, d->found, cid, LockTupleNoKeyExclusive, LockWaitSkip, 0, &tmfd);
		if (res != TM_Ok)
			continue; /* locked by another writer, or changed since we looked: try the next slot */
		/* Under a transaction snapshot, a version committed after it may not be built upon: use another slot. */
		if (IsolationUsesXactSnapshot() && !SnapshotMayBuildOn(d, snapshot))
			continue;
		locked = true;
	}
	*untaken = false;
	if (!locked) {
		*free_slot = start;
		for (int i = 0; i < max_slots; i++)
			if (!taken[(start + i) % max_slots]) {
				*free_slot = (start + i) % max_slots;
				*untaken = true;
				break;
			}
	}
	pfree(tids);
	pfree(taken);
	pfree(at);
	return locked;
}

/*
 * The key's row as it will be (d->next, not yet stored), from the version found (d->found) and the deltas; *all_zero
 * when every value comes back to zero. False, for the caller to lock the row and look again, when a value would go
 * beyond bigint in a version read without a lock (another transaction may have changed it since).
 */
bool
NextVersion(DirectTarget *d, Datum *params, char *nulls, bool locked, bool *all_zero)
{
	CounterDef *def = d->c->def;
	slot_getallattrs(d->found);
	TupleTableSlot *next = d->next;
	ExecClearTuple(next);
	int natts = RelationGetDescr(d->rel)->natts;
	memcpy(next->tts_values, d->found->tts_values, sizeof(Datum) * natts);
	memcpy(next->tts_isnull, d->found->tts_isnull, sizeof(bool) * natts);
	*all_zero = true;
	for (int v = 0; v < def->nvalues; v++) {
		int a = d->c->value_attnums[v] - 1;
		Datum delta = params[def->nkeys + v];
		if (def->values[v].accum == AccumKind::Extreme) {
			/* the more extreme of the value and the one added (GREATEST or LEAST: a NULL is passed over) */
			bool added = nulls[def->nkeys + v] != 'n';
			if (added && (next->tts_isnull[a] || ExtremeCompare(d->c, v, delta, next->tts_values[a]) > 0)) {
				next->tts_values[a] = delta;
				next->tts_isnull[a] = false;
			}
			*all_zero &= next->tts_isnull[a];
			continue;
		}
		if (next->tts_isnull[a])
			ereport(ERROR, (errcode(ERRCODE_NOT_NULL_VIOLATION),
			                errmsg("counter \"%s\": column \"%s\" holds NULL", def->name, d->c->value_columns[v])));
		if (def->values[v].accum == AccumKind::Int64) {
			int64 sum;
			if (pg_add_s64_overflow(DatumGetInt64(next->tts_values[a]), DatumGetInt64(delta), &sum)) {
				if (!locked)
					return false;
				ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				                errmsg("counter \"%s\": column \"%s\" out of range for type bigint", def->name,
				                       d->c->value_columns[v])));
			}
			next->tts_values[a] = Int64GetDatum(sum);
			*all_zero &= sum == 0;
			CheckBounds(d->c, v, next->tts_values[a], INT8OID, params, nulls);
			if (CrossesAtWrite(d->c))
				NoteCrossings(d->c, v, next->tts_values[a], INT8OID, delta, params, nulls);
		} else {
			Datum sum = DirectFunctionCall2(numeric_add, next->tts_values[a], delta);
			next->tts_values[a] = sum;
			CheckBounds(d->c, v, sum, NUMERICOID, params, nulls);
			if (CrossesAtWrite(d->c))
				NoteCrossings(d->c, v, sum, NUMERICOID, delta, params, nulls);
			*all_zero &= DatumGetInt32(DirectFunctionCall2(numeric_cmp, sum, d->zero)) == 0;
		}
	}
	*all_zero &= !d->c->keep_zero; /* (counters.set_keep_zero: the row stays, with zeros) */
	return true;
}

/*
 * Write the key's row as it will be (d->next, from NextVersion) over the version found at *tid, or delete that version
 * when every value came back to zero; the result of the update or delete (waiting for a writer that has the row).
 */
TM_Result
WriteFoundVersion(DirectTarget *d, ItemPointer tid, bool all_zero)
{
	CommandId cid = GetCurrentCommandId(true);
	Snapshot snapshot = GetActiveSnapshot();
	TupleTableSlot *next = d->next;
	TM_FailureData tmfd;
	TM_Result res;
	/* CHECK constraints hold for the row as it will be (a deleted row, all zeros, has nothing to check). */
	if (!all_zero) {
		ExecStoreVirtualTuple(next);
		ComputeGenerated(d);
	}
	if (!all_zero && d->c->has_check) {
		EnsureExecutorState(d);
		ExecConstraints(d->rri, next, d->estate);
	}
	d->deleted = all_zero;
	if (all_zero) {
		/* An absent row means zeros: the row goes, as the upsert path's DELETE does. */
		res = table_tuple_delete(d->rel, tid, cid, snapshot, InvalidSnapshot, true, &tmfd, false);
	} else {
		LockTupleMode lockmode;
		compat::IndexUpdate indexes;
		res = compat::UpdateTuple(d->rel, tid, next, cid, snapshot, &tmfd, &lockmode, &indexes);
		if (res == TM_Ok && indexes != compat::IndexUpdate::None)
			InsertIndexEntries(d, indexes);
	}
	return res;
}

/* The order of the merge scan's index entry against the key in `params` (<0: the entry comes first). */
int
CompareMergeEntry(DirectTarget *d, Datum *params, char *nulls)
{
	IndexScanDesc scan = d->merge;
	for (int j = 0; j < d->c->def->nkeys; j++) {
		bool isnull;
		Datum v = index_getattr(scan->xs_itup, j + 1, scan->xs_itupdesc, &isnull);
		int cmp = CompareKeyValues(d->c, j, v, isnull, params[j], nulls[j] == 'n');
		if (cmp != 0)
			return cmp;
	}
	return 0;
}

} // namespace

bool
DirectMergeBegin(DirectTarget *d, uint32 n)
{
	CompiledCounter *c = d->c;
	/*
	 * Past some share of the index's entries, reading its leaf pages in order costs less than a descent from the root
	 * per key, as a merge join beats a nested loop. Only where a row is written without being locked first (as
	 * DirectAdd would), at READ COMMITTED (a transaction snapshot's checks stay with DirectAdd).
	 */
	if (!d->unlocked_update || IsolationUsesXactSnapshot() || !c->key_index_sorted || n < 256)
		return false;
	double entries = d->index->rd_rel->reltuples >= 0 ? d->index->rd_rel->reltuples
	                                                  : (double)RelationGetNumberOfBlocks(d->index) * 100.0;
	if ((double)n * 8.0 < entries)
		return false;
	InitDirtySnapshot(d->merge_dirty);
	d->merge = compat::BeginIndexScan(d->rel, d->index, &d->merge_dirty, 0);
	d->merge->xs_want_itup = true; /* (the entries' keys, compared before their rows are read) */
	index_rescan(d->merge, nullptr, 0, nullptr, 0);
	d->merge_on_entry = false;
	d->merge_done = false;
	return true;
}

MergeResult
DirectMergeAdd(DirectTarget *d, Datum *params, char *nulls)
{
	IndexScanDesc scan = d->merge;
	for (;;) {
		if (!d->merge_on_entry) {
			if (d->merge_done || index_getnext_tid(scan, ForwardScanDirection) == nullptr) {
				d->merge_done = true;
				return MergeResult::Absent;
			}
			d->merge_on_entry = true;
		}
		int cmp = CompareMergeEntry(d, params, nulls);
		if (cmp > 0)
			return MergeResult::Absent; /* no entry of the key where it would be */
		d->merge_on_entry = false;
		if (cmp < 0)
			continue; /* a key the statement does not write (or an entry of a version written before) */
		if (!index_fetch_heap(scan, d->found))
			continue; /* a dead version's entry: the key's row may have another */
		/* Being inserted or changed by another transaction, or a value beyond bigint: DirectAdd waits and locks. */
		if (TransactionIdIsValid(d->merge_dirty.xmin) || TransactionIdIsValid(d->merge_dirty.xmax))
			return MergeResult::Unknown;
		bool all_zero;
		if (!NextVersion(d, params, nulls, false, &all_zero))
			return MergeResult::Unknown;
		ItemPointerData tid = d->found->tts_tid;
		TM_Result res = WriteFoundVersion(d, &tid, all_zero);
		if (res == TM_Ok) {
			d->modified = true;
			return MergeResult::Applied;
		}
		if (res != TM_Updated && res != TM_Deleted)
			elog(ERROR, "counters: unexpected result %d writing a row of counter \"%s\"", (int)res, d->c->def->name);
		return MergeResult::Unknown; /* changed or removed since it was read: DirectAdd looks again */
	}
}

DirectResult
DirectAdd(DirectTarget *d, Datum *params, char *nulls, int *free_slot, bool absent)
{
	CounterDef *def = d->c->def;
	/*
	 * Where nothing is decided from the value read (see DirectBegin), the row found is updated without locking it
	 * first, as UPDATE does: if another transaction changed it meanwhile, the update says so after waiting for it,
	 * and the key is looked up again (READ COMMITTED) or the write fails (REPEATABLE READ). That saves a lock, and its
	 * WAL record, per key. Else the row is locked first, as ON CONFLICT DO UPDATE does, so that what is decided from
	 * its value (a bound, a threshold crossed, a CHECK constraint) holds for the version written.
	 */
	bool lock = !d->unlocked_update;
	for (;;) {
		ItemPointerData tid;
		for (;;) {
			/* sharded: a free slot row of the key, else a new slot row if a slot number is untaken */
			bool untaken = true;
			/*
			 * (a key seen absent is inserted at once: a row another transaction inserted since is met by the
			 * speculative insertion, as one inserted after a lookup would be, and looked up then)
			 */
			if (!absent &&
			    (d->c->counter->mode == Mode::Sharded ? LockSlotRow(d, params, nulls, &tid, free_slot, &untaken)
			                                          : LockKeyRow(d, params, nulls, &tid, lock)))
				break;
			absent = false;
			if (!d->can_insert || !untaken)
				return DirectResult::Missing;
			if (InsertKeyRow(d, params, nulls, *free_slot))
				return DirectResult::Applied;
			/* inserted by another transaction meanwhile: look again */
		}
		bool all_zero;
		if (!NextVersion(d, params, nulls, lock, &all_zero)) {
			lock = true;
			continue;
		}
		TM_Result res = WriteFoundVersion(d, &tid, all_zero);
		if (res == TM_Ok)
			break;
		/* Changed or removed by another transaction since it was read (a locked row cannot have been). */
		if (lock || (res != TM_Updated && res != TM_Deleted))
			elog(ERROR, "counters: unexpected result %d writing a row of counter \"%s\"", (int)res, def->name);
		if (IsolationUsesXactSnapshot())
			SerializationFailure();
	}
	d->modified = true;
	return DirectResult::Applied;
}

TupleTableSlot *
DirectWritten(DirectTarget *d)
{
	return d->deleted ? nullptr : d->next;
}

bool
DirectEnd(DirectTarget *d)
{
	if (d == nullptr)
		return false;
	if (d->estate != nullptr) {
		if (d->indexes_open)
			ExecCloseIndices(d->rri);
		FreeExecutorState(d->estate);
	}
	if (d->scan != nullptr)
		index_endscan(d->scan);
	if (d->merge != nullptr)
		index_endscan(d->merge);
	if (d->found != nullptr)
		ExecDropSingleTupleTableSlot(d->found);
	ExecDropSingleTupleTableSlot(d->next);
	list_free(d->arbiters);
	if (d->index != nullptr)
		index_close(d->index, NoLock);
	table_close(d->rel, NoLock);
	bool modified = d->modified;
	if (d->scankeys != nullptr)
		pfree(d->scankeys);
	pfree(d);
	return modified;
}

} // namespace counters
