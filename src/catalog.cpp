/*
 * catalog.cpp: reading and writing counters.counter and counters.maintenance.
 *
 * Reads use the latest snapshot, not the caller's: a trigger firing in a REPEATABLE READ transaction whose snapshot
 * predates a create_counter(), set_bounds() or mode switch must still see them (the writer's lock on the source was
 * granted after they committed). Writes run as the catalog's owner (the extension's owner): the catalog is readable
 * by everyone and written only here, after the callers have checked the caller's rights on every relation a row
 * names.
 */
#include "counters.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/namespace.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
}

namespace counters {

namespace {

const char *const catalog_columns =
    "c.name, c.source::pg_catalog.oid, c.target::pg_catalog.oid, c.query::pg_catalog.oid, "
    "c.totals::pg_catalog.oid, c.log::pg_catalog.oid, c.owns_target, c.mode, "
    "c.options OPERATOR(pg_catalog.->) 'retention' OPERATOR(pg_catalog.->>) 'column', "
    "c.options OPERATOR(pg_catalog.->) 'retention' OPERATOR(pg_catalog.->>) 'keep' "
    "FROM counters.counter c ";

Oid
OidColumn(HeapTuple tup, TupleDesc desc, int col)
{
	bool isnull;
	Datum d = SPI_getbinval(tup, desc, col, &isnull);
	return isnull ? InvalidOid : DatumGetObjectId(d);
}

char *
TextColumn(HeapTuple tup, TupleDesc desc, int col)
{
	bool isnull;
	Datum d = SPI_getbinval(tup, desc, col, &isnull);
	return isnull ? nullptr : TextDatumGetCString(d);
}

} // namespace

int
QueryLatest(const char *sql, int nargs, Oid *argtypes, Datum *values, const char *nulls)
{
	SPIPlanPtr plan = SPI_prepare(sql, nargs, argtypes);
	if (plan == nullptr)
		elog(ERROR, "counters: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
	int ret = SPI_execute_snapshot(plan, values, nulls, snapshot, InvalidSnapshot, true, false, 0);
	UnregisterSnapshot(snapshot);
	SPI_freeplan(plan);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: reading the catalog failed: %s", SPI_result_code_string(ret));
	return ret;
}

List *
ReadCatalog(const char *name)
{
	MemoryContext caller = CurrentMemoryContext;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "counters: SPI_connect failed");
	Oid argtypes[1] = {TEXTOID};
	Datum args[1] = {name ? CStringGetTextDatum(name) : (Datum)0};
	char nulls[1] = {name ? ' ' : 'n'};
	QueryLatest(psprintf("SELECT %s WHERE $1 IS NULL OR c.name OPERATOR(pg_catalog.=) $1 ORDER BY c.name COLLATE \"C\"",
	                     catalog_columns),
	            1, argtypes, args, nulls);
	MemoryContext old = MemoryContextSwitchTo(caller);
	List *entries = NIL;
	for (uint64 r = 0; r < SPI_processed; r++) {
		HeapTuple tup = SPI_tuptable->vals[r];
		TupleDesc desc = SPI_tuptable->tupdesc;
		CatalogEntry *e = (CatalogEntry *)palloc0(sizeof(CatalogEntry));
		e->name = TextColumn(tup, desc, 1);
		e->source = OidColumn(tup, desc, 2);
		e->target = OidColumn(tup, desc, 3);
		e->query = OidColumn(tup, desc, 4);
		e->totals = OidColumn(tup, desc, 5);
		e->log = OidColumn(tup, desc, 6);
		bool isnull;
		e->owns_target = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));
		char *mode = TextColumn(tup, desc, 8);
		e->mode = strcmp(mode, "log") == 0 ? Mode::Log : strcmp(mode, "sharded") == 0 ? Mode::Sharded : Mode::Exact;
		e->retention_column = TextColumn(tup, desc, 9);
		e->retention_keep = TextColumn(tup, desc, 10);
		entries = lappend(entries, e);
	}
	MemoryContextSwitchTo(old);
	SPI_finish();
	return entries;
}

CatalogEntry *
LookupCounter(const char *name)
{
	List *entries = ReadCatalog(name);
	if (entries == NIL)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("counter \"%s\" does not exist", name),
		                errhint("The counters of this database are listed in counters.counters.")));
	return (CatalogEntry *)linitial(entries);
}

const char *
ModeName(Mode mode)
{
	switch (mode) {
	case Mode::Log:
		return "log";
	case Mode::Sharded:
		return "sharded";
	default:
		return "exact";
	}
}

uint64
ExecuteAsCatalogOwner(const char *sql, int nargs, Oid *argtypes, Datum *values, const char *nulls, int expected,
                      bool exactly_one)
{
	Oid catalog = RangeVarGetRelid(makeRangeVar(pstrdup("counters"), pstrdup("counter"), -1), AccessShareLock, false);
	AsOwner owner;
	BecomeOwner(&owner, RelationOwner(catalog));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "counters: SPI_connect failed");
	int ret = SPI_execute_with_args(sql, nargs, argtypes, values, nulls, false, 0);
	if (ret != expected || (exactly_one && SPI_processed != 1))
		elog(ERROR, "counters: catalog update failed: %s", SPI_result_code_string(ret));
	uint64 processed = SPI_processed;
	SPI_finish();
	RestoreUser(&owner);
	return processed;
}

/*
 * What maintenance last did to a counter (counters.maintenance, shown in counters.stats): `columns` get `values`.
 * Written without waiting for a concurrent run of the same counter that holds the row (this run is then not
 * recorded), and not at all in a read-only transaction (a standby, SET TRANSACTION READ ONLY).
 */
void
NoteMaintenance(const char *name, int ncolumns, const char **columns, Oid *types, Datum *values, const char *nulls)
{
	if (XactReadOnly)
		return;
	Oid argtypes[8];
	Datum args[8];
	char argnulls[8];
	Assert(ncolumns < 8);
	argtypes[0] = TEXTOID;
	args[0] = CStringGetTextDatum(name);
	argnulls[0] = ' ';
	StringInfoData sets, names, params;
	initStringInfo(&sets);
	initStringInfo(&names);
	initStringInfo(&params);
	for (int i = 0; i < ncolumns; i++) {
		argtypes[i + 1] = types[i];
		args[i + 1] = values[i];
		argnulls[i + 1] = nulls ? nulls[i] : ' ';
		appendStringInfo(&sets, "%s%s = $%d", i ? ", " : "", quote_identifier(columns[i]), i + 2);
		appendStringInfo(&names, ", %s", quote_identifier(columns[i]));
		appendStringInfo(&params, ", $%d", i + 2);
	}
	uint64 updated =
	    ExecuteAsCatalogOwner(psprintf("UPDATE counters.maintenance m SET %s WHERE m.ctid OPERATOR(pg_catalog.=) "
	                                   "(SELECT x.ctid FROM counters.maintenance x "
	                                   "  WHERE x.counter OPERATOR(pg_catalog.=) $1 FOR UPDATE SKIP LOCKED)",
	                                   sets.data),
	                          ncolumns + 1, argtypes, args, argnulls, SPI_OK_UPDATE, false);
	if (updated > 0)
		return;
	ExecuteAsCatalogOwner(psprintf("INSERT INTO counters.maintenance (counter%s) SELECT k.name%s "
	                               "FROM counters.counter k WHERE k.name OPERATOR(pg_catalog.=) $1 "
	                               "ON CONFLICT (counter) DO NOTHING",
	                               names.data, params.data),
	                      ncolumns + 1, argtypes, args, argnulls, SPI_OK_INSERT, false);
}

} // namespace counters
