/*
 * stats.cpp: per-counter statistics of the write path, in shared memory (counters.stats: calls, counted_rows,
 * written_keys, total_time, calls_since).
 *
 * Shared memory is only given to a library loaded with shared_preload_libraries = 'counters' (the setting that also
 * starts the background worker). Without it nothing is kept and the columns read NULL. Entries are keyed by database
 * and definition view, so a renamed counter keeps its numbers and a dropped one loses them; they live until the
 * server stops, or counters.reset_stats() empties the database's (as pg_stat_reset() does PostgreSQL's). The write
 * path touches one entry per counter per statement: a shared lock on the table and a spinlock on the entry.
 *
 * The oldest pending delta (counters.stats.oldest_pending) of a log or sharded counter is the commit time of the
 * oldest transaction that appended to its log or slots and whose rows no committed compaction has folded yet. Each
 * entry keeps two times: `pending_since`, and `since_mark`, the first commit of an appending transaction since the
 * last compaction began. A compaction clears `since_mark` before its statement takes its snapshot; a writer that
 * commits after that snapshot was taken had not ended when it was, so its commit (which notes itself after it ends)
 * sets `since_mark`; when the compaction commits, `pending_since` takes `since_mark`. A writer that ended before the
 * snapshot may set `since_mark` too: then the figure is older than the truth until the next compaction, never
 * younger. A compaction that rolls back (its subtransaction, or its transaction) leaves `pending_since` as it was.
 */
#include "counters.hpp"

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

