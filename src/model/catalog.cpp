/*
 * catalog.cpp: reading and writing counters.counter and counters.maintenance.
 *
 * Reads use the latest snapshot, not the caller's: a trigger firing in a REPEATABLE READ transaction whose snapshot
 * predates a create_counter(), set_bounds() or mode switch must still see them (the writer's lock on the source was
 * granted after they committed). Writes run as the catalog's owner (the extension's owner): the catalog is readable
 * by everyone and written only here, after the callers have checked the caller's rights on every relation a row
 * names.
 *
 * The way into the catalog is register.cpp's (Register); what a dump keeps of a counter, restore.cpp's; the locks of
 * a change, lock.cpp's.
 */
#include "model/model.hpp"

extern "C" {
#include "catalog/pg_class.h"
#include "catalog/partition.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "utils/acl.h"
}

namespace counters {

namespace {

/* The integration hooks' inert defaults: what the model does where no integration is registered (Citus absent). */
Oid
NoTableOfShard(Oid)
{
	return InvalidOid;
}

const char *
LocalCatalogRelation()
{
	return "counters.counter";
}

bool
NotOnWorker()
{
	return false;
}

void
NoReplicaToSync(const char *)
{
}

void
NoOtherNodeToLock(Oid, LOCKMODE)
{
}

bool
NoFeatureRefused(const char *, Oid, const char *, bool)
{
	return false;
}

const char *
NoConversion()
{
	return nullptr;
}

} // namespace

IntegrationHooks integration_hooks = {
    NoTableOfShard,       /* table_of_shard */
    LocalCatalogRelation, /* catalog_relation */
    NotOnWorker,          /* on_worker */
    NoReplicaToSync,      /* sync_replica */
    NoOtherNodeToLock,    /* lock_on_every_node */
    NoFeatureRefused,     /* refuse_feature */
    NoConversion,         /* conversion */
};

/*
 * Whether counters.counter has column "crossings" (0.5 on): the library serves databases whose extension is not
 * updated yet (ALTER EXTENSION counters UPDATE), whose catalog has not.
 */
bool
HasCrossingsColumn()
{
	Oid nsp = get_namespace_oid("counters", true);
	Oid rel = OidIsValid(nsp) ? get_relname_relid("counter", nsp) : InvalidOid;
	return OidIsValid(rel) && get_attnum(rel, "crossings") != InvalidAttrNumber;
}

namespace {

/* The catalog's columns ReadCatalogWhere reads, FROM `from` (counters.counter, or Citus's replica) c. */
const char *
CatalogColumns(const char *from)
{
	return psprintf("c.name, c.source::pg_catalog.oid, c.target::pg_catalog.oid, c.query::pg_catalog.oid, "
	                "c.totals::pg_catalog.oid, c.log::pg_catalog.oid, c.owns_target, c.mode, c.options, %s "
	                "FROM %s c ",
	                HasCrossingsColumn() ? "c.crossings::pg_catalog.oid" : "NULL::pg_catalog.oid", from);
}

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

char *
QualifiedName(Oid relid)
{
	char *name = get_rel_name(relid);
	if (name == nullptr)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("relation with OID %u does not exist", relid)));
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), name);
}

Oid
SourceOf(Oid relid)
{
	Oid table = integration_hooks.table_of_shard(relid);
	if (OidIsValid(table))
		relid = table;
	return get_rel_relispartition(relid) ? llast_oid(get_partition_ancestors(relid)) : relid;
}

