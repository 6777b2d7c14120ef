/*
 * maintain.cpp: verify(), rebuild(), compact() and apply_retention().
 *
 * Each works counter by counter, in name order. The statements that read a counter's definition or write its tables
 * run as the counter's owner inside a security-restricted operation, with search_path, output settings and
 * row_security pinned (security.cpp): a superuser's verify() or the background worker's compaction runs nothing of
 * the owner's with the superuser's rights. A caller acts only on counters it may: without a name, the others are
 * skipped; with a name, they are refused (42501). In a compaction round over all counters, a counter that fails is
 * reported (WARNING, counters.stats) and the round goes on with the others.
 */
#include "control/control.hpp"
#include "citus/citus.hpp"

extern "C" {
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parser.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/timeout.h"
#include "utils/guc.h"
#include "storage/latch.h"
#include "utils/tuplestore.h"
}

namespace counters {

int step_timeout_ms = 60000;

namespace {

/*
 * The bound of one counter's step in a round (counters.step_timeout): a timeout of its own that cancels the step, and
 * says so (TryInSubtransaction then rolls the step back and returns the error, where a cancel is raised).
 */
TimeoutId step_timeout = MAX_TIMEOUTS;
volatile sig_atomic_t step_timed_out = false;

void
StepTimeoutHandler()
{
	step_timed_out = true;
	InterruptPending = true;
	QueryCancelPending = true;
	SetLatch(MyLatch);
}

} // namespace

namespace {

/*
 * A recount must see every row the trigger counted. Row-level security that applies to the definition view's owner
 * (FORCE ROW LEVEL SECURITY on a source that role owns, or policies on a source it does not own) would hide some:
 * refuse, naming the counter. (row_security is off while recounting as well, so nothing is missed if this check
 * is ever wrong: the query fails.)
 */
void
RequireAllRowsVisible(const Counter *e)
{
	if (check_enable_rls(e->source, RelationOwner(e->query), true) == RLS_ENABLED)
		ereport(
		    ERROR,
		    (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		     errmsg("counter \"%s\": row-level security of table %s hides rows from the owner of its definition",
		            e->name, QualifiedName(e->source)),
		     errdetail("The trigger counts every row written; a recount that saw only the rows the policies show "
		               "would be wrong."),
		     errhint("Use ALTER TABLE %s NO FORCE ROW LEVEL SECURITY, or have a role with BYPASSRLS own the counter.",
		             QualifiedName(e->source))));
}

/*
 * Run `sql` as the counter's owner `auth` authorized (security-restricted, settings pinned); SPI is connected by the
 * caller. A statement made of the counter alone runs for whoever may start it (AuthorizedByCatalog); one with text
 * the caller typed (a rebuild condition), for a caller who may maintain the counter (AuthorizeMaintainer).
 */
int
RunAsOwner(const Authorization &auth, const char *sql, int nargs, Oid *argtypes, Datum *values, bool read_only)
{
	OwnerScope owner;
	EnterOwner(&owner, auth, PIN_SEARCH_PATH | PIN_OUTPUT | PIN_ROW_SECURITY);
	int ret = SPI_execute_with_args(sql, nargs, argtypes, values, nullptr, read_only, 0);
	LeaveOwner(&owner);
	return ret;
}

Datum
Now()
{
	return TimestampTzGetDatum(GetCurrentTimestamp());
}

/* A named counter the caller may not act on is refused; without a name, it is skipped. */
bool
Allowed(const Counter *e, bool named, bool read)
{
	if (read ? MayRead(e) : MayMaintain(e))
		return true;
	if (!named)
		return false;
	if (read)
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("counter \"%s\": permission denied for %s %s", e->name,
		                       get_rel_relkind(e->target) == RELKIND_VIEW ? "view" : "table", QualifiedName(e->target)),
		                errdetail("Verifying a counter requires the privilege to read its table.")));
	RequireMaintainer(e);
	return false;
}

/*
 * A step of a round of maintenance (compact() or apply_retention() without a name, the background worker) waits for
 * no lock: the relation it found locked by another transaction, so that the round skips the counter's step and goes
 * on. A step outside a round (a counter named) has none and waits.
 */
struct Round {
	Oid busy;
	/* its name when the lock was refused: the transaction holding the lock may drop it before the round reports it */
	char busy_name[2 * (2 * NAMEDATALEN + 2) + 2];
};

/*
 * Lock `rel` (which the catalog row read earlier named) and read the counter again: its row as it is once the lock is
 * held (its options too), or NULL if it no longer is what `e` says -- a transaction that dropped it or switched its
 * mode while we waited for the lock has committed by then. In a round, a lock another transaction holds is not
 * waited for: the step is skipped (NULL, round->busy).
 */
