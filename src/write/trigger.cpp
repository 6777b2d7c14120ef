/*
 * trigger.cpp: the trigger roles of counters.capture() -- a source's statement triggers, a sink's row and statement
 * triggers, a parent's triggers (counters through a parent row), the guard of a counter's own tables and the
 * counter-cache key trigger -- each counting through the statement's run (capture.cpp).
 */
#include "write/write.hpp"
#include "citus/citus.hpp"
#include "compat.hpp"

extern "C" {
#include "access/genam.h"
#include "access/heapam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/tupconvert.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_opfamily.h"
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
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"
}

namespace counters {

bool counting_suspended = false;

/* A relation that carries the capture triggers must feed a counter: otherwise they count nothing, silently. */
void
RequireCounters(Relation rel, SourceCounters *sc, bool parent)
{
	if (sc->ncounters > 0)
		return;
	ereport(ERROR,
	        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
	         errmsg("table %s has the triggers of counters, but no counter %s it", QualifiedName(RelationGetRelid(rel)),
	                parent ? "joins" : "is declared on"),
	         errdetail("counters.counter has no row for it, and no definition view that reads it describes a counter "
	                   "that could be declared again: a dump does not contain the rows of the extension's catalog, "
	                   "only each counter's description (the comment of its definition view), which the first write "
	                   "declares again when the view's owner may declare it."),
	         errhint("Declare its counters again with counters.create_counter(), or remove the triggers with SELECT "
	                 "counters.detach('%s').",
	                 QualifiedName(RelationGetRelid(rel)))));
}

namespace {

/*
 * counters.suspend: a data load by the counters' owner (pg_restore --data-only into a database whose counter tables
 * it also loads) is not counted on top of the loaded values. Only a role with the privileges of the owner of every
 * relation of each counter the write would count for may suspend them (42501 otherwise, naming the counter: a writer
 * may not skip a counter it could not rebuild); each suspended write is noted in counters.maintenance.suspended_at,
 * which counters.stats shows (last_suspended) and verify() reports. A sink's rows, which are stored nowhere, are
 * counted anyway.
 */
bool
Suspended(SourceCounters *sc)
{
	if (!counting_suspended || sc->ncounters == 0)
		return false;
	for (int i = 0; i < sc->ncounters; i++) {
		const Counter *e = sc->counters[i].counter;
		if (!MayMaintain(e))
			ereport(ERROR,
			        (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			         errmsg("counter \"%s\": counters.suspend is for a role with its owner's privileges", e->name),
			         errdetail("A write by this role with counters.suspend on would leave the counter wrong."),
			         errhint("RESET counters.suspend, or load the data as the counters' owner.")));
	}
	const char *columns[1] = {"suspended_at"};
	Oid types[1] = {TIMESTAMPTZOID};
	Datum values[1] = {TimestampTzGetDatum(GetCurrentTimestamp())};
	for (int i = 0; i < sc->ncounters; i++)
		NoteMaintenance(sc->counters[i].counter->name, 1, columns, types, values, nullptr);
	return true;
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
		if (c->followed != nullptr)
			continue; /* (its publisher's counts arrive by logical replication: see CountsHere) */
		OwnerScope owner;
		EnterOwner(&owner, c->auth, 0);
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

namespace {

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

/*
 * The index that finds the children of one parent key without SPI: a valid btree index of the source itself whose
 * first column is the child key, plain, in the integer operator family (whose comparisons are PostgreSQL's own). Not
 * for a source with partitions or inheritance children, or with row-level security (which the SPI statement, as the
 * owner with row_security off, refuses to read past): InvalidOid, and CountChildren reads them.
 */
namespace {

bool
LeadsWithChildKey(Relation index, void *arg)
{
	Form_pg_index form = index->rd_index;
	return index->rd_rel->relam == BTREE_AM_OID && form->indisvalid && form->indnatts >= 1 &&
	       form->indkey.values[0] == *(AttrNumber *)arg && index->rd_opfamily[0] == INTEGER_BTREE_FAM_OID &&
	       heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, nullptr) &&
	       heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, nullptr);
}

} // namespace

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
	run->econtext->ecxt_scantuple = slot;
	run->counting = (int)(r - run->runs);
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
			if (minus != nullptr) {
				r->fixed_parent = minus;
				CountRowFor(run, r, -1);
				ResetExprContext(run->econtext);
			}
			if (in != nullptr) {
				r->fixed_parent = in;
				CountRowFor(run, r, 1);
				ResetExprContext(run->econtext);
			}
		}
	}
	run->counting = -1;
	r->fixed_parent = nullptr;
	error_context_stack = context.previous;
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	LeaveOwner(&owner);
	index_close(index, AccessShareLock);
	table_close(source, AccessShareLock);
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

} // namespace