namespace {

/*
 * Catalog rows of `from` matching `condition` on parameter $1 (NULL: all), in name order, as the latest snapshot sees
 * them: the one reader of a counter's row.
 */
List *
ReadCatalogWhere(const char *from, const char *condition, Oid argtype, Datum arg, bool arg_isnull)
{
	MemoryContext caller = CurrentMemoryContext;
	SpiConnect();
	Oid argtypes[1] = {argtype};
	Datum args[1] = {arg};
	char nulls[1] = {arg_isnull ? 'n' : ' '};
	QueryLatest(
	    psprintf("SELECT %s WHERE $1 IS NULL OR %s ORDER BY c.name COLLATE \"C\"", CatalogColumns(from), condition), 1,
	    argtypes, args, nulls);
	MemoryContext old = MemoryContextSwitchTo(caller);
	List *entries = NIL;
	for (uint64 r = 0; r < SPI_processed; r++) {
		HeapTuple tup = SPI_tuptable->vals[r];
		TupleDesc desc = SPI_tuptable->tupdesc;
		Counter *e = (Counter *)palloc0(sizeof(Counter));
		e->name = TextColumn(tup, desc, 1);
		e->source = OidColumn(tup, desc, 2);
		e->target = OidColumn(tup, desc, 3);
		e->query = OidColumn(tup, desc, 4);
		e->totals = OidColumn(tup, desc, 5);
		e->log = OidColumn(tup, desc, 6);
		bool isnull;
		e->owns_target = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));
		e->mode = ParseModeName(TextColumn(tup, desc, 8));
		Datum options = SPI_getbinval(tup, desc, 9, &isnull);
		e->options = ParseOptions(options, isnull);
		e->crossings = OidColumn(tup, desc, 10);
		entries = lappend(entries, e);
	}
	MemoryContextSwitchTo(old);
	SPI_finish();
	return entries;
}

} // namespace

List *
ReadCatalog(const char *name)
{
	return ReadCatalogWhere("counters.counter", "c.name OPERATOR(pg_catalog.=) $1", TEXTOID,
	                        name ? CStringGetTextDatum(name) : (Datum)0, name == nullptr);
}

List *
ReadCatalogHere(const char *name)
{
	return ReadCatalogWhere(integration_hooks.catalog_relation(), "c.name OPERATOR(pg_catalog.=) $1", TEXTOID,
	                        name ? CStringGetTextDatum(name) : (Datum)0, name == nullptr);
}

List *
ReadCatalogOfSource(Oid source)
{
	return ReadCatalogWhere("counters.counter", "c.source OPERATOR(pg_catalog.=) $1::pg_catalog.regclass", OIDOID,
	                        ObjectIdGetDatum(source), false);
}

List *
ReadCatalogOfRelation(Oid rel)
{
	return ReadCatalogWhere("counters.counter",
	                        psprintf("$1::pg_catalog.regclass OPERATOR(pg_catalog.=) ANY (ARRAY[c.target, c.totals, "
	                                 "c.log, c.query%s])",
	                                 HasCrossingsColumn() ? ", c.crossings" : ""),
	                        OIDOID, ObjectIdGetDatum(rel), false);
}

Counter *
OwnerCounterOf(Oid rel, const char **what)
{
	ListCell *lc;
	foreach (lc, ReadCatalogOfRelation(rel)) {
		Counter *e = (Counter *)lfirst(lc);
		if (rel == e->query)
			*what = "the definition";
		else if (rel == e->log)
			*what = e->mode == Mode::Log ? "the pending deltas" : "the slots";
		else if (rel == e->totals)
			*what = "the folded values";
		else if (rel == e->crossings)
			*what = "the state of the window thresholds";
		else if (rel == e->target && e->mode != Mode::Exact)
			*what = "the values (totals and pending deltas)";
		else if (rel == e->target && e->owns_target)
			*what = "the values";
		else
			continue;
		return e;
	}
	return nullptr;
}

void
GuardCounterRelation(Oid rel, const char *command)
{
	const char *what;
	Counter *e = OwnerCounterOf(rel, &what);
	if (e == nullptr)
		return;
	const char *conversion = integration_hooks.conversion();
	if (conversion != nullptr)
		ereport(
		    ERROR,
		    (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		     errmsg("counter \"%s\": %s%s would convert its table with Citus, dropping the counter", e->name,
		            conversion, strchr(conversion, ' ') != nullptr ? "" : "()"),
		     errdetail("Citus converts a table by creating a new one in its place; %s %s holds %s of the counter, "
		               "and would be dropped with the old one.",
		               get_rel_relkind(rel) == RELKIND_VIEW ? "view" : "table", QualifiedName(rel), what),
		     errhint("Drop the counter with counters.drop_counter('%s'), convert the table, and declare the counter "
		             "again; counters.distribute() distributes a counted table with its counters.",
		             e->name)));
	ereport(ERROR, (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
	                errmsg("cannot %s %s %s: it holds %s of counter \"%s\"", command,
	                       get_rel_relkind(rel) == RELKIND_VIEW ? "view" : "table", QualifiedName(rel), what, e->name),
	                errdetail("A counter's relations go with the counter; without this one it would fail, or read zero "
	                          "while its source keeps its rows."),
	                errhint("counters.drop_counter('%s') drops the counter with its relations; counters.rebuild('%s') "
	                        "recounts it.",
	                        e->name, e->name)));
}