const Counter *
LockIfUnchanged(const Counter *e, Oid rel, LOCKMODE mode, Round *round)
{
	if (round == nullptr)
		LockRelationOid(rel, mode);
	else if (!ConditionalLockRelationOid(rel, mode)) {
		round->busy = rel;
		const char *name = get_rel_name(rel);
		strlcpy(round->busy_name,
		        name != nullptr ? quote_qualified_identifier(get_namespace_name(get_rel_namespace(rel)), name)
		                        : "a table of the counter",
		        sizeof(round->busy_name));
		return nullptr;
	}
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(rel)))
		return nullptr;
	List *now = ReadCatalogHere(e->name);
	if (now == NIL)
		return nullptr;
	Counter *c = (Counter *)linitial(now);
	return SameCounter(e, c) ? c : nullptr;
}

int64
Int64Column(int col)
{
	bool isnull;
	Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);
	return isnull ? 0 : DatumGetInt64(d);
}

/*
 * Thresholds of a log or sharded counter are crossed by the values compaction folds: the compiled counter (with its
 * thresholds) of `e`, or NULL if its options (as read under the compaction's lock) have none.
 */
CompiledCounter *
WithThresholds(const Counter *e)
{
	if (e->options->nthresholds == 0)
		return nullptr;
	CompiledCounter *c = CompiledOf(e);
	return c->has_thresholds ? c : nullptr;
}

/*
 * The crossings of the keys a compaction folded (CompactStatement's rows: two counts, the folded row in definition
 * order, then the sum folded into each value column), noted for AnnounceCrossings.
 */
void
NoteFoldedCrossings(CompiledCounter *c)
{
	const CounterDef *def = c->def;
	Datum *keys = (Datum *)palloc(sizeof(Datum) * def->nkeys);
	char *key_nulls = (char *)palloc(sizeof(char) * def->nkeys);
	TupleDesc desc = SPI_tuptable->tupdesc;
	for (uint64 r = 0; r < SPI_processed; r++) {
		HeapTuple row = SPI_tuptable->vals[r];
		bool isnull;
		int first = 3; /* f1 */
		int sums = first + def->ncolumns;
		int nvalue = 0;
		for (int i = 0; i < def->ncolumns; i++) {
			const ColumnDef *cd = &def->columns[i];
			if (!cd->is_key)
				continue;
			keys[cd->index] = SPI_getbinval(row, desc, first + i, &isnull);
			key_nulls[cd->index] = isnull ? 'n' : ' ';
		}
		for (int i = 0; i < def->ncolumns; i++) {
			const ColumnDef *cd = &def->columns[i];
			if (cd->is_key)
				continue;
			Datum delta = SPI_getbinval(row, desc, sums + nvalue++, &isnull);
			if (isnull)
				continue; /* (the one row of a compaction that folded nothing) */
			Datum value = SPI_getbinval(row, desc, first + i, &isnull);
			if (isnull)
				continue;
			/* (the folded sums are numeric; an integer column's delta goes as bigint) */
			if (def->values[cd->index].accum == AccumKind::Int64)
				delta = DirectFunctionCall1(numeric_int8, delta);
			NoteCrossings(c, cd->index, value, SPI_gettypeid(desc, first + i), delta, keys, key_nulls);
		}
	}
}

/* The crossings of the folded keys, in a list of their own (the enclosing one is put back even on error). */
List *
FoldedCrossings(CompiledCounter *c)
{
	List *enclosing = StartCrossings();
	List *mine = NIL;
	PG_TRY();
	{
		NoteFoldedCrossings(c);
	}
	PG_FINALLY();
	{
		mine = TakeCrossings(enclosing);
	}
	PG_END_TRY();
	return mine;
}

int64 FoldInto(const Counter *e, CompiledCounter *thresholds, List **found);

/*
 * Fold a log or sharded counter's pending rows into its totals; returns the number of rows folded. `found`: the
 * crossings of its thresholds are added there rather than announced (a Citus worker's, which the coordinator
 * announces).
 */
int64
CompactCollecting(const Counter *e, Round *round, List **found)
{
	/* (from here on, the counter as read under the lock: its options too) */
	e = LockIfUnchanged(e, e->log, ShareUpdateExclusiveLock, round);
	if (e == nullptr)
		return 0;
	if (e->options->building)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("counter \"%s\" is being built concurrently: its totals are not complete yet", e->name),
		                errhint("If create_counter_concurrently() or rebuild_concurrently() stopped, CALL "
		                        "counters.rebuild_concurrently('%s') completes it.",
		                        e->name)));
	/* (before the statement's snapshot: what commits after it stays pending, stats.cpp) */
	NoteCompactionStart(e->query);
	CompiledCounter *thresholds = WithThresholds(e);
	if (citus::KindOfTable(e->log) != citus::Kind::Distributed)
		return FoldInto(e, thresholds, found);
	/*
	 * Citus: each node folds the log or slots shards placed on it into their co-located totals shards, one local
	 * statement each (what a reader of a key sees is on that node; a key's row is on one shard, so its crossings are
	 * found there); the coordinator asks every worker to, on connections of their own (each node's compaction commits
	 * by itself; none holds another's locks), and announces the crossings they report.
	 */
	int64 folded = 0;
	List *crossings = NIL;
	ListCell *lc;
	foreach (lc, citus::LocalShards(e->log)) {
		Counter *placement = (Counter *)palloc(sizeof(Counter));
		*placement = *e;
		placement->log = lfirst_oid(lc);
		placement->totals = citus::WriteShard(e->name, e->totals, placement->log, e->log);
		placement->layout = nullptr;
		folded += FoldInto(placement, thresholds, &crossings);
	}
	if (found != nullptr) {
		*found = list_concat(*found, crossings);
		return folded;
	}
	foreach (lc, citus::CompactOnWorkers(e->name)) {
		int64 n = 0;
		crossings = list_concat(crossings, ReportedCompaction(e->name, thresholds, (const char *)lfirst(lc), &n));
		folded += n;
	}
	AnnounceCrossings(crossings);
	return folded;
}

