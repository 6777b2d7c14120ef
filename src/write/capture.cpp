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
 * Before a trigger role counts: a relation that carries the capture triggers must feed a counter (RequireCounters), and
 * counters.suspend leaves a data load uncounted (Suspended).
 *
 * Everything here calls PostgreSQL functions that may raise errors, so no object with a destructor lives on these
 * stacks; all memory is palloc'd in a per-statement context that is freed with the statement (or the aborted
 * transaction).
 */
#include "write/write.hpp"
#include "citus/citus.hpp"
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
#include "tcop/utility.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/datum.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace counters {

int statement_memory_kb = 65536;
bool counting_suspended = false;

/* NaN and infinities cannot be subtracted back out of a sum (Infinity - Infinity is NaN): refuse them. */
static void
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
static void
CountRowFor(Run *run, CounterRun *r, int sign)
{
	RequireOwnerScope(r->c->auth.role());
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
		/* (what the row contributes, as the aggregate kinds' table says: model.hpp) */
		if (vd->aggregate->takes_arg) {
			d = ExecEvalExprSwitchContext(r->arg_exprs[v], econtext, &isnull);
			if (isnull)
				continue;
		}
		if (vd->aggregate->contributes == Contribution::Extreme || vd->aggregate->contributes == Contribution::Distinct)
			run->row_numerics[v] = d;
		else if (vd->aggregate->contributes == Contribution::Argument) {
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
		if (def->values[v].kind == ValueKind::Distinct)
			DeltaAddPair(r, e, v, sign, run->row_numerics[v]);
		else if (def->values[v].accum == AccumKind::Int64)
			e->Ints(def->nvalues)[v] += sign < 0 ? -(int128)run->row_ints[v] : (int128)run->row_ints[v];
		else if (def->values[v].accum == AccumKind::Extreme)
			DeltaAddExtreme(r, e, v, sign, run->row_numerics[v]);
		else
			DeltaAddNumeric(r, e, v, sign, run->row_numerics[v]);
	}
}

void
CountRowWithParent(Run *run, CounterRun *r, TupleTableSlot *slot, HeapTuple parent, int sign)
{
	run->econtext->ecxt_scantuple = slot;
	r->fixed_parent = parent;
	run->counting = (int)(r - run->runs);
	CountRowFor(run, r, sign);
	run->counting = -1;
	r->fixed_parent = nullptr;
	ResetExprContext(run->econtext);
}

/*
 * Evaluate every counter on one row (in econtext's scan slot). A definition's expressions are its owner's code: they
 * run as the owner of the counter's table, in a security-restricted operation, whoever wrote the row.
 */
static void
CountRow(Run *run, int sign)
{
	for (int ci = 0; ci < run->ncounters; ci++) {
		CounterRun *r = &run->runs[ci];
		if (unlikely(r->c->followed != nullptr))
			continue; /* (its publisher's counts arrive by logical replication: see CountsHere) */
		run->counting = ci;
		OwnerScope owner;
		EnterOwner(&owner, r->c->auth, 0);
		CountRowFor(run, r, sign);
		LeaveOwner(&owner);
	}
	run->counting = -1;
	ResetExprContext(run->econtext);
}

/* An error evaluating a definition on a row (a division by zero, an overflow) names the counter. */
static void
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

static ExprState *
InitExpr(Expr *expr)
{
	return expr ? ExecInitExpr(expr, nullptr) : nullptr;
}

static void
ResetDeltas(Run *run)
{
	MemoryContextReset(run->delta_cxt);
	for (int i = 0; i < run->ncounters; i++)
		DeltaStart(&run->runs[i]);
}

static void ApplyDeltas(Run *run);
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
		EnterOwner(&owner, c->auth, 0);
		r->quals = c->quals != NIL ? ExecInitQual(c->quals, nullptr) : nullptr;
		r->key_exprs = (ExprState **)palloc(sizeof(ExprState *) * def->nkeys);
		for (int k = 0; k < def->nkeys; k++)
			r->key_exprs[k] = InitExpr(c->key_exprs[k]);
		r->arg_exprs = (ExprState **)palloc0(sizeof(ExprState *) * def->nvalues);
		r->filter_exprs = (ExprState **)palloc0(sizeof(ExprState *) * def->nvalues);
		for (int v = 0; v < def->nvalues; v++) {
			r->arg_exprs[v] = InitExpr(c->arg_exprs[v]);
			r->filter_exprs[v] = c->filters[v] != NIL ? ExecInitQual(c->filters[v], nullptr) : nullptr;
		}
		LeaveOwner(&owner);
		if (OidIsValid(def->parent)) {
			Relation parent = table_open(def->parent, AccessShareLock);
			r->parent_slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(RelationGetDescr(parent)), &TTSOpsHeapTuple);
			table_close(parent, AccessShareLock);
			Relation source = table_open(def->source, AccessShareLock);
			r->child_slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(RelationGetDescr(source)), &TTSOpsHeapTuple);
			table_close(source, AccessShareLock);
			run->has_join = true;
		}
		if (c->extremes != nullptr)
			r->undo = (ExtremeUndo *)palloc0(sizeof(ExtremeUndo) * def->nvalues);
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
	INSTR_TIME_SET_CURRENT(run->pass_start);
	return run;
}

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

void
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

static void
ApplyDeltas(Run *run)
{
	CounterRun **list = (CounterRun **)palloc(sizeof(CounterRun *) * run->ncounters);
	for (int i = 0; i < run->ncounters; i++)
		list[i] = &run->runs[i];
	SettleCounters(list, run->ncounters);
	pfree(list);
}

/* The end of a pass over a statement's rows: its time counts for the source's counters. */
static void
EndPass(Run *run)
{
	if (!StatsKept())
		return;
	instr_time now;
	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_ACCUM_DIFF(run->pass_time, now, run->pass_start);
}