namespace counters {

namespace {

/* Counters tracked per server: past it, a counter not seen yet reads NULL until a reset frees entries. */
constexpr long kMaxEntries = 4096;

struct StatsKey {
	Oid database;
	Oid query; /* the counter's definition view; InvalidOid: the database's own entry (its reset time) */
};

struct StatsEntry {
	StatsKey key;
	slock_t mutex;
	int64 calls;
	int64 rows;
	int64 keys;
	double time_ms;
	TimestampTz since;
	TimestampTz pending_since; /* 0: nothing pending (see the file's comment) */
	TimestampTz since_mark;
};

struct StatsShared {
	LWLock *lock; /* the table's shape: shared to update an entry, exclusive to add or remove entries */
	TimestampTz started;
};

StatsShared *shared = nullptr;
HTAB *entries = nullptr;
shmem_request_hook_type prev_request = nullptr;
shmem_startup_hook_type prev_startup = nullptr;

Size
StatsSize()
{
	return MAXALIGN(sizeof(StatsShared)) + hash_estimate_size(kMaxEntries, sizeof(StatsEntry));
}

void
RequestStats()
{
	if (prev_request != nullptr)
		prev_request();
	RequestAddinShmemSpace(StatsSize());
	RequestNamedLWLockTranche("counters stats", 1);
}

void
StartStats()
{
	if (prev_startup != nullptr)
		prev_startup();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	bool found;
	shared = (StatsShared *)ShmemInitStruct("counters stats", sizeof(StatsShared), &found);
	if (!found) {
		shared->lock = &(GetNamedLWLockTranche("counters stats"))->lock;
		shared->started = GetCurrentTimestamp();
	}
	HASHCTL info;
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(StatsKey);
	info.entrysize = sizeof(StatsEntry);
	entries = ShmemInitHash("counters stats entries", kMaxEntries, kMaxEntries, &info, HASH_ELEM | HASH_BLOBS);
	LWLockRelease(AddinShmemInitLock);
}

/* The entry of `key`, added if there is room (the exclusive lock held); NULL: the table is full. */
StatsEntry *
AddEntry(const StatsKey *key, TimestampTz since)
{
	if (hash_get_num_entries(entries) >= kMaxEntries)
		return nullptr;
	bool found;
	StatsEntry *e = (StatsEntry *)hash_search(entries, key, HASH_ENTER_NULL, &found);
	if (e != nullptr && !found) {
		SpinLockInit(&e->mutex);
		e->calls = e->rows = e->keys = 0;
		e->time_ms = 0;
		e->since = since;
		e->pending_since = e->since_mark = 0;
	}
	return e;
}

/*
 * The entry of this database's counter `query`, added if new and there is room (NULL: the table is full), with the
 * table's lock held (shared, or exclusive once an entry was added) for the caller to release.
 */
StatsEntry *
LockEntry(Oid query)
{
	StatsKey key = {MyDatabaseId, query};
	LWLockAcquire(shared->lock, LW_SHARED);
	StatsEntry *e = (StatsEntry *)hash_search(entries, &key, HASH_FIND, nullptr);
	if (e == nullptr) {
		LWLockRelease(shared->lock);
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		e = AddEntry(&key, 0);
	}
	return e;
}

/*
 * What this transaction will tell the entries when it commits: the counters it appended pending rows to, and those
 * whose compaction it ran (with the subtransaction that ran it: a compaction rolled back to a savepoint folded
 * nothing). Kept in TopTransactionContext, forgotten when the transaction ends either way.
 */
struct PendingNote {
	Oid query;
	bool compacted;           /* false: appended */
	SubTransactionId subxact; /* (compactions) */
};
List *notes = NIL;

void
NoteCommitted(const PendingNote *n, TimestampTz at)
{
	StatsKey key = {MyDatabaseId, n->query};
	LWLockAcquire(shared->lock, LW_SHARED);
	StatsEntry *e = (StatsEntry *)hash_search(entries, &key, HASH_FIND, nullptr);
	if (e != nullptr) {
		SpinLockAcquire(&e->mutex);
		if (n->compacted)
			e->pending_since = e->since_mark;
		else {
			if (e->pending_since == 0)
				e->pending_since = at;
			if (e->since_mark == 0)
				e->since_mark = at;
		}
		SpinLockRelease(&e->mutex);
	}
	LWLockRelease(shared->lock);
}

void
PendingXactCallback(XactEvent event, void *)
{
	if (notes == NIL)
		return;
	switch (event) {
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_PREPARE: {
		/*
		 * Compactions first: rows this transaction appended after its compaction stay pending. A prepared
		 * transaction's rows count as pending from now (it may still roll back: then the figure is too old until the
		 * next compaction); its compactions are not trusted to commit.
		 */
		TimestampTz at = GetCurrentTimestamp();
		ListCell *lc;
		if (event == XACT_EVENT_COMMIT)
			foreach (lc, notes) {
				PendingNote *n = (PendingNote *)lfirst(lc);
				if (n->compacted)
					NoteCommitted(n, at);
			}
		foreach (lc, notes) {
			PendingNote *n = (PendingNote *)lfirst(lc);
			if (!n->compacted)
				NoteCommitted(n, at);
		}
		notes = NIL;
		break;
	}
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_ABORT:
	case XACT_EVENT_PARALLEL_COMMIT:
		notes = NIL;
		break;
	default:
		break;
	}
}

void
PendingSubXactCallback(SubXactEvent event, SubTransactionId mine, SubTransactionId parent, void *)
{
	ListCell *lc;
	if (event == SUBXACT_EVENT_ABORT_SUB) {
		foreach (lc, notes) {
			PendingNote *n = (PendingNote *)lfirst(lc);
			if (n->compacted && n->subxact == mine)
				notes = foreach_delete_current(notes, lc);
		}
	} else if (event == SUBXACT_EVENT_COMMIT_SUB) {
		foreach (lc, notes) {
			PendingNote *n = (PendingNote *)lfirst(lc);
			if (n->compacted && n->subxact == mine)
				n->subxact = parent;
		}
	}
}

void
Note(Oid query, bool compacted)
{
	SubTransactionId subxact = GetCurrentSubTransactionId();
	ListCell *lc;
	foreach (lc, notes) {
		PendingNote *n = (PendingNote *)lfirst(lc);
		if (n->query == query && n->compacted == compacted && (!compacted || n->subxact == subxact))
			return;
	}
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	PendingNote *n = (PendingNote *)palloc(sizeof(PendingNote));
	n->query = query;
	n->compacted = compacted;
	n->subxact = subxact;
	notes = lappend(notes, n);
	MemoryContextSwitchTo(old);
}

} // namespace

void
InitStats()
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_request = shmem_request_hook;
	shmem_request_hook = RequestStats;
	prev_startup = shmem_startup_hook;
	shmem_startup_hook = StartStats;
	RegisterXactCallback(PendingXactCallback, nullptr);
	RegisterSubXactCallback(PendingSubXactCallback, nullptr);
}

