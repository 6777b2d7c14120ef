/*
 * spi.cpp: how this code base talks to SPI -- connecting, reading with the latest snapshot, and refusing to start
 * what needs its locks before its snapshot in a transaction that already has one.
 */
#include "model/model.hpp"

extern "C" {
#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
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
