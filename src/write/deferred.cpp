/*
 * deferred.cpp: deferred counters -- a transaction's deltas summed until it commits, then applied once.
 *
 * A counter is deferred in a transaction when counters.apply says so (SET [LOCAL] counters.apply = deferred: every
 * counter it writes; immediate: none; default: each counter's own setting, counters.set_deferred). A statement's
 * deltas of a deferred counter are then not applied at its end (SettleCounters) but added to the transaction's delta
 * table of the counter (one per counter and subtransaction level, in memory), and applied with the others' at commit
 * (before PREPARE TRANSACTION), every counter in name order and each counter's keys in sorted order, as one statement
 * applies them -- so the counter rows are locked only at the end, in one global order, and written once per key. A
 * bound fails the commit (23514), thresholds are announced from the values applied, as at any apply.
 *
 * Deltas are applied earlier, where waiting for the commit would be wrong or impossible:
 *   - counters.apply_deferred(), and SET counters.apply = immediate (as SET CONSTRAINTS ... IMMEDIATE checks now);
 *   - a counter switched to immediate mid-transaction, at the end of the next statement that writes it;
 *   - a counter whose held deltas outgrow counters.statement_memory (in sorted batches, as big statements are);
 *   - any utility statement but a few that change no table (ApplyBeforeUtility): DDL may change what a counter reads,
 *     TRUNCATE empties counters, ALTER TABLE may recount them;
 *   - the control plane's functions that read or rewrite a counter as a whole (verify, rebuild, alter, drop);
 *   - a statement that updates the counter-cache table of a deferred counter (ApplyBeforeTargetWrite): a row that
 *     takes another key is recounted for it from the source, which the held deltas would count again.
 *
 * Subtransactions: each level's deltas are held apart. A level that commits passes them to its parent; one that
 * rolls back drops them. Deltas applied inside a subtransaction that then rolls back (its writes gone) are held again.
 * Everything lives in TopTransactionContext and is forgotten when the transaction ends.
 */
#include "write/write.hpp"