Counter *
LookupCounter(const char *name)
{
	/*
	 * A change of the counter that commits just after its row was read (a mode switch dropping the log) leaves a row
	 * naming relations that are gone: read it again, so that what the caller checks before taking its locks (the
	 * owner's privileges on each relation) is about relations that exist. (A counter whose relation was dropped
	 * behind the extension's back stays as it is, after a few reads.)
	 */
	for (int attempt = 0;; attempt++) {
		List *entries = ReadCatalog(name);
		if (entries == NIL)
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("counter \"%s\" does not exist", name),
			                errhint("The counters of this database are listed in counters.counters.")));
		Counter *e = (Counter *)linitial(entries);
		if (!RelationsGone(e) || attempt == 3)
			return e;
		/* (the committed change's invalidations, so that the syscache and the next read agree) */
		AcceptInvalidationMessages();
	}
}

void
CounterChanged(const char *name, Oid source)
{
	if (name != nullptr) {
		integration_hooks.sync_replica(name);
		Describe(name);
	}
	if (OidIsValid(source))
		CacheInvalidateRelcacheByRelid(source);
}

uint64
ExecuteAsCatalogOwner(const char *sql, int nargs, Oid *argtypes, Datum *values, const char *nulls, int expected,
                      bool exactly_one)
{
	OwnerScope owner;
	EnterOwner(&owner, AuthorizeCatalogOwner(), PIN_SEARCH_PATH);
	SpiConnect();
	int ret = SPI_execute_with_args(sql, nargs, argtypes, values, nulls, false, 0);
	if (ret != expected || (exactly_one && SPI_processed != 1))
		elog(ERROR, "counters: catalog update failed: %s", SPI_result_code_string(ret));
	uint64 processed = SPI_processed;
	SPI_finish();
	LeaveOwner(&owner);
	/* What the rest of this command reads of the catalog (with the latest snapshot) includes this write. */
	CommandCounterIncrement();
	return processed;
}

/*
 * What maintenance last did to a counter (counters.maintenance, shown in counters.stats): `columns` get `values` (a
 * column named "+name": the value is added to it).
 * Written without waiting for a concurrent run of the same counter that holds the row, nor for a transaction that
 * drops the counter (this run is then not recorded), and not at all in a read-only transaction (a standby, SET
 * TRANSACTION READ ONLY).
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
		/* ("+name": added to what the column holds) */
		bool add = columns[i][0] == '+';
		const char *column = quote_identifier(columns[i] + (add ? 1 : 0));
		if (add)
			appendStringInfo(&sets, "%s%s = COALESCE(m.%s, 0) OPERATOR(pg_catalog.+) $%d", i ? ", " : "", column,
			                 column, i + 2);
		else
			appendStringInfo(&sets, "%s%s = $%d", i ? ", " : "", column, i + 2);
		appendStringInfo(&names, ", %s", column);
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
	ExecuteAsCatalogOwner(
	    psprintf("INSERT INTO counters.maintenance (counter%s) SELECT k.name%s "
	             "FROM counters.counter k WHERE k.name OPERATOR(pg_catalog.=) $1 FOR KEY SHARE OF k SKIP LOCKED "
	             "ON CONFLICT (counter) DO NOTHING",
	             names.data, params.data),
	    ncolumns + 1, argtypes, args, argnulls, SPI_OK_INSERT, false);
}

/* Whether view `view` reads column `attnum` of relation `rel` (a dependency of its rule, in pg_depend). */
bool
ViewUsesColumn(Oid view, Oid rel, AttrNumber attnum)
{
	SpiConnect();
	Oid argtypes[3] = {OIDOID, OIDOID, INT4OID};
	Datum args[3] = {ObjectIdGetDatum(view), ObjectIdGetDatum(rel), Int32GetDatum(attnum)};
	QueryLatest("SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_rewrite r "
	            "ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass "
	            "AND d.objid OPERATOR(pg_catalog.=) r.oid "
	            "WHERE r.ev_class OPERATOR(pg_catalog.=) $1 "
	            "AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
	            "AND d.refobjid OPERATOR(pg_catalog.=) $2 AND d.refobjsubid OPERATOR(pg_catalog.=) $3",
	            3, argtypes, args, nullptr);
	bool found = SPI_processed > 0;
	SPI_finish();
	return found;
}

