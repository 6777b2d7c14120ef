/*
 * spi.cpp: how this code base talks to SPI -- connecting, reading with the latest snapshot, and refusing to start
 * what needs its locks before its snapshot in a transaction that already has one.
 */
#include "model/model.hpp"

extern "C" {
#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/resowner.h"
}

namespace counters {

/* ", " between items */
void
Sep(StringInfo buf, bool *first, const char *sep)
{
	if (!*first)
		appendStringInfoString(buf, sep);
	*first = false;
}

void
SpiConnect()
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "counters: SPI_connect failed");
}

int
QueryLatest(const char *sql, int nargs, Oid *argtypes, Datum *values, const char *nulls, bool read_only)
{
	SPIPlanPtr plan = SPI_prepare(sql, nargs, argtypes);
	if (plan == nullptr)
		elog(ERROR, "counters: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
	int ret = SPI_execute_snapshot(plan, values, nulls, snapshot, InvalidSnapshot, read_only, false, 0);
	UnregisterSnapshot(snapshot);
	SPI_freeplan(plan);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: reading the catalog failed: %s", SPI_result_code_string(ret));
	return ret;
}

void
RequireReadCommitted(const char *what)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR, (errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
		                errmsg("%s must run at READ COMMITTED, not %s", what,
		                       IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ"),
		                errhint("Its lock on the source must come before the snapshot it reads with.")));
}

namespace {

/* A cancel or a shutdown is not the body's to return: it is raised again. */
bool
OwnError(ErrorData *error)
{
	return error->sqlerrcode != ERRCODE_QUERY_CANCELED &&
	       ERRCODE_TO_CATEGORY(error->sqlerrcode) != ERRCODE_TO_CATEGORY(ERRCODE_OPERATOR_INTERVENTION);
}

} // namespace

ErrorData *
TrySubtransaction(void (*body)(void *), void *arg, bool (*returned)(ErrorData *error))
{
	MemoryContext caller = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData *volatile error = nullptr;
	BeginInternalSubTransaction(nullptr);
	MemoryContextSwitchTo(caller);
	PG_TRY();
	{
		body(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(caller);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(caller);
		error = CopyErrorData();
		if (!(returned != nullptr ? returned : OwnError)(error))
			PG_RE_THROW();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(caller);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();
	return error;
}

MemoryContext
TransactionContext(MemoryContext *cxt, const char *name, void (*forget)(void *))
{
	if (*cxt == nullptr) {
		/* (`name`: a string literal; it must live as long as the context) */
		MemoryContext made = AllocSetContextCreateInternal(TopTransactionContext, name, ALLOCSET_DEFAULT_SIZES);
		MemoryContextCallback *cb = (MemoryContextCallback *)MemoryContextAlloc(made, sizeof(MemoryContextCallback));
		cb->func = forget;
		cb->arg = nullptr;
		MemoryContextRegisterResetCallback(made, cb);
		*cxt = made;
	}
	return *cxt;
}

} // namespace counters
