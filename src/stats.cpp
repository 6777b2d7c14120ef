/*
 * stats.cpp: per-counter statistics of the write path, in shared memory (counters.stats: calls, counted_rows,
 * written_keys, total_time, calls_since).
 *
 * Shared memory is only given to a library loaded with shared_preload_libraries = 'counters' (the setting that also
 * starts the background worker). Without it nothing is kept and the columns read NULL. Entries are keyed by database
 * and definition view, so a renamed counter keeps its numbers and a dropped one loses them; they live until the
 * server stops, or counters.reset_stats() empties the database's (as pg_stat_reset() does PostgreSQL's). The write
 * path touches one entry per counter per statement: a shared lock on the table and a spinlock on the entry.
 */
#include "counters.hpp"

extern "C" {
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/hsearch.h"
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
	}
	return e;
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
}

bool
StatsKept()
{
	return entries != nullptr;
}

void
ReportCounterStats(Oid query, int64 rows, int64 keys, double time_ms)
{
	if (entries == nullptr)
		return;
	StatsKey key = {MyDatabaseId, query};
	LWLockAcquire(shared->lock, LW_SHARED);
	StatsEntry *e = (StatsEntry *)hash_search(entries, &key, HASH_FIND, nullptr);
	if (e == nullptr) {
		LWLockRelease(shared->lock);
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		e = AddEntry(&key, 0);
	}
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
		SpinLockRelease(&e->mutex);
	}
	LWLockRelease(shared->lock);
	return true;
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
		if (e->key.database == MyDatabaseId && OidIsValid(e->key.query))
			hash_search(entries, &e->key, HASH_REMOVE, nullptr);
	StatsKey db = {MyDatabaseId, InvalidOid};
	StatsEntry *reset = AddEntry(&db, now);
	if (reset != nullptr)
		reset->since = now;
	LWLockRelease(shared->lock);
	return true;
}

} // namespace counters