namespace {

/*
 * Views (and materialized views) other than `except` that read `rel`, as a list for a message, or nullptr. They
 * follow the relation by OID, whatever it is renamed to.
 */
char *
ViewsReading(Oid rel, Oid except)
{
	MemoryContext caller = CurrentMemoryContext;
	SpiConnect();
	Oid argtypes[2] = {OIDOID, OIDOID};
	Datum args[2] = {ObjectIdGetDatum(rel), ObjectIdGetDatum(except)};
	/* (names as the message shows them: schema-qualified) */
	int level = PinSettings(PIN_SEARCH_PATH);
	int ret = SPI_execute_with_args(
	    "SELECT pg_catalog.string_agg(DISTINCT r.ev_class::pg_catalog.regclass::pg_catalog.text, ', ') "
	    "FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_rewrite r ON r.oid OPERATOR(pg_catalog.=) d.objid "
	    "WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass "
	    "AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
	    "AND d.refobjid OPERATOR(pg_catalog.=) $1 AND r.ev_class OPERATOR(pg_catalog.<>) $1 "
	    "AND r.ev_class OPERATOR(pg_catalog.<>) $2",
	    2, argtypes, args, nullptr, false, 1);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "counters: reading pg_depend failed: %s", SPI_result_code_string(ret));
	char *views = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	char *result = views ? MemoryContextStrdup(caller, views) : nullptr;
	UnpinSettings(level);
	SPI_finish();
	return result;
}

} // namespace

char *
CheckOptionViews(Oid rel)
{
	MemoryContext caller = CurrentMemoryContext;
	SpiConnect();
	Oid argtypes[1] = {OIDOID};
	Datum args[1] = {ObjectIdGetDatum(rel)};
	/* (names as the message shows them: schema-qualified) */
	int level = PinSettings(PIN_SEARCH_PATH);
	(void)QueryLatest("WITH RECURSIVE v(oid) AS ("
	                  "  SELECT r.ev_class FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_rewrite r "
	                  "    ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass "
	                  "   AND d.objid OPERATOR(pg_catalog.=) r.oid "
	                  "   AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
	                  "   AND d.refobjid OPERATOR(pg_catalog.=) $1 AND r.ev_class OPERATOR(pg_catalog.<>) $1 "
	                  "  UNION "
	                  "  SELECT r.ev_class FROM v JOIN pg_catalog.pg_depend d "
	                  "    ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass "
	                  "   AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
	                  "   AND d.refobjid OPERATOR(pg_catalog.=) v.oid "
	                  "  JOIN pg_catalog.pg_rewrite r ON d.objid OPERATOR(pg_catalog.=) r.oid "
	                  "   AND r.ev_class OPERATOR(pg_catalog.<>) v.oid) "
	                  "SELECT pg_catalog.string_agg(c.oid::pg_catalog.regclass::pg_catalog.text, ', ' "
	                  "                             ORDER BY c.oid::pg_catalog.regclass::pg_catalog.text) "
	                  "  FROM v JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) v.oid "
	                  " WHERE c.relkind OPERATOR(pg_catalog.=) 'v' AND EXISTS (SELECT FROM "
	                  "       pg_catalog.unnest(c.reloptions) o WHERE o OPERATOR(pg_catalog.~~) 'check_option=%')",
	                  1, argtypes, args, nullptr);
	char *views = SPI_processed == 1 ? SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1) : nullptr;
	char *result = views ? MemoryContextStrdup(caller, views) : nullptr;
	UnpinSettings(level);
	SPI_finish();
	return result;
}

Datum
OidOrNull(Oid oid, char *null)
{
	*null = OidIsValid(oid) ? ' ' : 'n';
	return ObjectIdGetDatum(oid);
}

