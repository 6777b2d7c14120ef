/*
 * worker.cpp: the optional background worker that compacts log-mode counters periodically.
 *
 * Enabled with shared_preload_libraries = 'counters' and counters.compact_databases = 'db1, db2': one worker per
 * listed database makes a round every counters.compact_interval seconds (0 pauses it): each counter compacted (log,
 * sharded), its retention applied and its window thresholds checked in a transaction of its own, each step skipped
 * when another transaction holds a lock it needs and canceled past counters.step_timeout, so that one counter (an
 * owner's trigger that sleeps) neither stops the others nor keeps their locks. Without the preload, schedule SELECT
 * counters.compact() with pg_cron or any scheduler (one transaction, the same steps); counters stay exact either way,
 * only the log grows between compactions.
 */
#include "control/control.hpp"

extern "C" {
#include "miscadmin.h"
#include "pgstat.h"
#include "access/xact.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/varlena.h"
#include "utils/wait_event.h"

PGDLLEXPORT void counters_worker_main(Datum arg);
}

namespace counters {

int compact_interval_s = 10;
char *compact_databases = nullptr;

void
InitWorkers()
{
	DefineCustomIntVariable("counters.compact_interval", "Seconds between compactions by the background worker.",
	                        "0 pauses the worker.", &compact_interval_s, 10, 0, 86400, PGC_SIGHUP, GUC_UNIT_S, nullptr,
	                        nullptr, nullptr);
	/* A PGC_POSTMASTER setting can only be defined while the postmaster loads the library. */
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomStringVariable("counters.compact_databases",
	                           "Databases whose log-mode counters the background worker compacts (comma-separated).",
	                           nullptr, &compact_databases, "", PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
	if (compact_databases == nullptr || compact_databases[0] == '\0')
		return;
	char *list = pstrdup(compact_databases);
	List *names = NIL;
	if (!SplitIdentifierString(list, ',', &names))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("invalid list syntax in parameter \"counters.compact_databases\"")));
	ListCell *lc;
	foreach (lc, names) {
		const char *db = (const char *)lfirst(lc);
		BackgroundWorker worker;
		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = 10;
		strlcpy(worker.bgw_library_name, "counters", BGW_MAXLEN);
		strlcpy(worker.bgw_function_name, "counters_worker_main", BGW_MAXLEN);
		snprintf(worker.bgw_name, BGW_MAXLEN, "counters compaction worker for %s", db);
		strlcpy(worker.bgw_type, "counters compaction worker", BGW_MAXLEN);
		strlcpy(worker.bgw_extra, db, BGW_EXTRALEN);
		RegisterBackgroundWorker(&worker);
	}
}

namespace {

/* The names of the database's counters (none without the extension), in `cxt`, in a transaction of its own. */
List *
CounterNames(MemoryContext cxt)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SpiConnect();
	PushActiveSnapshot(GetTransactionSnapshot());
	List *names = NIL;
	int ret =
	    SPI_execute("SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'counters'", true, 1);
	if (ret == SPI_OK_SELECT && SPI_processed == 1) {
		/* (read by the model's one reader of the catalog, in name order) */
		List *counters = ReadCatalog(nullptr);
		MemoryContext old = MemoryContextSwitchTo(cxt);
		ListCell *lc;
		foreach (lc, counters)
			names = lappend(names, pstrdup(((const Counter *)lfirst(lc))->name));
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	return names;
}

/*
 * One round: each counter in a transaction of its own (its steps isolated, so the transaction commits); anything
 * else that fails is logged and the round goes on.
 */
void
CompactOnce(MemoryContext cxt)
{
	MemoryContextReset(cxt);
	ListCell *lc;
	foreach (lc, CounterNames(cxt)) {
		const char *name = (const char *)lfirst(lc);
		CHECK_FOR_INTERRUPTS();
		PG_TRY();
		{
			SetCurrentStatementStartTimestamp();
			StartTransactionCommand();
			PushActiveSnapshot(GetTransactionSnapshot());
			pgstat_report_activity(STATE_RUNNING, psprintf("counters: compacting counter \"%s\"", name));
			(void)CompactInRound(name);
			PopActiveSnapshot();
			CommitTransactionCommand();
		}
		PG_CATCH();
		{
			EmitErrorReport();
			FlushErrorState();
			AbortCurrentTransaction();
		}
		PG_END_TRY();
	}
	/* (idle: pg_stat_activity.query says so, instead of naming the last counter compacted) */
	pgstat_report_activity(STATE_IDLE, "counters: waiting for the next round");
	/*
	 * The round's table statistics (the log's deletes, the totals' updates) reach pg_stat_all_tables now, as a
	 * backend's do when it goes idle: counters.stats.log_rows would otherwise grow until autovacuum recounted it.
	 */
	(void)pgstat_report_stat(true);
}

} // namespace
} // namespace counters

extern "C" void
counters_worker_main(Datum arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(MyBgworkerEntry->bgw_extra, nullptr, 0);
	MemoryContext round = AllocSetContextCreate(TopMemoryContext, "counters compaction round", ALLOCSET_SMALL_SIZES);
	for (;;) {
		long timeout_ms = counters::compact_interval_s > 0 ? counters::compact_interval_s * 1000L : 3600 * 1000L;
		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending) {
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (counters::compact_interval_s > 0)
			counters::CompactOnce(round);
	}
}