int64
CompactOne(const Counter *e, Round *round)
{
	return CompactCollecting(e, round, nullptr);
}

/*
 * Fold e's pending rows (its log or slots) into its totals, noting the crossings of `thresholds`: announced, or added
 * to `found` (not NULL).
 */
int64
FoldInto(const Counter *e, CompiledCounter *thresholds, List **found)
{
	const CounterLayout *l = LayoutOf(e);
	MemoryContext caller = CurrentMemoryContext;
	SpiConnect();
	int ret =
	    RunAsOwner(AuthorizedByCatalog(e), CompactStatement(e, thresholds != nullptr), 0, nullptr, nullptr, false);
	if (ret != SPI_OK_SELECT || SPI_processed < 1)
		elog(ERROR, "counters: compacting counter \"%s\" failed: %s", e->name, SPI_result_code_string(ret));
	int64 folded = Int64Column(1);
	List *crossings = thresholds != nullptr ? FoldedCrossings(thresholds) : NIL;
	bool isnull;
	Datum zero_rows = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	if (!isnull && !e->options->keep_zero &&
	    ArrayGetNItems(ARR_NDIM(DatumGetArrayTypeP(zero_rows)), ARR_DIMS(DatumGetArrayTypeP(zero_rows))) > 0) {
		Oid tids = TIDARRAYOID;
		ret = RunAsOwner(AuthorizedByCatalog(e), DeleteRowsStatement(l->table), 1, &tids, &zero_rows, false);
		if (ret != SPI_OK_DELETE)
			elog(ERROR, "counters: compacting counter \"%s\" failed: %s", e->name, SPI_result_code_string(ret));
	}
	if (found != nullptr) {
		/* (the list grown in the caller's context, not SPI's, which SPI_finish frees) */
		MemoryContext old = MemoryContextSwitchTo(caller);
		*found = list_concat(*found, crossings);
		MemoryContextSwitchTo(old);
	} else
		AnnounceCrossings(crossings);
	SPI_finish();
	return folded;
}

/* Delete the expired buckets of a counter with a retention; returns the number of rows deleted. */
int64
RetainOne(const Counter *e, Round *round)
{
	/* (from here on, the counter as read under the locks: its retention too) */
	e = LockIfUnchanged(e, ValuesTable(e), RowExclusiveLock, round);
	if (e != nullptr && OidIsValid(e->log))
		e = LockIfUnchanged(e, e->log, RowExclusiveLock, round);
	if (e == nullptr)
		return 0;
	const CounterLayout *l = LayoutOf(e);
	if (l->retention_column < 0)
		return 0;
	SpiConnect();
	int64 deleted = 0;
	for (int i = 0; i < 2; i++) {
		Oid rel = i == 0 ? l->table : e->log;
		if (!OidIsValid(rel))
			continue;
		int ret = RunAsOwner(AuthorizedByCatalog(e),
		                     RetentionStatement(e, rel, i == 0 ? l->in_table.names : l->in_pending.names), 0, nullptr,
		                     nullptr, false);
		if (ret != SPI_OK_DELETE)
			elog(ERROR, "counters: applying the retention of counter \"%s\" failed: %s", e->name,
			     SPI_result_code_string(ret));
		deleted += (int64)SPI_processed;
	}
	SPI_finish();
	return deleted;
}

void
CheckWindowsOf(void *name)
{
	(void)CheckWindows((const char *)name);
}

/* A counter's step of maintenance: compaction, retention, the window check (in a round, or waiting for locks). */
typedef int64 (*StepFunction)(const Counter *e, Round *round);

int64
CheckWindowsStep(const Counter *e, Round *round)
{
	return CheckWindows(e->name);
}

struct Step {
	StepFunction step;
	const Counter *e;
	int64 result;
	Round round;
};

void
RunStep(void *arg)
{
	Step *s = (Step *)arg;
	s->result = s->step(s->e, &s->round);
}