void
Unregister(const Counter *e)
{
	RequireMaintainer(e);
	Oid argtypes[1] = {TEXTOID};
	Datum args[1] = {CStringGetTextDatum(e->name)};
	ExecuteAsCatalogOwner("DELETE FROM counters.counter WHERE name OPERATOR(pg_catalog.=) $1", 1, argtypes, args,
	                      nullptr, SPI_OK_DELETE, true);
	CounterChanged(e->name, e->source);
}

Counter *
Forget(const char *name)
{
	List *entries = ReadCatalog(name);
	if (entries == NIL)
		return nullptr;
	Counter *e = (Counter *)linitial(entries);
	if (!RelationsGone(e))
		return nullptr;
	Oid argtypes[1] = {TEXTOID};
	Datum args[1] = {CStringGetTextDatum(e->name)};
	ExecuteAsCatalogOwner("DELETE FROM counters.counter WHERE name OPERATOR(pg_catalog.=) $1", 1, argtypes, args,
	                      nullptr, SPI_OK_DELETE, true);
	CounterChanged(e->name, SearchSysCacheExists1(RELOID, ObjectIdGetDatum(e->source)) ? e->source : InvalidOid);
	return e;
}

void
RequireModeAllowed(const Counter *e, Mode mode, Oid table, Oid except, const char *hint)
{
	const char *name = e->name;
	RequireModeKeeps(name, e->source, e->options, mode, table);
	if (mode == Mode::Exact)
		return;
	RequireWhole(e, psprintf("switched to %s mode", ModeName(mode)));
	RequireFeatureOf(name, e->source, e->owns_target, mode, e->target, Feature::LogShardedMode);
	RequireKindsKept(name, DefinitionOf(e), mode);
	/*
	 * Leaving exact mode renames the counter table to <name>_totals and puts a view of totals plus pending deltas
	 * under its name. A user's view over the table would follow the rename and silently miss pending deltas.
	 */
	char *views = ViewsReading(table, except);
	/* (the relation users read, and the totals: the counter table renamed, or already) */
	const char *read = get_rel_name(except);
	const char *totals = table == except ? DerivedName(get_rel_name(table), "_totals") : get_rel_name(table);
	if (views != nullptr)
		ereport(ERROR, (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
		                errmsg("counter \"%s\": views read its table: %s", name, views),
		                errdetail("Leaving exact mode renames the counter table to \"%s\" and makes \"%s\" a view of "
		                          "totals plus pending deltas; these views would go on reading the totals alone.",
		                          totals, read),
		                hint != nullptr
		                    ? errhint("%s", hint)
		                    : errhint("Drop the views, switch the mode, then create them again over \"%s\".", read)));
}

void
SetMode(const char *name, Oid target, Mode mode, Oid totals, Oid log)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	/* The relations it will name: the caller must have their owners' privileges too. */
	Oid named[3] = {target, totals, log};
	for (int i = 0; i < 3; i++)
		if (OidIsValid(named[i]))
			RequireOwnerPrivileges(name, named[i]);
	if ((mode == Mode::Exact) != (!OidIsValid(totals) && !OidIsValid(log)) || !OidIsValid(target))
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		         errmsg("counter \"%s\": log and sharded mode have totals and a log, exact mode neither", name)));
	RequireModeAllowed(e, mode, totals, target);
	Oid argtypes[5] = {TEXTOID, OIDOID, TEXTOID, OIDOID, OIDOID};
	char nulls[5] = {' ', ' ', ' ', ' ', ' '};
	Datum values[5] = {CStringGetTextDatum(name), ObjectIdGetDatum(target), CStringGetTextDatum(ModeName(mode)),
	                   OidOrNull(totals, &nulls[3]), OidOrNull(log, &nulls[4])};
	ExecuteAsCatalogOwner("UPDATE counters.counter SET target = $2::pg_catalog.regclass, mode = $3, "
	                      "totals = $4::pg_catalog.regclass, log = $5::pg_catalog.regclass "
	                      "WHERE name OPERATOR(pg_catalog.=) $1",
	                      5, argtypes, values, nulls, SPI_OK_UPDATE, true);
	CounterChanged(name, e->source);
}