extern "C" {
#include "access/xact.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "nodes/parsenodes.h"
#include "parser/parsetree.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace counters {

int apply_setting = APPLY_DEFAULT;

namespace {

/* The deltas of one counter held at one subtransaction level. */
struct Held {
	Held *next;
	const char *name; /* the counter */
	Oid source;       /* whose compiled counters hold it (GetSourceCounters) */
	Oid target;       /* a counter-cache counter's table (else InvalidOid) */
	int level;        /* the nest level whose statements added them */
	int applied_at;   /* 0: held; else the nest level whose writes applied them (a rollback of it holds them again) */
	MemoryContext cxt;
	CounterRun run; /* the deltas (run.delta_cxt == cxt); run.c is valid only while a statement adds to them */
};

Held *held = nullptr;
/* At commit: statements the apply runs (counters over counters) apply their deltas at once. */
bool committing = false;

bool
HeldFor(const Held *h, const CompiledCounter *c)
{
	return h->source == c->counter->source && strcmp(h->name, c->def->name) == 0;
}

/* Whether counter `c` has deltas held, not applied. */
bool
HasHeld(const CompiledCounter *c)
{
	for (Held *h = held; h != nullptr; h = h->next)
		if (h->applied_at == 0 && HeldFor(h, c))
			return true;
	return false;
}

/* The held deltas of `c` at the current level, created when first needed. */
Held *
HeldHere(CompiledCounter *c)
{
	int level = GetCurrentTransactionNestLevel();
	for (Held *h = held; h != nullptr; h = h->next)
		if (h->applied_at == 0 && h->level == level && HeldFor(h, c))
			return h;
	MemoryContext cxt =
	    AllocSetContextCreate(TopTransactionContext, "counters deferred deltas", ALLOCSET_DEFAULT_SIZES);
	Held *h = (Held *)MemoryContextAllocZero(cxt, sizeof(Held));
	h->name = MemoryContextStrdup(cxt, c->def->name);
	h->source = c->counter->source;
	h->target = c->counter->owns_target ? InvalidOid : c->counter->target;
	h->level = level;
	h->cxt = cxt;
	h->run.delta_cxt = cxt;
	h->run.c = c;
	DeltaStart(&h->run);
	h->next = held;
	held = h;
	return h;
}

/* The compiled counter of held deltas, now; NULL when the counter is gone (dropped in this transaction). */
CompiledCounter *
CompiledOfHeld(const Held *h)
{
	SourceCounters *sc = GetSourceCounters(h->source);
	for (int i = 0; i < sc->ncounters; i++)
		if (strcmp(sc->counters[i].def->name, h->name) == 0)
			return &sc->counters[i];
	return nullptr;
}

using Selector = bool (*)(const Held *h, const void *arg);

/*
 * Apply the held deltas that `select` picks: every counter's held levels summed into one delta table (of a run of its
 * source when it keeps extremes or distinct counts: StartRun has what re-reading the source evaluates), in a context of
 * this call, so that the held ones stay as they were should this subtransaction roll back; the counters in name order.
 * Then they count as applied at this level. Returns the keys written.
 */
int64
ApplyHeld(Selector select, const void *arg)
{
	if (held == nullptr)
		return 0;
	int level = GetCurrentTransactionNestLevel();
	MemoryContext cxt =
	    AllocSetContextCreate(CurrentMemoryContext, "counters applying deferred deltas", ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	int n = 0, max = 8;
	CounterRun **list = (CounterRun **)palloc(sizeof(CounterRun *) * max);
	List *runs = NIL;
	List *taken = NIL;
	for (Held *h = held; h != nullptr; h = h->next) {
		if (h->applied_at != 0 || !select(h, arg))
			continue;
		taken = lappend(taken, h);
		CompiledCounter *c = CompiledOfHeld(h);
		if (c == nullptr)
			continue;
		CounterRun *sum = nullptr;
		for (int i = 0; i < n && sum == nullptr; i++)
			if (list[i]->c == c)
				sum = list[i];
		if (sum == nullptr && c->extremes == nullptr) {
			/* (sums only: a delta table of its own is all the apply needs) */
			sum = (CounterRun *)palloc0(sizeof(CounterRun));
			sum->c = c;
			sum->delta_cxt = cxt;
			DeltaStart(sum);
		} else if (sum == nullptr) {
			/* (extremes and distinct counts re-read the source with the definition: a run of the source has it) */
			Run *run = nullptr;
			ListCell *rc;
			foreach (rc, runs)
				if (((Run *)lfirst(rc))->source == h->source)
					run = (Run *)lfirst(rc);
			if (run == nullptr) {
				run = StartRun(GetSourceCounters(h->source), cxt);
				runs = lappend(runs, run);
			}
			for (int i = 0; i < run->ncounters && sum == nullptr; i++)
				if (run->runs[i].c == c)
					sum = &run->runs[i];
			if (sum == nullptr)
				continue;
		}
		bool listed = false;
		for (int i = 0; i < n && !listed; i++)
			listed = list[i] == sum;
		if (!listed) {
			if (n == max) {
				max *= 2;
				list = (CounterRun **)repalloc(list, sizeof(CounterRun *) * max);
			}
			list[n++] = sum;
		}
		h->run.c = c;
		OwnerScope owner;
		EnterOwner(&owner, c->auth, 0);
		DeltaMerge(sum, &h->run);
		LeaveOwner(&owner);
	}
	/*
	 * (taken now: what the apply runs -- an update of a counter-cache table, a counter over this one -- must not apply
	 * them again; an error rolls back the level that took them, which holds them again)
	 */
	ListCell *lc;
	foreach (lc, taken)
		((Held *)lfirst(lc))->applied_at = level;
	int64 keys = 0;
	if (n > 0) {
		if (n > 1)
			qsort(list, n, sizeof(CounterRun *), CompareCounterNames);
		/* (at commit no snapshot is active: the apply's statements take the transaction's) */
		bool snapshot = !ActiveSnapshotSet();
		if (snapshot)
			PushActiveSnapshot(GetTransactionSnapshot());
		ApplyCounters(list, n);
		if (snapshot)
			PopActiveSnapshot();
		else {
			/*
			 * Applied in the middle of a statement (apply_deferred(), verify(), an UPDATE of a counter-cache table):
			 * the rest of it sees the rows written, as the next statement would (what UpdateActiveSnapshotCommandId
			 * does between the statements of a function).
			 */
			CommandCounterIncrement();
			GetActiveSnapshot()->curcid = GetCurrentCommandId(false);
		}
		for (int i = 0; i < n; i++) {
			keys += list[i]->keys_written;
			if (StatsKept())
				ReportCounterStats(list[i]->c->counter->query, 0, list[i]->keys_written,
				                   INSTR_TIME_GET_MILLISEC(list[i]->apply_time), HasPending(list[i]->c->counter->mode));
		}
	}
	foreach (lc, runs)
		FreeExprContext(((Run *)lfirst(lc))->econtext, true);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return keys;
}

bool
SelectAll(const Held *, const void *)
{
	return true;
}

/* Held deltas of a counter that is no longer deferred (counters.apply changed). */
bool
SelectImmediate(const Held *h, const void *)
{
	CompiledCounter *c = CompiledOfHeld(h);
	return c == nullptr || !Deferred(c);
}

bool
SelectCounter(const Held *h, const void *arg)
{
	return HeldFor(h, (const CompiledCounter *)arg);
}

bool
SelectTarget(const Held *h, const void *arg)
{
	return h->target == *(const Oid *)arg;
}

void
DeferredXactCallback(XactEvent event, void *)
{
	switch (event) {
	case XACT_EVENT_PRE_COMMIT:
	case XACT_EVENT_PRE_PREPARE:
		/*
		 * The transaction's deltas, applied before it commits. What the apply writes may queue deferred triggers of
		 * the counters' tables (their owner's constraint triggers), which fired before this callback: fire them, and
		 * apply what they write, until nothing is left.
		 */
		committing = true;
		while (held != nullptr) {
			bool any = false;
			for (Held *h = held; h != nullptr && !any; h = h->next)
				any = h->applied_at == 0;
			if (!any)
				break;
			(void)ApplyHeld(SelectAll, nullptr);
			AfterTriggerFireDeferred();
		}
		committing = false;
		break;
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PREPARE:
	case XACT_EVENT_PARALLEL_COMMIT:
	case XACT_EVENT_PARALLEL_ABORT:
		/* (their memory is TopTransactionContext's, gone with it) */
		held = nullptr;
		committing = false;
		break;
	default:
		break;
	}
}

void
DeferredSubXactCallback(SubXactEvent event, SubTransactionId, SubTransactionId, void *)
{
	if (held == nullptr || (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB))
		return;
	int level = GetCurrentTransactionNestLevel();
	Held **link = &held;
	while (*link != nullptr) {
		Held *h = *link;
		if (event == SUBXACT_EVENT_COMMIT_SUB) {
			if (h->level == level)
				h->level = level - 1;
			if (h->applied_at == level)
				h->applied_at = level - 1;
		} else if (h->level >= level) {
			/* added by the subtransaction rolled back: gone */
			*link = h->next;
			MemoryContextDelete(h->cxt);
			continue;
		} else if (h->applied_at >= level)
			h->applied_at = 0; /* applied by it: its writes are gone, the deltas are held again */
		link = &h->next;
	}
}

} // namespace

bool
Deferred(const CompiledCounter *c)
{
	if (committing || !c->deferrable)
		return false;
	if (apply_setting != APPLY_DEFAULT)
		return apply_setting == APPLY_DEFERRED;
	return c->counter->options->deferred;
}

void
SettleCounters(CounterRun **list, int n)
{
	bool any = held != nullptr;
	for (int i = 0; i < n && !any; i++)
		any = Deferred(list[i]->c);
	if (!any) {
		ApplyCounters(list, n);
		return;
	}
	/* Deferred counters' deltas are held; so are an immediate counter's with deltas held, applied next with them. */
	CounterRun **now = (CounterRun **)palloc(sizeof(CounterRun *) * Max(n, 1));
	int nnow = 0;
	bool switched = false;
	for (int i = 0; i < n; i++) {
		CounterRun *r = list[i];
		bool deferred = Deferred(r->c);
		if (!deferred && !HasHeld(r->c)) {
			now[nnow++] = r;
			continue;
		}
		if (DeltaCount(r) == 0)
			continue;
		Held *h = HeldHere(r->c);
		h->run.c = r->c;
		OwnerScope owner;
		EnterOwner(&owner, r->c->auth, 0);
		DeltaMerge(&h->run, r);
		LeaveOwner(&owner);
		/* (bounded memory: a transaction holding more than a statement may applies them, in sorted batches) */
		if (deferred && MemoryContextMemAllocated(h->cxt, true) > (Size)statement_memory_kb * 1024)
			(void)ApplyHeld(SelectCounter, r->c);
		switched |= !deferred;
	}
	ApplyCounters(now, nnow);
	pfree(now);
	if (switched || apply_setting == APPLY_IMMEDIATE)
		(void)ApplyHeld(SelectImmediate, nullptr);
}

int64
ApplyDeferred()
{
	return ApplyHeld(SelectAll, nullptr);
}

void
ApplySwitched()
{
	(void)ApplyHeld(SelectImmediate, nullptr);
}

void
ApplyBeforeTargetWrite(QueryDesc *query)
{
	if (held == nullptr)
		return;
	PlannedStmt *stmt = query->plannedstmt;
	if (stmt->commandType != CMD_UPDATE && stmt->commandType != CMD_MERGE && stmt->commandType != CMD_INSERT)
		return;
	ListCell *lc;
	foreach (lc, stmt->resultRelations) {
		RangeTblEntry *rte = rt_fetch(lfirst_int(lc), stmt->rtable);
		Oid relid = rte->relid;
		bool any = false;
		for (Held *h = held; h != nullptr && !any; h = h->next)
			any = h->applied_at == 0 && h->target == relid;
		if (!any)
			continue;
		(void)ApplyHeld(SelectTarget, &relid);
		/* (the statement's snapshot was taken before: it sees the rows just written, as a later statement would) */
		if (query->snapshot != nullptr)
			query->snapshot->curcid = GetCurrentCommandId(false);
	}
}

void
ApplyBeforeUtility(Node *stmt)
{
	if (held == nullptr)
		return;
	switch (nodeTag(stmt)) {
	/* (statements that change no table, or whose writes count as any statement's do) */
	case T_TransactionStmt:
	case T_VariableSetStmt:
	case T_VariableShowStmt:
	case T_NotifyStmt:
	case T_ListenStmt:
	case T_UnlistenStmt:
	case T_PrepareStmt:
	case T_ExecuteStmt:
	case T_DeallocateStmt:
	case T_DeclareCursorStmt:
	case T_FetchStmt:
	case T_ClosePortalStmt:
	case T_CopyStmt:
	case T_ExplainStmt:
	case T_CallStmt:
	case T_DoStmt:
	case T_LockStmt:
	case T_ConstraintsSetStmt:
	case T_CheckPointStmt:
	case T_DiscardStmt:
	case T_LoadStmt:
		return;
	default:
		(void)ApplyHeld(SelectAll, nullptr);
	}
}

void
InitDeferred()
{
	RegisterXactCallback(DeferredXactCallback, nullptr);
	RegisterSubXactCallback(DeferredSubXactCallback, nullptr);
}

} // namespace counters