/*
 * One counter's step in a round of maintenance: in a subtransaction of its own, skipped (reported as a NOTICE) when
 * another transaction holds a lock it needs, and canceled past counters.step_timeout. Its error (rolled back) is
 * reported as a WARNING, never raised, so that one counter -- an owner's trigger that sleeps on its totals, say --
 * stops no other. Returns whether the step ran to its end; `error`, when it failed.
 */
bool
TryRoundStep(StepFunction step, const Counter *e, const char *what, int64 *result, ErrorData **error_out)
{
	Step s = {step, e, 0, {InvalidOid, ""}};
	/*
	 * Registered by the process that uses it: each backend and worker starts with no timeout of a library's (a
	 * registration of the postmaster's, loading the library, would not be inherited).
	 */
	static int registered_by = 0;
	if (registered_by != MyProcPid) {
		step_timeout = RegisterTimeout(USER_TIMEOUT, StepTimeoutHandler);
		registered_by = MyProcPid;
	}
	if (step_timeout_ms > 0)
		enable_timeout_after(step_timeout, step_timeout_ms);
	ErrorData *error = TryInSubtransaction(RunStep, &s);
	if (step_timeout_ms > 0)
		disable_timeout(step_timeout, false);
	if (error == nullptr && step_timed_out) {
		/* the bound passed as the step returned: the cancel it asked for is not one for the caller */
		step_timed_out = false;
		QueryCancelPending = false;
	}
	*result = error == nullptr ? s.result : 0;
	if (error_out != nullptr)
		*error_out = error;
	if (error != nullptr)
		ereport(WARNING,
		        (errcode(error->sqlerrcode), errmsg("counter \"%s\": %s failed: %s", e->name, what, error->message),
		         errdetail("The other counters were maintained; this one is tried again at the next round. "
		                   "counters.stats shows the error until a round succeeds.")));
	else if (OidIsValid(s.round.busy))
		ereport(NOTICE, (errmsg("counter \"%s\": %s skipped: another transaction holds a lock on %s", e->name, what,
		                        s.round.busy_name),
		                 errdetail("A round of maintenance waits for no lock; the next round tries again.")));
	return error == nullptr && !OidIsValid(s.round.busy);
}

void
NoteCompaction(const Counter *e, ErrorData *error, int64 folded, TimestampTz started)
{
	if (error == nullptr) {
		/* (the history: how many compactions, the rows they folded and their time, in milliseconds) */
		double ms = (double)(GetCurrentTimestamp() - started) / 1000.0;
		const char *columns[7] = {"compacted_at",  "compact_error",     "+compactions",     "+compacted_rows",
		                          "+compact_time", "last_compact_rows", "last_compact_time"};
		Oid types[7] = {TIMESTAMPTZOID, TEXTOID, INT8OID, INT8OID, FLOAT8OID, INT8OID, FLOAT8OID};
		Datum values[7] = {Now(),
		                   (Datum)0,
		                   Int64GetDatum(1),
		                   Int64GetDatum(folded),
		                   Float8GetDatum(ms),
		                   Int64GetDatum(folded),
		                   Float8GetDatum(ms)};
		char nulls[7] = {' ', 'n', ' ', ' ', ' ', ' ', ' '};
		NoteMaintenance(e->name, 7, columns, types, values, nulls);
		const char *reset[1] = {"compact_failures"};
		Oid reset_types[1] = {INT8OID};
		Datum reset_values[1] = {(Datum)0};
		NoteMaintenance(e->name, 1, reset, reset_types, reset_values, "n");
	} else {
		const char *columns[3] = {"compact_failed_at", "compact_error", "+compact_failures"};
		Oid types[3] = {TIMESTAMPTZOID, TEXTOID, INT8OID};
		Datum values[3] = {Now(), CStringGetTextDatum(error->message ? error->message : "unknown error"),
		                   Int64GetDatum(1)};
		NoteMaintenance(e->name, 3, columns, types, values, nullptr);
	}
}

/*
 * The worker's rounds back off from a counter whose compaction keeps failing (a step that always outlasts
 * counters.step_timeout, an owner's trigger that always fails): after n failed rounds in a row, the next tries it
 * again only once
 * 2^(n-1) times counters.step_timeout (at least a second, at most an hour) has passed since the last failure, so
 * that it does not hold every other counter's round up by a step_timeout each time. Returns when it is tried again
 * (0: now). compact() of the counter by name tries it at once.
 */
TimestampTz
BackedOffUntil(const Counter *e)
{
	SpiConnect();
	Oid argtypes[1] = {TEXTOID};
	Datum args[1] = {CStringGetTextDatum(e->name)};
	(void)QueryLatest("SELECT m.compact_failed_at, m.compact_failures FROM counters.maintenance m "
	                  " WHERE m.counter OPERATOR(pg_catalog.=) $1 AND m.compact_failures > 0 "
	                  "   AND m.compact_failed_at > COALESCE(m.compacted_at, '-infinity')",
	                  1, argtypes, args, nullptr);
	TimestampTz until = 0;
	if (SPI_processed == 1) {
		bool isnull;
		TimestampTz failed =
		    DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		int64 failures = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		int64 base_ms = Max(step_timeout_ms, 1000);
		int64 wait_ms = Min(base_ms << Min(failures - 1, 20), (int64)3600 * 1000);
		until = failed + wait_ms * 1000;
	}
	SPI_finish();
	return until > GetCurrentTimestamp() ? until : 0;
}