void
SetOption(const char *name, const char *key, Datum value, bool isnull)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	/* (last_rebuild: written by the rebuild() of an installation not yet updated by ALTER EXTENSION UPDATE) */
	if (!IsOptionKey(key))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": unknown option %s", name, quote_literal_cstr(key))));
	Oid argtypes[3] = {TEXTOID, TEXTOID, JSONBOID};
	Datum values[3] = {CStringGetTextDatum(name), CStringGetTextDatum(key), isnull ? (Datum)0 : value};
	char nulls[3] = {' ', ' ', isnull ? 'n' : ' '};
	ExecuteAsCatalogOwner("UPDATE counters.counter SET options = CASE WHEN $3 IS NULL "
	                      "THEN options OPERATOR(pg_catalog.-) $2 "
	                      "ELSE options OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object($2, $3) END "
	                      "WHERE name OPERATOR(pg_catalog.=) $1",
	                      3, argtypes, values, nulls, SPI_OK_UPDATE, true);
	CounterChanged(name, e->source);
}

CounterOptions
LockOptions(const char *name)
{
	Oid argtypes[1] = {TEXTOID};
	Datum args[1] = {CStringGetTextDatum(name)};
	if (ExecuteAsCatalogOwner("SELECT FROM counters.counter WHERE name OPERATOR(pg_catalog.=) $1 FOR UPDATE", 1,
	                          argtypes, args, nullptr, SPI_OK_SELECT, false) == 0)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("counter \"%s\" does not exist", name)));
	return *CurrentOptions(name);
}

void
WriteOption(const char *name, const CounterOptions *o, const char *key)
{
	bool isnull;
	Datum value = OptionJsonb(o, key, &isnull);
	SetOption(name, key, value, isnull);
}

void
SetCrossings(const char *name, Oid crossings)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	if (OidIsValid(crossings))
		RequireOwnerPrivileges(name, crossings);
	Oid argtypes[2] = {TEXTOID, OIDOID};
	char nulls[2] = {' ', ' '};
	Datum values[2] = {CStringGetTextDatum(name), OidOrNull(crossings, &nulls[1])};
	ExecuteAsCatalogOwner("UPDATE counters.counter SET crossings = $2::pg_catalog.regclass "
	                      "WHERE name OPERATOR(pg_catalog.=) $1",
	                      2, argtypes, values, nulls, SPI_OK_UPDATE, true);
	Describe(name);
	CounterChanged(nullptr, e->source);
}

/* ---- what the compiled cache reads (compile.cpp) ---- */

List *
ReadCountersOf(Oid source, bool as_parent)
{
	/*
	 * The latest snapshot, not the writer's: a REPEATABLE READ writer whose snapshot predates a declaration, a mode
	 * switch or new bounds must still apply them (its lock on the source was granted after they committed), and
	 * sees counters declared earlier in its own transaction. (On a Citus worker, the replica of the catalog.)
	 */
	return ReadCatalogWhere(integration_hooks.catalog_relation(),
	                        /* (as a parent: the counters whose definition also reads it) */
	                        as_parent ? "c.source OPERATOR(pg_catalog.<>) $1 AND EXISTS (SELECT FROM "
	                                    "pg_catalog.pg_rewrite r JOIN pg_catalog.pg_depend d ON d.classid "
	                                    "OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass "
	                                    "AND d.objid OPERATOR(pg_catalog.=) r.oid WHERE r.ev_class "
	                                    "OPERATOR(pg_catalog.=) c.query AND d.refclassid OPERATOR(pg_catalog.=) "
	                                    "'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid "
	                                    "OPERATOR(pg_catalog.=) $1)"
	                                  : "c.source OPERATOR(pg_catalog.=) $1",
	                        OIDOID, ObjectIdGetDatum(source), false);
}

void
RestoreOptions(const char *name, const CounterOptions *kept, const CounterDef *def)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	CounterOptions o = FitOptions(name, kept, def, e->owns_target && e->mode == Mode::Exact);
	o.building = false;
	/* (what the counter is made of is the new definition's: a chain's levels and whole definition, as declared) */
	o.part_of = e->options->part_of;
	o.chain = e->options->chain;
	Oid argtypes[2] = {TEXTOID, JSONBOID};
	Datum args[2] = {CStringGetTextDatum(name), OptionsJsonb(&o)};
	ExecuteAsCatalogOwner("UPDATE counters.counter SET options = $2 WHERE name OPERATOR(pg_catalog.=) $1", 2, argtypes,
	                      args, nullptr, SPI_OK_UPDATE, true);
	CounterChanged(name, e->source);
}

} // namespace counters
