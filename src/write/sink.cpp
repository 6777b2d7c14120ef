/*
 * sink.cpp: the rows of a sink, a table whose rows are counted, never stored -- checked and kept by the sink trigger,
 * per sink and subtransaction, until counters_sink_end counts them with the statement's other deltas -- and what a
 * sink cannot keep.
 */
#include "write/write.hpp"

extern "C" {
#include "access/xact.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"
}

namespace counters {

/*
 * What a sink cannot keep: checks that need stored rows (a foreign key, row-level security's WITH CHECK), columns
 * computed after BEFORE triggers.
 */
void
RequireSinkShape(Relation rel)
{
	/* (the table's name only for an error: this runs once per statement) */
	if (rel->rd_rel->relrowsecurity) {
		const char *name = QualifiedName(RelationGetRelid(rel));
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		         errmsg("table %s cannot be a sink: it has row-level security enabled", name),
		         errdetail("Policies check the rows a statement stores; the rows of a sink are never stored, so a "
		                   "writer could count rows the policies refuse."),
		         errhint("Disable row-level security on it (ALTER TABLE %s DISABLE ROW LEVEL SECURITY).", name)));
	}
	if (RelationGetFKeyList(rel) != NIL)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("table %s cannot be a sink: it has a foreign key", QualifiedName(RelationGetRelid(rel))),
		                errdetail("A foreign key is checked on stored rows; the rows of a sink are never stored, so "
		                          "it would not be checked."),
		                errhint("Drop the constraint (Django: ForeignKey(..., db_constraint=False)).")));
	TupleDesc desc = RelationGetDescr(rel);
	for (int i = 0; i < desc->natts; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, i);
		if (!att->attisdropped && att->attgenerated != '\0')
			ereport(ERROR,
			        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			         errmsg("table %s cannot be a sink: column \"%s\" is a generated column",
			                QualifiedName(RelationGetRelid(rel)), NameStr(att->attname)),
			         errdetail("Generated columns are computed after the BEFORE triggers, where a sink counts rows."),
			         errhint("Count the expression in the counter's definition instead.")));
	}
}

namespace {

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
	(void)TransactionContext(&sink_cxt, "counters sink rows", ForgetSinkRows);
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

} // namespace

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

/*
 * The sink trigger: the row is checked as an insert would check it (NOT NULL, CHECK constraints) and waits for
 * counters_sink_end; the caller returns NULL, so it is not stored.
 */
void
SinkRow(TriggerData *td)
{
	Relation rel = td->tg_relation;
	if (SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA) {
		/*
		 * The replica role (the apply worker, a loader with session_replication_role = replica): counters_sink_end
		 * does not fire for it (the apply worker fires no statement trigger), so the row is counted at once, as a
		 * statement of one row, as the replica trigger counts a table's rows. (Enabled ALWAYS, this trigger fires.)
		 */
		RequireSinkShape(rel);
		if (RelationGetDescr(rel)->constr != nullptr) {
			EState *estate = CreateExecutorState();
			ResultRelInfo *rri = makeNode(ResultRelInfo);
			InitResultRelInfo(rri, rel, 0, nullptr, 0);
			ExecConstraints(rri, td->tg_trigslot, estate);
			FreeExecutorState(estate);
		}
		int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT);
		SourceCounters *sc = GetSourceCounters(RelationGetRelid(rel));
		if (sc->ncounters == 0) {
			(void)Adopt(RelationGetRelid(rel));
			sc = GetSourceCounters(RelationGetRelid(rel));
		}
		RequireCounters(rel, sc);
		if (CountsHere(rel, sc, true))
			CountReplicaRow(td, sc);
		UnpinSettings(level);
		return;
	}
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
	Run *run = StatementRun(sc);
	RowReader rd;
	rd.slot = MakeSingleTupleTableSlot(w->desc, &TTSOpsMinimalTuple);
	rd.root_slot = rd.slot;
	rd.map = nullptr;
	CountTuplestores(run, &rd, nullptr, w->rows);
	DropReader(&rd);
	EndSinkRows(w);
	EndStatementRun(run);
}

} // namespace counters