bool
HasRetention(const Counter *e)
{
	return e->options->retention_column != nullptr;
}

/*
 * One counter's part of a round: compaction (log, sharded; noted in counters.maintenance), retention, window checks,
 * each a step of its own. Returns the rows folded.
 */
int64
MaintainInRound(const Counter *e)
{
	int64 folded = 0, n;
	CHECK_FOR_INTERRUPTS();
	/* (the worker's rounds back off; compact() called by hand tries every counter) */
	TimestampTz until = HasPending(e->mode) && MyBackendType == B_BG_WORKER ? BackedOffUntil(e) : 0;
	if (until != 0)
		ereport(LOG, (errmsg("counter \"%s\": compaction skipped until %s: its last rounds' compactions failed",
		                     e->name, timestamptz_to_str(until)),
		              errdetail("The worker backs off from a counter whose compaction keeps failing, so that the "
		                        "others are not held up; counters.compact('%s') tries it now.",
		                        e->name)));
	else if (HasPending(e->mode)) {
		ErrorData *error = nullptr;
		TimestampTz started = GetCurrentTimestamp();
		/* a skipped compaction is neither a success nor a failure: nothing noted */
		if (TryRoundStep(CompactOne, e, "compaction", &folded, &error) || error != nullptr)
			NoteCompaction(e, error, folded, started);
	}
	if (HasRetention(e))
		(void)TryRoundStep(RetainOne, e, "applying the retention", &n, nullptr);
	/* (read now, not as the round read the counter: one dropped while its steps ran has no window to check) */
	if (CurrentOptions(e->name)->window != nullptr)
		(void)TryRoundStep(CheckWindowsStep, e, "checking the window thresholds", &n, nullptr);
	return folded;
}

} // namespace

namespace {

/*
 * compact() on a Citus worker: the log and slots shards placed here, of one counter or all (the coordinator's
 * compact() asks every worker so); retention and windows are the coordinator's.
 */
int64
CompactHere(const char *name)
{
	List *entries = ReadCatalogHere(name);
	if (name != nullptr && entries == NIL)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("counter \"%s\" does not exist on this node", name),
		                errhint("Citus workers know the counters of Citus tables (counters.counter_replica).")));
	int64 folded = 0;
	ListCell *lc;
	foreach (lc, entries) {
		Counter *e = (Counter *)lfirst(lc);
		if (!HasPending(e->mode) || !Allowed(e, name != nullptr, false))
			continue;
		/* (the crossings a compaction here finds are the coordinator's to announce: it compacts such counters) */
		if (e->options->nthresholds > 0 && name == nullptr)
			continue;
		if (e->options->nthresholds > 0)
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			                errmsg("counter \"%s\" has thresholds, which the coordinator announces", name),
			                errdetail("A compaction finds the thresholds its folded rows cross; a worker's "
			                          "notifications would never reach the coordinator's listeners."),
			                errhint("Run SELECT counters.compact('%s') on the coordinator: it folds every worker's "
			                        "placements and announces their crossings.",
			                        name)));
		if (name != nullptr)
			folded += CompactOne(e, nullptr);
		else
			(void)TryRoundStep(CompactOne, e, "compaction", &folded, nullptr);
	}
	return folded;
}

} // namespace

char *
CompactPlacements(const char *name)
{
	if (!citus::OnWorker())
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("counters.compact_placements() runs on a Citus worker"),
		         errhint("The coordinator's counters.compact('%s') calls it on every worker.", name)));
	List *entries = ReadCatalogHere(name);
	if (entries == NIL)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("counter \"%s\" does not exist on this node", name),
		                errhint("Citus workers know the counters of Citus tables (counters.counter_replica).")));
	Counter *e = (Counter *)linitial(entries);
	(void)Allowed(e, true, false);
	List *found = NIL;
	int64 folded = HasPending(e->mode) ? CompactCollecting(e, nullptr, &found) : 0;
	return CompactionReport(folded, found);
}

