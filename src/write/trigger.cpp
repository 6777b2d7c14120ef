/*
 * trigger.cpp: counters.capture(), the trigger function of every trigger counters creates: which role a trigger has,
 * from its name, and what each role does -- a source's statement triggers, a sink's row and statement triggers
 * (sink.cpp), a parent's triggers (counters through a parent row: parent.cpp), the guard of a counter's own tables and
 * the counter-cache key trigger (target_key.cpp) -- each counting through the statement's run (capture.cpp).
 */
#include "write/write.hpp"
#include "citus/citus.hpp"

extern "C" {
#include "access/tableam.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "storage/lmgr.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace counters {

void
CountRelationRows(Relation rel, Oid source, int sign)
{
	SourceCounters *sc = GetSourceCounters(source);
	if (sc->ncounters == 0)
		return;
	Run *run = StartRun(sc, CurrentMemoryContext);
	/* (from here on, a read of the source again sees rel's rows as counted: away, or in; see Membership) */
	Membership *m = const_cast<Membership *>(CurrentMembership());
	if (m != nullptr) {
		MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
		if (sign < 0)
			m->away = lappend_oid(m->away, RelationGetRelid(rel));
		else
			m->in = lappend_oid(m->in, RelationGetRelid(rel));
		MemoryContextSwitchTo(old);
	}
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
		if (HasPending(c->counter->mode))
			LockRelationOid(c->write_rel, ShareUpdateExclusiveLock);
		Snapshot latest = RegisterSnapshot(GetLatestSnapshot());
		/*
		 * (its own AFTER triggers fire at its end, as the apply's do: a counter over this counter's table follows. Left
		 * to the TRUNCATE's end, they would open the counter table in TRUNCATE's executor state, which never closes it)
		 */
		int ret = SPI_execute_snapshot(c->plans[PLAN_TRUNCATE], nullptr, nullptr, latest,
		                               IsolationUsesXactSnapshot() ? GetTransactionSnapshot() : InvalidSnapshot, false,
		                               true, 0);
		UnregisterSnapshot(latest);
		if (ret != SPI_OK_DELETE && ret != SPI_OK_UPDATE)
			elog(ERROR, "counters: emptying counter \"%s\" failed: %s", c->def->name, SPI_result_code_string(ret));
		LeaveOwner(&owner);
	}
	SPI_finish();
}

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
	/*
	 * Citus: a shard's TRUNCATE trigger does nothing (the shell's, on the coordinator, empties the counter tables as a
	 * whole) -- decided from Citus's metadata alone, before the catalog is read: Citus sends a shard's TRUNCATE while
	 * another connection of the same transaction holds the table's shell locked, and a read of counters.counter_replica
	 * there was seen waiting on that transaction (docs/citus.md). Nor does one left behind on a shell once the table's
	 * counters are dropped (Citus does not propagate dropping it); a shard without counters was distributed behind the
	 * counters' back.
	 */
	bool truncate_citus = TRIGGER_FIRED_BY_TRUNCATE(ev) && citus::Present();
	if (truncate_citus && OidIsValid(citus::TableOfShard(RelationGetRelid(rel)))) {
		UnpinSettings(level);
		return;
	}
	SourceCounters *sc = GetSourceCounters(RelationGetRelid(rel));
	if (truncate_citus && sc->ncounters == 0 && citus::IsCitusRelation(RelationGetRelid(rel))) {
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
	/* (last: called first, so that the commit's apply comes before the other callbacks' checks) */
	InitDeferred();
}

} // namespace counters