/* counters_parent_row: after a parent row was updated or deleted, its children move to the new row or away. */
static void
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

namespace {

/* The roles of counters.capture()'s triggers; a source's statement triggers (Statement) by their event. */
enum class Role {
	Statement,
	Sink,
	SinkGuard,
	SinkEnd,
	Guard,
	TargetKey,
	ParentBegin,
	ParentRow,
	ParentInsert,
	ParentTruncate,
	ParentReplica,
	Replica
};

/* Which role a trigger has, from its name: the names of the model's one table of trigger names. */
Role
RoleOf(const char *tgname)
{
	static const Role parent_roles[] = {Role::ParentBegin,    Role::ParentRow,     Role::ParentInsert,
	                                    Role::ParentTruncate, Role::ParentReplica, Role::ParentReplica};
	static_assert(lengthof(parent_roles) == PARENT_TRIGGERS, "a role for every parent trigger");
	for (int t = 0; t < PARENT_TRIGGERS; t++)
		if (strcmp(tgname, ParentTriggerName(t)) == 0)
			return parent_roles[t];
	if (strcmp(tgname, CaptureTriggerName(SINK_TRIGGER)) == 0)
		return Role::Sink;
	if (strcmp(tgname, CaptureTriggerName(SINK_GUARD_TRIGGER)) == 0)
		return Role::SinkGuard;
	if (strcmp(tgname, CaptureTriggerName(SINK_END_TRIGGER)) == 0)
		return Role::SinkEnd;
	if (strcmp(tgname, CaptureTriggerName(REPLICA_TRIGGER)) == 0 ||
	    strcmp(tgname, CaptureTriggerName(REPLICA_TRUNCATE_TRIGGER)) == 0)
		return Role::Replica;
	if (strcmp(tgname, guard_trigger) == 0)
		return Role::Guard;
	if (strcmp(tgname, target_key_trigger) == 0)
		return Role::TargetKey;
	return Role::Statement;
}

void
Capture(TriggerData *td, Role role)
{
	TriggerEvent ev = td->tg_event;
	Relation rel = td->tg_relation;
	/* The statement triggers on the parent of counters through a parent row. */
	if (role == Role::ParentBegin || role == Role::ParentRow || role == Role::ParentInsert ||
	    role == Role::ParentTruncate || role == Role::ParentReplica) {
		SourceCounters *pc = ParentCounters(rel);
		/* (counters_parent_begin, BEFORE the statement, loads this library before its AFTER triggers: nothing else) */
		int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT);
		/*
		 * Under the replica role the other parent triggers do not fire: a counter that counts here refuses the write
		 * (0A000) rather than miss it; one that follows its publisher lets it through.
		 */
		if (role != Role::ParentBegin && Suspended(pc)) {
			UnpinSettings(level);
			return;
		}
		if (role == Role::ParentReplica)
			(void)CountsHere(rel, pc, true);
		else if (pc->nfollowed > 0 && role != Role::ParentBegin)
			(void)CountsHere(rel, pc, false);
		if (pc->ncounters > 0 && role == Role::ParentInsert) {
			if (td->tg_newtable == nullptr)
				ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				                errmsg("counters.capture() on \"%s\" needs REFERENCING NEW TABLE",
				                       RelationGetRelationName(rel))));
			ParentInserted(rel, pc, td->tg_newtable);
		} else if (pc->ncounters > 0 && role == Role::ParentTruncate)
			ZeroCounters(pc); /* (every parent is gone: no row has one) */
		UnpinSettings(level);
		return;
	}
	/*
	 * counters_begin, BEFORE the statement: nothing to do. Its call loads this library before the statement's AFTER
	 * triggers fire, so that even a backend's first statement collects its events' deltas in one frame.
	 */
	if (TRIGGER_FIRED_BEFORE(ev) && !TRIGGER_FIRED_BY_TRUNCATE(ev)) {
		if (TRIGGER_FIRED_BY_INSERT(ev) || role != Role::SinkGuard)
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
	if (TRIGGER_FIRED_BY_TRUNCATE(ev) && role == Role::Guard) {
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
	if (sc->ncounters == 0) {
		citus::RefuseCapture(rel);
		/*
		 * (a restored database: the counters its definition views describe, declared again -- here, or by a concurrent
		 * first writer this one queued behind)
		 */
		(void)Adopt(RelationGetRelid(rel));
		sc = GetSourceCounters(RelationGetRelid(rel));
	}
	RequireCounters(rel, sc);
	if (role != Role::SinkEnd && Suspended(sc)) {
		UnpinSettings(level);
		return;
	}
	if (role != Role::Replica && SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA &&
	    ReplicaTriggerFires(rel, ev)) {
		UnpinSettings(level);
		return;
	}
	if (!CountsHere(rel, sc, role == Role::Replica)) {
		UnpinSettings(level);
		return;
	}
	if (role == Role::Replica && !TRIGGER_FIRED_BY_TRUNCATE(ev))
		CountReplicaRow(td, sc);
	else if (TRIGGER_FIRED_BY_TRUNCATE(ev)) {
		if (TRIGGER_FIRED_BEFORE(ev))
			CountRelationRows(rel, sc->source, -1); /* a partition: take its rows away before they vanish */
		else
			ZeroCounters(sc); /* the whole source is empty */
	} else if (role == Role::SinkEnd)
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

} // namespace

/*
 * counters_target_key: a row of an existing table that keeps counter-cache columns takes another key (an UPDATE of a
 * key column, such as ON UPDATE CASCADE from the row it counts for). Its counter columns count for its key: they are
 * set to the new key's values, recounted from the definition as the counter's owner (usually zeros: the cascade that
 * follows moves the source's rows, whose deltas then add to them). Else the row would carry the old key's values to
 * the new key, and the cascade add them again.
 */
static HeapTuple
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
		Counter *e = (Counter *)lfirst(lc);
		if (e->owns_target || e->target != relid)
			continue;
		Authorization auth = AuthorizedByCatalog(e);
		CounterDef *def = AnalyzeView(e->name, e->query, auth);
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
		EnterOwner(&scope, auth, PIN_ROW_SECURITY);
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

HeapTuple
Fire(TriggerData *td)
{
	TriggerEvent ev = td->tg_event;
	Role role = RoleOf(td->tg_trigger->tgname);
	if (role == Role::Replica || role == Role::ParentReplica) {
		/*
		 * Under the replica role only, where the statement triggers do not fire (ENABLE TRIGGER ALL may have enabled
		 * it for every role: then it leaves the counting to them).
		 */
		if (SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA &&
		    (TRIGGER_FIRED_FOR_ROW(ev) ? TRIGGER_FIRED_AFTER(ev) : TRIGGER_FIRED_BY_TRUNCATE(ev)))
			Capture(td, role);
		return nullptr;
	}
	if (TRIGGER_FIRED_FOR_ROW(ev)) {
		if (role == Role::Sink && TRIGGER_FIRED_BEFORE(ev) && TRIGGER_FIRED_BY_INSERT(ev)) {
			SinkRow(td);
			return nullptr; /* (the row is not stored) */
		}
		if (role == Role::TargetKey && TRIGGER_FIRED_BEFORE(ev) && TRIGGER_FIRED_BY_UPDATE(ev))
			return TargetKeyRow(td);
		if (role == Role::ParentRow && TRIGGER_FIRED_AFTER(ev) && !TRIGGER_FIRED_BY_INSERT(ev)) {
			ParentRow(td);
			return nullptr;
		}
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("counters.capture() must be fired FOR EACH STATEMENT"),
		                errhint("Re-create the triggers with counters.attach().")));
	}
	Capture(td, role);
	return nullptr;
}

void
InitCapture()
{
	InitFrames();
	InitDecisions();
	RegisterXactCallback(SinkXactCallback, nullptr);
	RegisterSubXactCallback(SinkSubXactCallback, nullptr);
}

} // namespace counters