int64
Compact(const char *name)
{
	if (citus::OnWorker())
		return CompactHere(name);
	if (name == nullptr) {
		int64 folded = 0;
		ListCell *lc;
		foreach (lc, ReadCatalog(nullptr)) {
			Counter *e = (Counter *)lfirst(lc);
			if (MayMaintain(e) && MayWriteHere(e, false, "compact"))
				folded += MaintainInRound(e);
		}
		return folded;
	}
	Counter *e = LookupCounter(name);
	(void)Allowed(e, true, false);
	(void)MayWriteHere(e, true, "compact");
	int64 folded = 0;
	if (HasPending(e->mode)) {
		TimestampTz started = GetCurrentTimestamp();
		folded = CompactOne(e, nullptr);
		NoteCompaction(e, nullptr, folded, started);
	}
	/* the maintenance entry point: expired buckets go too (not counted in the result) */
	if (HasRetention(e))
		(void)RetainOne(e, nullptr);
	/*
	 * ... and window sums whose buckets aged out are checked. A failure there (a callback's) is a WARNING: it must not
	 * stop compaction, and the next round checks again. (Read now: a counter dropped while compact() waited is gone.)
	 */
	if (CurrentOptions(name)->window == nullptr)
		return folded;
	ErrorData *error = TryInSubtransaction(CheckWindowsOf, (void *)name);
	if (error != nullptr)
		ereport(WARNING, (errcode(error->sqlerrcode),
		                  errmsg("counter \"%s\": checking the window thresholds failed: %s", name, error->message)));
	return folded;
}

void
FoldPending(const Counter *e)
{
	if (citus::KindOfTable(e->log) != citus::Kind::Distributed) {
		(void)CompactOne(e, nullptr);
		return;
	}
	/* (writers are locked out on every node: the log or slots fold as one distributed statement, then go) */
	SpiConnect();
	Authorization auth = AuthorizedByCatalog(e);
	if (RunAsOwner(auth, FoldAllStatement(e), 0, nullptr, nullptr, false) != SPI_OK_INSERT ||
	    RunAsOwner(auth, DeleteAllStatement(e->log), 0, nullptr, nullptr, false) != SPI_OK_DELETE ||
	    RunAsOwner(auth, ZeroRowsStatement(e), 0, nullptr, nullptr, false) != SPI_OK_DELETE)
		elog(ERROR, "counters: folding the pending rows of counter \"%s\" failed", e->name);
	SPI_finish();
}

int64
CompactInRound(const char *name)
{
	List *entries = ReadCatalog(name);
	if (entries == NIL || !MayWriteHere((Counter *)linitial(entries), false, "compact"))
		return 0;
	return MaintainInRound((Counter *)linitial(entries));
}

int64
ApplyRetention(const char *name)
{
	if (name != nullptr) {
		Counter *e = LookupCounter(name);
		(void)Allowed(e, true, false);
		return HasRetention(e) && MayWriteHere(e, true, "apply the retention of") ? RetainOne(e, nullptr) : 0;
	}
	int64 deleted = 0, n;
	ListCell *lc;
	foreach (lc, ReadCatalog(nullptr)) {
		Counter *e = (Counter *)lfirst(lc);
		if (!HasRetention(e) || !MayMaintain(e) || !MayWriteHere(e, false, "apply the retention of"))
			continue;
		CHECK_FOR_INTERRUPTS();
		(void)TryRoundStep(RetainOne, e, "applying the retention", &n, nullptr);
		deleted += n;
	}
	return deleted;
}

namespace {

struct VerifyArgs {
	const Counter *e;
	ReturnSetInfo *rsinfo;
};

/* Verify one counter: its wrong values into the function's result, the run recorded in counters.maintenance. */
void
VerifyOne(void *arg)
{
	VerifyArgs *a = (VerifyArgs *)arg;
	const Counter *e = a->e;
	ReturnSetInfo *rsinfo = a->rsinfo;
	RequireAllRowsVisible(e);
	SpiConnect();
	Oid argtypes[1] = {TEXTOID};
	Datum args[1] = {CStringGetTextDatum(e->name)};
	int ret = RunAsOwner(AuthorizedByCatalog(e), VerifyStatement(e), 1, argtypes, args, true);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: verifying counter \"%s\" failed: %s", e->name, SPI_result_code_string(ret));
	uint64 wrong = SPI_processed;
	for (uint64 r = 0; r < wrong; r++) {
		Datum values[5];
		bool nulls[5];
		heap_deform_tuple(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	/* writes left uncounted by counters.suspend (a data load) since it was last verified: said */
	(void)QueryLatest("SELECT m.suspended_at::pg_catalog.text FROM counters.maintenance m "
	                  " WHERE m.counter OPERATOR(pg_catalog.=) $1 AND m.suspended_at IS NOT NULL "
	                  "   AND m.suspended_at > COALESCE(m.verified_at, '-infinity')",
	                  1, argtypes, args, nullptr);
	if (SPI_processed == 1)
		ereport(
		    NOTICE,
		    (errmsg("counter \"%s\": writes to its source were left uncounted since it was last verified, last at %s "
		            "(counters.suspend)",
		            e->name, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1)),
		     errdetail("A data load by its owner (pg_restore --data-only) suspends the counting of what it loads; "
		               "verify() compares the counter with a recount all the same.")));
	SPI_finish();
	const char *columns[2] = {"verified_at", "verify_wrong"};
	Oid types[2] = {TIMESTAMPTZOID, INT8OID};
	Datum values[2] = {Now(), Int64GetDatum((int64)wrong)};
	NoteMaintenance(e->name, 2, columns, types, values, nullptr);
}

} // namespace