bool
StatsKept()
{
	return entries != nullptr;
}

void
ReportCounterStats(Oid query, int64 rows, int64 keys, double time_ms, bool pending)
{
	if (entries == nullptr)
		return;
	if (pending && keys > 0)
		Note(query, false);
	StatsEntry *e = LockEntry(query);
	if (e != nullptr) {
		SpinLockAcquire(&e->mutex);
		e->calls++;
		e->rows += rows;
		e->keys += keys;
		e->time_ms += time_ms;
		SpinLockRelease(&e->mutex);
	}
	LWLockRelease(shared->lock);
}

void
ForgetCounterStats(Oid query)
{
	if (entries == nullptr)
		return;
	StatsKey key = {MyDatabaseId, query};
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	hash_search(entries, &key, HASH_REMOVE, nullptr);
	LWLockRelease(shared->lock);
}

bool
ReadCounterStats(Oid query, CounterStats *out)
{
	if (entries == nullptr)
		return false;
	StatsKey key = {MyDatabaseId, query};
	StatsKey db = {MyDatabaseId, InvalidOid};
	memset(out, 0, sizeof(*out));
	LWLockAcquire(shared->lock, LW_SHARED);
	StatsEntry *reset = (StatsEntry *)hash_search(entries, &db, HASH_FIND, nullptr);
	out->since = reset != nullptr ? reset->since : shared->started;
	StatsEntry *e = (StatsEntry *)hash_search(entries, &key, HASH_FIND, nullptr);
	if (e != nullptr) {
		SpinLockAcquire(&e->mutex);
		out->calls = e->calls;
		out->rows = e->rows;
		out->keys = e->keys;
		out->time_ms = e->time_ms;
		out->pending_since = e->pending_since;
		SpinLockRelease(&e->mutex);
	}
	LWLockRelease(shared->lock);
	return true;
}

void
NoteCompactionStart(Oid query)
{
	if (entries == nullptr || IsolationUsesXactSnapshot())
		return; /* (a transaction snapshot may be older than the mark: pending_since stays as it was) */
	StatsEntry *e = LockEntry(query);
	if (e != nullptr) {
		SpinLockAcquire(&e->mutex);
		e->since_mark = 0;
		SpinLockRelease(&e->mutex);
	}
	LWLockRelease(shared->lock);
	if (e != nullptr)
		Note(query, true);
}

bool
ResetCounterStats()
{
	if (entries == nullptr)
		return false;
	TimestampTz now = GetCurrentTimestamp();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	HASH_SEQ_STATUS scan;
	hash_seq_init(&scan, entries);
	StatsEntry *e;
	while ((e = (StatsEntry *)hash_seq_search(&scan)) != nullptr)
		if (e->key.database == MyDatabaseId && OidIsValid(e->key.query)) {
			/* (what is pending is not a statistic: it stays) */
			if (e->pending_since == 0 && e->since_mark == 0)
				hash_search(entries, &e->key, HASH_REMOVE, nullptr);
			else {
				e->calls = e->rows = e->keys = 0;
				e->time_ms = 0;
			}
		}
	StatsKey db = {MyDatabaseId, InvalidOid};
	StatsEntry *reset = AddEntry(&db, now);
	if (reset != nullptr)
		reset->since = now;
	LWLockRelease(shared->lock);
	return true;
}

} // namespace counters
