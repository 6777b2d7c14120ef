/*
 * replica.cpp: logical replication on a subscriber (docs/replication.md). Its apply worker runs as the replica role,
 * where the capture triggers (statement triggers, enabled for the origin role) do not fire, and it fires row triggers
 * only. A counted table has two more triggers, counters_replica (AFTER INSERT OR UPDATE OR DELETE, for each row) and
 * counters_replica_truncate, enabled for the replica role: they count the applied changes, row by row. A counter whose
 * own tables a subscription brings follows its publisher instead, and this node counts nothing for it.
 */
#include "write/write.hpp"

extern "C" {
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"
}

namespace counters {

/*
 * A counter follows its publisher when a subscription brings its tables (CompiledCounter.followed): this node counts
 * nothing for it (CountRow and ZeroCounters pass it by), and a write on this node, which would count here and then
 * conflict with the rows replication brings, is refused. The other counters count the changes the apply worker
 * applies, through the replica triggers. Whether `sc`'s counters count this write (replica: fired by a replica
 * trigger): false when all of them follow their publisher.
 */
bool
CountsHere(Relation rel, SourceCounters *sc, bool replica)
{
	if (sc->nfollowed == 0 && !replica)
		return true;
	for (int i = 0; i < sc->ncounters; i++) {
		const CompiledCounter *c = &sc->counters[i];
		if (c->followed != nullptr && !replica)
			ereport(ERROR,
			        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			         errmsg("counter \"%s\" is replicated from a publisher: table %s is subscribed (subscription "
			                "\"%s\")",
			                c->def->name, QualifiedName(c->followed_table), c->followed),
			         errdetail("A write to %s on this node would be counted here, and conflict with the counts "
			                   "replication brings.",
			                   QualifiedName(RelationGetRelid(rel))),
			         errhint("Write on the publisher. After the cut-over, drop the subscription (or take the counter's "
			                 "tables out of its publication), and this node counts its own writes: see "
			                 "docs/replication.md.")));
		if (c->followed == nullptr && OidIsValid(c->def->parent))
			ereport(
			    ERROR,
			    (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			     errmsg("counter \"%s\" counts through a parent row and cannot count changes made under the "
			            "replica role",
			            c->def->name),
			     errdetail("Logical replication's apply worker and sessions with session_replication_role = replica "
			               "fire row triggers only, which cannot move a parent's rows with their children."),
			     errhint("Publish the counter's tables with its source, so that the publisher's counts arrive (see "
			             "docs/replication.md), or write %s with the origin role.",
			             QualifiedName(RelationGetRelid(rel)))));
	}
	return sc->nfollowed < sc->ncounters;
}

/*
 * Whether `rel`'s replica trigger for event `ev` fires under the replica role: then a statement trigger enabled for it
 * too (ENABLE ALWAYS) leaves the counting to the replica trigger, which counts each row once.
 */
bool
ReplicaTriggerFires(Relation rel, TriggerEvent ev)
{
	const char *name = CaptureTriggerName(TRIGGER_FIRED_BY_TRUNCATE(ev) ? REPLICA_TRUNCATE_TRIGGER : REPLICA_TRIGGER);
	TriggerDesc *trigdesc = rel->trigdesc;
	for (int i = 0; trigdesc != nullptr && i < trigdesc->numtriggers; i++)
		if (strcmp(trigdesc->triggers[i].tgname, name) == 0)
			return trigdesc->triggers[i].tgenabled == TRIGGER_FIRES_ON_REPLICA ||
			       trigdesc->triggers[i].tgenabled == TRIGGER_FIRES_ALWAYS;
	return false;
}

/* A row a replica trigger fired for: counted as a statement of one row (the apply worker opens no statement frame). */
void
CountReplicaRow(TriggerData *td, SourceCounters *sc)
{
	TriggerEvent ev = td->tg_event;
	Tuplestorestate *old_rows = nullptr;
	Tuplestorestate *new_rows = nullptr;
	if (!TRIGGER_FIRED_BY_INSERT(ev)) {
		old_rows = tuplestore_begin_heap(false, false, work_mem);
		tuplestore_puttuple(old_rows, td->tg_trigtuple);
	}
	if (!TRIGGER_FIRED_BY_DELETE(ev)) {
		new_rows = tuplestore_begin_heap(false, false, work_mem);
		tuplestore_puttuple(new_rows, TRIGGER_FIRED_BY_UPDATE(ev) ? td->tg_newtuple : td->tg_trigtuple);
	}
	CountTransitionTables(td->tg_relation, sc, old_rows, new_rows);
	if (old_rows != nullptr)
		tuplestore_end(old_rows);
	if (new_rows != nullptr)
		tuplestore_end(new_rows);
}

} // namespace counters
