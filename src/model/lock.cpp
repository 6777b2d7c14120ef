/*
 * lock.cpp: the locks of a change, in one order. A counter's source and its partitions, then the parent it joins
 * (LockCounterSources), taken politely (LockPolitely): a change waits for older transactions without making new ones
 * queue behind it.
 */
#include "model/model.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_inherits.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

namespace counters {

void
LockSource(Oid source, LOCKMODE mode)
{
	LockRelationOid(source, mode);
	(void)find_all_inheritors(source, mode, nullptr); /* (the partitions: it locks all but the one given) */
	integration_hooks.lock_on_every_node(source, mode);
}

bool
SameCounter(const Counter *before, const Counter *after)
{
	return before->source == after->source && before->target == after->target && before->query == after->query &&
	       before->totals == after->totals && before->log == after->log && before->mode == after->mode &&
	       before->owns_target == after->owns_target;
}

void
LockPolitely(const char *counter, Oid rel, void (*lock)(void *), void *arg)
{
	const int attempt_ms = LockTimeout > 0 ? Min(LockTimeout, 50) : 50;
	TimestampTz start = GetCurrentTimestamp();
	long pause_ms = 20;
	for (;;) {
		MemoryContext caller = CurrentMemoryContext;
		ResourceOwner owner = CurrentResourceOwner;
		bool locked = false;
		BeginInternalSubTransaction(nullptr);
		MemoryContextSwitchTo(caller);
		PG_TRY();
		{
			int level = NewGUCNestLevel();
			(void)set_config_option("lock_timeout", psprintf("%d", attempt_ms), PGC_USERSET, PGC_S_SESSION,
			                        GUC_ACTION_SAVE, true, 0, false);
			lock(arg);
			/* (a lock_timeout that fired as a lock was granted is pending: it fails this attempt, not the change) */
			CHECK_FOR_INTERRUPTS();
			AtEOXact_GUC(true, level);
			ReleaseCurrentSubTransaction();
			locked = true;
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(caller);
			ErrorData *error = CopyErrorData();
			if (error->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
				PG_RE_THROW();
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
		}
		PG_END_TRY();
		MemoryContextSwitchTo(caller);
		CurrentResourceOwner = owner;
		if (locked)
			return;
		if (LockTimeout > 0 && TimestampDifferenceExceeds(start, GetCurrentTimestamp(), LockTimeout))
			ereport(ERROR,
			        (errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			         errmsg("counter \"%s\": could not lock %s within lock_timeout", counter, QualifiedName(rel)),
			         errdetail("Older transactions hold it; the change waited without blocking new ones.")));
		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, pause_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		pause_ms = Min(pause_ms * 2, 1000L);
	}
}

Oid
CounterParent(const Counter *e)
{
	if (!OidIsValid(e->query) || !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(e->query)))
		return InvalidOid;
	return DefinitionOf(e)->parent;
}

void
LockCounterSources(const Counter *e, LOCKMODE mode)
{
	LockSource(e->source, mode);
	Oid parent = CounterParent(e);
	if (OidIsValid(parent))
		LockSource(parent, mode);
}

} // namespace counters