/*
 * A statement's run applied in full: each counter's statistics (stats.cpp) take a call, the rows evaluated, the keys
 * written, and the time of writing them plus an even share of the row passes, which evaluate every counter of the
 * source on each row.
 */
static void
ReportRun(const Run *run)
{
	if (!StatsKept() || run->ncounters == 0)
		return;
	double pass_ms = INSTR_TIME_GET_MILLISEC(run->pass_time) / run->ncounters;
	for (int i = 0; i < run->ncounters; i++) {
		const CounterRun *r = &run->runs[i];
		ReportCounterStats(r->c->counter->query, (int64)run->rows, r->keys_written,
		                   pass_ms + INSTR_TIME_GET_MILLISEC(r->apply_time), HasPending(r->c->counter->mode));
	}
}

void
FinishRun(Run *run)
{
	EndPass(run);
	ApplyDeltas(run);
	ReportRun(run);
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

static Frame *current_frame = nullptr;
static ExecutorStart_hook_type prev_executor_start = nullptr;
static ExecutorFinish_hook_type prev_executor_finish = nullptr;
static ProcessUtility_hook_type prev_process_utility = nullptr;

static void
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
static Run *
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
static void
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
	SettleCounters(list, n);
	MemoryContextSwitchTo(old);
	foreach (lc, frame->runs)
		ReportRun((Run *)lfirst(lc));
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

/* A statement that writes a counter-cache table: the deferred deltas of its counters go first (deferred.cpp). */
static void
CountersExecutorStart(QueryDesc *query, int eflags)
{
	if ((eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0)
		ApplyBeforeTargetWrite(query);
	if (prev_executor_start)
		prev_executor_start(query, eflags);
	else
		standard_ExecutorStart(query, eflags);
}

static void
CountersExecutorFinish(QueryDesc *query)
{
	WITH_FRAME(query->estate->es_output_cid, if (prev_executor_finish) prev_executor_finish(query);
	           else standard_ExecutorFinish(query));
}

/* The running command's notes of relations counted away or in (BeginMembership), or NULL. */
static Membership *membership = nullptr;

Membership *
BeginMembership()
{
	Membership *enclosing = membership;
	membership = (Membership *)MemoryContextAllocZero(TopTransactionContext, sizeof(Membership));
	return enclosing;
}

void
EndMembership(Membership *enclosing)
{
	membership = enclosing;
}

const Membership *
CurrentMembership()
{
	return membership;
}

/*
 * TRUNCATE: the BEFORE TRUNCATE triggers of the partitions it empties subtract their rows while every one of them still
 * has its rows (BeginMembership).
 */
static void
Truncate(PlannedStmt *pstmt, const char *query_string, bool read_only_tree, ProcessUtilityContext context,
         ParamListInfo params, QueryEnvironment *env, DestReceiver *dest, QueryCompletion *qc)
{
	Membership *enclosing = BeginMembership();
	PG_TRY();
	{
		if (prev_process_utility)
			prev_process_utility(pstmt, query_string, read_only_tree, context, params, env, dest, qc);
		else
			standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, env, dest, qc);
	}
	PG_FINALLY();
	{
		EndMembership(enclosing);
	}
	PG_END_TRY();
}

static void
CountersProcessUtility(PlannedStmt *pstmt, const char *query_string, bool read_only_tree, ProcessUtilityContext context,
                       ParamListInfo params, QueryEnvironment *env, DestReceiver *dest, QueryCompletion *qc)
{
	/* (deferred deltas first, where the statement may change what a counter reads or holds: deferred.cpp) */
	ApplyBeforeUtility(pstmt->utilityStmt);
	if (IsA(pstmt->utilityStmt, TruncateStmt)) {
		Truncate(pstmt, query_string, read_only_tree, context, params, env, dest, qc);
		return;
	}
	/* COPY FROM fires its AFTER triggers itself, outside the executor. */
	if (IsA(pstmt->utilityStmt, CopyStmt))
		WITH_FRAME(GetCurrentCommandId(false), if (prev_process_utility) prev_process_utility(
		                                           pstmt, query_string, read_only_tree, context, params, env, dest, qc);
		           else standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, env, dest, qc));
	else if (prev_process_utility)
		prev_process_utility(pstmt, query_string, read_only_tree, context, params, env, dest, qc);
	else
		standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, env, dest, qc);
	/* SET counters.apply = immediate applies what was deferred, as SET CONSTRAINTS ... IMMEDIATE checks now */
	if (IsA(pstmt->utilityStmt, VariableSetStmt))
		ApplySwitched();
}

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

Run *
StatementRun(SourceCounters *sc)
{
	Run *run = current_frame != nullptr ? FrameRun(current_frame, sc) : StartRun(sc, CurrentMemoryContext);
	INSTR_TIME_SET_CURRENT(run->pass_start);
	return run;
}

void
EndStatementRun(Run *run)
{
	if (current_frame == nullptr)
		FinishRun(run);
	else
		EndPass(run);
}

CommandId
StatementCommand()
{
	return current_frame != nullptr ? current_frame->cid : GetCurrentCommandId(false);
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
	Run *run = StatementRun(sc);
	RowReader rd;
	InitReader(&rd, rel, run->source, &TTSOpsMinimalTuple);
	CountTuplestores(run, &rd, old_rows, new_rows);
	DropReader(&rd);
	EndStatementRun(run);
}

void
InitFrames()
{
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = CountersExecutorStart;
	prev_executor_finish = ExecutorFinish_hook;
	ExecutorFinish_hook = CountersExecutorFinish;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = CountersProcessUtility;
}

} // namespace counters