void
Verify(const char *name, FunctionCallInfo fcinfo)
{
	/* (what this transaction's deferred counters hold is applied first: they are compared as they will commit) */
	(void)ApplyDeferred();
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
	/* (bottom-up: a counter after the counters it counts over, which a named one verifies first) */
	List *entries = BottomUp(name ? list_make1(LookupCounter(name)) : ReadCatalog(nullptr), name != nullptr);
	ListCell *lc;
	foreach (lc, entries) {
		Counter *e = (Counter *)lfirst(lc);
		if (!Allowed(e, name != nullptr, true))
			continue;
		CHECK_FOR_INTERRUPTS();
		if (!HasFeature(e, Feature::Verify)) {
			/* (a NOTICE, not an error: verifying every counter goes on with the others) */
			ereport(NOTICE, (errmsg("counter \"%s\" is not verified: its source %s is a sink", e->name,
			                        QualifiedName(e->source)),
			                 errdetail("The rows a sink counted were never stored: there is nothing to recount them "
			                           "from.")));
			continue;
		}
		VerifyArgs args = {e, rsinfo};
		if (name != nullptr) {
			VerifyOne(&args);
			continue;
		}
		/* Without a name, one counter that cannot be verified is reported, and the others are verified. */
		ErrorData *error = TryInSubtransaction(VerifyOne, &args);
		if (error != nullptr)
			ereport(WARNING, (errcode(error->sqlerrcode),
			                  strncmp(error->message, psprintf("counter \"%s\"", e->name), strlen(e->name) + 10) == 0
			                      ? errmsg("%s", error->message)
			                      : errmsg("counter \"%s\": verify failed: %s", e->name, error->message),
			                  errdetail("It is not verified; the other counters are.")));
	}
}

namespace {

struct Condition {
	const Counter *e;
	const char *condition;
	const char *check; /* RebuildConditionCheck: built from the counter's layout before the subtransaction */
};

void
ProbeCondition(void *arg)
{
	Condition *c = (Condition *)arg;
	if (list_length(raw_parser(ConditionProbe(c->condition), RAW_PARSE_DEFAULT)) != 1)
		ereport(ERROR, (errcode(ERRCODE_SYNTAX_ERROR), errmsg("more than one statement")));
	SpiConnect();
	(void)RunAsOwner(AuthorizeMaintainer(c->e), c->check, 0, nullptr, nullptr, true);
	SPI_finish();
}

/* A rebuild condition is one boolean expression over the key columns; its errors are reported as such. */
void
CheckCondition(const Counter *e, const char *condition)
{
	Condition c = {e, condition, RebuildConditionCheck(e, condition)};
	ErrorData *error = TryInSubtransaction(ProbeCondition, &c);
	if (error != nullptr)
		ereport(ERROR,
		        (errcode(error->sqlerrcode),
		         errmsg("counter \"%s\": rebuild condition \"%s\" is not a condition over the key columns (%s): %s",
		                e->name, condition, KeyColumnList(e), error->message)));
}

} // namespace

void
InitMaintenance()
{
	DefineCustomIntVariable(
	    "counters.step_timeout",
	    "Longest time one counter's compaction, retention or window check may take in a round.",
	    "A round is compact() or apply_retention() without a name, or one of the background worker; "
	    "a step canceled so is reported, and the round goes on with the other counters. 0: no bound.",
	    &step_timeout_ms, 60000, 0, INT_MAX, PGC_USERSET, GUC_UNIT_MS, nullptr, nullptr, nullptr);
}

namespace {

/* A step's error to return: its own, or a cancel that its step_timeout asked for (said so); not another cancel. */
bool
StepError(ErrorData *error)
{
	bool timed_out = step_timed_out && error->sqlerrcode == ERRCODE_QUERY_CANCELED;
	step_timed_out = false;
	if (timed_out)
		error->message = psprintf("canceled after %d ms (counters.step_timeout)", step_timeout_ms);
	return timed_out || (error->sqlerrcode != ERRCODE_QUERY_CANCELED &&
	                     ERRCODE_TO_CATEGORY(error->sqlerrcode) != ERRCODE_TO_CATEGORY(ERRCODE_OPERATOR_INTERVENTION));
}

} // namespace

ErrorData *
TryInSubtransaction(void (*body)(void *), void *arg)
{
	return TrySubtransaction(body, arg, StepError);
}

namespace {

/*
 * rebuild() of a counter whose keys it holds one row each of (writers locked out): pending rows folded, then the keys
 * that differ from the definition (`condition`: those it selects) written again; returns the rows changed.
 */
int64
RecountRows(const Counter *e, const char *condition)
{
	if (HasPending(e->mode))
		FoldPending(e);
	if (condition != nullptr)
		CheckCondition(e, condition);
	SpiConnect();
	bool distributed = citus::KindOfTable(ValuesTable(e)) != citus::Kind::Local;
	int ret =
	    RunAsOwner(AuthorizeMaintainer(e), RebuildStatement(e, condition, distributed), 0, nullptr, nullptr, false);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "counters: rebuilding counter \"%s\" failed: %s", e->name, SPI_result_code_string(ret));
	int64 differ = Int64Column(1), deleted = Int64Column(2), inserted = Int64Column(3), updated = Int64Column(4);
	if (distributed && e->owns_target && !e->options->keep_zero) {
		ret = RunAsOwner(AuthorizedByCatalog(e), ZeroRowsStatement(e), 0, nullptr, nullptr, false);
		if (ret != SPI_OK_DELETE)
			elog(ERROR, "counters: rebuilding counter \"%s\" failed: %s", e->name, SPI_result_code_string(ret));
		deleted = (int64)SPI_processed;
		updated -= deleted;
	}
	SPI_finish();
	ereport(NOTICE, (errmsg("counter \"%s\": %lld %s from the definition", e->name, (long long)differ,
	                        differ == 1 ? "key differs" : "keys differ")));
	ereport(NOTICE, (errmsg("counter \"%s\": %lld rows inserted, %lld updated, %lld deleted", e->name,
	                        (long long)inserted, (long long)updated, (long long)deleted)));
	return inserted + updated + deleted;
}

/*
 * rebuild() of a Citus counter kept as per-shard partial rows (writers locked out): its log and totals emptied and
 * filled again from the definition, under the fill's anchor; whole only. Returns the rows deleted and inserted.
 */
int64
RefillPartials(const Counter *e, const char *condition)
{
	if (condition != nullptr)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\" keeps per-shard partial rows: it is rebuilt whole", e->name),
		                errhint("Call counters.rebuild('%s') without a condition.", e->name)));
	SpiConnect();
	Authorization auth = AuthorizeMaintainer(e);
	int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT | PIN_ROW_SECURITY);
	int64 deleted = 0;
	Oid emptied[2] = {e->log, e->totals};
	for (Oid rel : emptied) {
		if (RunAsOwner(auth, DeleteAllStatement(rel), 0, nullptr, nullptr, false) != SPI_OK_DELETE)
			elog(ERROR, "counters: rebuilding counter \"%s\" failed", e->name);
		deleted += (int64)SPI_processed;
	}
	if (RunAsOwner(auth, FillStatement(DefinitionOf(e), e->totals, e->query), 0, nullptr, nullptr, false) !=
	    SPI_OK_INSERT)
		elog(ERROR, "counters: rebuilding counter \"%s\" failed", e->name);
	int64 inserted = (int64)SPI_processed;
	UnpinSettings(level);
	SPI_finish();
	ereport(NOTICE, (errmsg("counter \"%s\": %lld partial rows replaced by %lld rows from the definition", e->name,
	                        (long long)deleted, (long long)inserted)));
	return deleted + inserted;
}

int64
RebuildOne(const Counter *e, const char *condition, bool named)
{
	/* Writers of the source (and parent) wait until the rebuild commits; readers go on. */
	Change change;
	e = BeginChange(&change, e->name, ShareLock, ExclusiveLock);
	if (!HasFeature(e, Feature::Rebuild)) {
		if (named)
			RequireFeature(e, Feature::Rebuild);
		ereport(NOTICE,
		        (errmsg("counter \"%s\" is not rebuilt: its source %s is a sink", e->name, QualifiedName(e->source))));
		EndChange(&change);
		return 0;
	}
	RequireAllRowsVisible(e);
	int64 changed =
	    HasPending(e->mode) && LayoutOf(e)->anchored ? RefillPartials(e, condition) : RecountRows(e, condition);
	const char *columns[1] = {"rebuilt_at"};
	Oid types[1] = {TIMESTAMPTZOID};
	Datum values[1] = {Now()};
	NoteMaintenance(e->name, 1, columns, types, values, nullptr);
	EndChange(&change);
	return changed;
}

} // namespace

int64
Rebuild(const char *name, const char *condition)
{
	if (condition != nullptr && name == nullptr)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("a rebuild condition needs a counter name")));
	RequireReadCommitted("counters.rebuild()");
	/* (deferred deltas first: the recount includes the writes they come from) */
	(void)ApplyDeferred();
	int64 total = 0;
	/*
	 * Bottom-up: a counter after the counters it counts over (whose writes it follows), which a named one rebuilds
	 * first; by a condition over its keys, itself only.
	 */
	List *entries = name ? list_make1(LookupCounter(name)) : ReadCatalog(nullptr);
	entries = BottomUp(entries, name != nullptr && condition == nullptr);
	ListCell *lc;
	foreach (lc, entries) {
		Counter *e = (Counter *)lfirst(lc);
		if (!Allowed(e, name != nullptr, false) || !MayWriteHere(e, name != nullptr, "rebuild"))
			continue;
		CHECK_FOR_INTERRUPTS();
		total += RebuildOne(e, condition, name != nullptr);
	}
	return total;
}
} // namespace counters
