/*
 * catalog.cpp: reading and writing counters.counter and counters.maintenance.
 *
 * Reads use the latest snapshot, not the caller's: a trigger firing in a REPEATABLE READ transaction whose snapshot
 * predates a create_counter(), set_bounds() or mode switch must still see them (the writer's lock on the source was
 * granted after they committed). Writes run as the catalog's owner (the extension's owner): the catalog is readable
 * by everyone and written only here, after the callers have checked the caller's rights on every relation a row
 * names.
 */
#include "model/model.hpp"
#include "citus/citus.hpp"
#include "compat.hpp"

extern "C" {
#include "storage/lmgr.h"
#include "catalog/pg_class.h"
#include "catalog/partition.h"
#include "catalog/pg_inherits.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/resowner.h"
#include "pgstat.h"
#include "access/htup_details.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "utils/acl.h"
}

namespace counters {

namespace {

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
	Oid table = citus::TableOfShard(relid);
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
	const char *conversion = citus::Conversion();
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
		Oid rels[COUNTER_RELATIONS];
		int n = RequiredRelations(e, rels);
		bool gone = false;
		for (int i = 0; i < n; i++)
			gone |= !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(rels[i]));
		if (!gone || attempt == 3)
			return e;
		/* (the committed change's invalidations, so that the syscache and the next read agree) */
		AcceptInvalidationMessages();
	}
}

void
CounterChanged(const char *name, Oid source)
{
	if (name != nullptr) {
		citus::SyncReplica(name);
		Describe(name);
	}
	if (OidIsValid(source))
		CacheInvalidateRelcacheByRelid(source);
}

/*
 * The catalog row of counter `name`, as the comment of its definition view: "counters: " and a JSON object of its
 * name, mode, relations (qualified names, as the catalog's search_path gives them) and options. A schema-only dump
 * (Rails' structure.sql) has the view and its comment, not the catalog's rows: the first write to the source declares
 * the counter again from it (Adopt). Written as the catalog's owner, after every write of the row.
 */
void
Describe(const char *name)
{
	if (IsBinaryUpgrade || citus::OnWorker())
		return;
	OwnerScope owner;
	EnterOwner(&owner, AuthorizeCatalogOwner(), PIN_SEARCH_PATH);
	SpiConnect();
	Oid argtypes[1] = {TEXTOID};
	Datum args[1] = {CStringGetTextDatum(name)};
	int ret = SPI_execute_with_args(
	    /* (the row as JSON: the columns this installation's catalog has, relations by name) */
	    "SELECT pg_catalog.format('COMMENT ON VIEW %s IS %L', c.query, 'counters: ' OPERATOR(pg_catalog.||) "
	    "  pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_set(pg_catalog.to_jsonb(c) "
	    "      OPERATOR(pg_catalog.-) '{source,query,created_at}'::pg_catalog.text[], '{options}', "
	    "    c.options OPERATOR(pg_catalog.-) '{building,last_rebuild}'::pg_catalog.text[]))::pg_catalog.text) "
	    "  FROM counters.counter c WHERE c.name OPERATOR(pg_catalog.=) $1",
	    1, argtypes, args, nullptr, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: describing counter \"%s\" failed: %s", name, SPI_result_code_string(ret));
	if (SPI_processed == 1) {
		char *comment = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		if (SPI_execute(comment, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "counters: describing counter \"%s\" failed", name);
	}
	SPI_finish();
	LeaveOwner(&owner);
}

namespace {

/* A description, "counters: {...}", as found on a view (Adopt). */
struct Description {
	Oid view;
	Oid view_owner;
	char *text; /* the JSON object */
	bool adopted;
};

/* A field of a description's object: a string, a boolean, an object (NULL, or false: absent or of another type). */
const JsonbValue *
DescribedField(Jsonb *j, const char *key)
{
	JsonbValue *out = (JsonbValue *)palloc(sizeof(JsonbValue));
	return getKeyJsonValueFromContainer(&j->root, key, (uint32)strlen(key), out);
}

const char *
DescribedString(Jsonb *j, const char *key)
{
	const JsonbValue *v = DescribedField(j, key);
	return v != nullptr && v->type == jbvString ? pnstrdup(v->val.string.val, v->val.string.len) : nullptr;
}

/* A relation a description names, qualified as Describe wrote it, resolved with nothing but pg_catalog on the path. */
Oid
DescribedRelation(const char *counter, Jsonb *j, const char *key)
{
	const char *name = DescribedString(j, key);
	if (name == nullptr)
		return InvalidOid;
	int level = PinSettings(PIN_SEARCH_PATH);
	Oid rel = RangeVarGetRelid(makeRangeVarFromNameList(compat::QualifiedNameList(name)), NoLock, true);
	UnpinSettings(level);
	if (!OidIsValid(rel))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
		                errmsg("counter \"%s\": its %s %s does not exist", counter, key, name)));
	return rel;
}

/* One description declared, as its view's owner would declare it, or an error (Adopt turns it into a WARNING). */
void
AdoptOne(void *arg)
{
	Description *d = (Description *)arg;
	/* (the text is data: its JSON is parsed here, in C, where a malformed one fails only this description) */
	Jsonb *j = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(d->text)));
	if (!JB_ROOT_IS_OBJECT(j))
		ereport(ERROR, (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION), errmsg("it is not a JSON object")));
	const char *name = DescribedString(j, "name");
	CheckCounterName(name);
	List *existing = ReadCatalog(name);
	if (existing != NIL) {
		/* (its own counter: declared by a concurrent adopter, or by the restore's CREATE TRIGGER) */
		if (((Counter *)linitial(existing))->query == d->view)
			return;
		ereport(ERROR,
		        (errcode(ERRCODE_DUPLICATE_OBJECT), errmsg("counter \"%s\" exists, over %s", name,
		                                                   QualifiedName(((Counter *)linitial(existing))->source))));
	}
	Mode mode;
	const char *mode_name = DescribedString(j, "mode");
	if (!LookupModeName(mode_name, &mode))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": unknown mode %s", name, mode_name ? mode_name : "(none)")));
	const JsonbValue *owns = DescribedField(j, "owns_target");
	const JsonbValue *options = DescribedField(j, "options");
	Declaration decl = {name,
	                    d->view,
	                    DescribedRelation(name, j, "target"),
	                    owns != nullptr && owns->type == jbvBool && owns->val.boolean,
	                    mode,
	                    DescribedRelation(name, j, "totals"),
	                    DescribedRelation(name, j, "log"),
	                    DescribedRelation(name, j, "crossings"),
	                    options != nullptr && options->type == jbvBinary
	                        ? ParseOptions(JsonbPGetDatum(JsonbValueToJsonb((JsonbValue *)options)), false)
	                        : nullptr};
	if (!OidIsValid(decl.target))
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_OBJECT_DEFINITION), errmsg("counter \"%s\": it names no target", name)));
	/*
	 * Authorized as the view's owner: it has the privileges of the owner of every relation the view reads and the
	 * description names, and of the counter's owner; checked before the view is analysed (Register checks them again).
	 */
	List *rels = ViewRelations(d->view);
	Oid named[5] = {d->view, decl.target, decl.totals, decl.log, decl.crossings};
	for (int i = 0; i < 5; i++)
		if (OidIsValid(named[i]))
			rels = list_append_unique_oid(rels, named[i]);
	(void)Register(&decl, AuthorizeDeclaration(name, d->view_owner, rels, OwnerOfTable(decl.target, decl.totals)));
	d->adopted = true;
	ereport(NOTICE, (errmsg("counter \"%s\" was declared again from the description of its definition view %s", name,
	                        QualifiedName(d->view)),
	                 errdetail("Its catalog row was not restored (the catalog's rows are not dumped).")));
}

} // namespace

bool
Adopt(Oid rel)
{
	if (IsBinaryUpgrade || citus::OnWorker())
		return false;
	/*
	 * Adopters queue here until the first commits (a lock only adopters take); then they read what it declared, with
	 * the latest snapshot, and find the names taken by their own views' counters.
	 */
	LockRelationOid(RangeVarGetRelid(makeRangeVar(pstrdup("counters"), pstrdup("counter"), -1), NoLock, false),
	                ShareUpdateExclusiveLock);
	/* Views that read rel (or the root of its partition tree) and carry a description, whoever owns them. */
	MemoryContext caller = CurrentMemoryContext;
	int level = PinSettings(PIN_SEARCH_PATH);
	SpiConnect();
	Oid argtypes[1] = {OIDOID};
	Datum args[1] = {ObjectIdGetDatum(rel)};
	(void)QueryLatest(
	    "SELECT v.oid, v.relowner, pg_catalog.substr(d.description, 11)"
	    "  FROM pg_catalog.pg_class v"
	    "  JOIN pg_catalog.pg_description d ON d.objoid OPERATOR(pg_catalog.=) v.oid"
	    "   AND d.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
	    "   AND d.objsubid OPERATOR(pg_catalog.=) 0"
	    " WHERE v.relkind OPERATOR(pg_catalog.=) 'v'"
	    "   AND d.description OPERATOR(pg_catalog.~~) 'counters: {%'"
	    "   AND EXISTS (SELECT FROM pg_catalog.pg_rewrite r"
	    "                 JOIN pg_catalog.pg_depend dep ON dep.objid OPERATOR(pg_catalog.=) r.oid"
	    "                  AND dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass"
	    "                WHERE r.ev_class OPERATOR(pg_catalog.=) v.oid"
	    "                  AND dep.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
	    "                  AND dep.refobjid OPERATOR(pg_catalog.=)"
	    "                      COALESCE(pg_catalog.pg_partition_root($1), $1))"
	    " ORDER BY v.oid",
	    1, argtypes, args, nullptr);
	int n = (int)SPI_processed;
	Description *found = (Description *)MemoryContextAllocZero(caller, sizeof(Description) * Max(n, 1));
	for (int i = 0; i < n; i++) {
		HeapTuple tup = SPI_tuptable->vals[i];
		bool isnull;
		found[i].view = DatumGetObjectId(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
		found[i].view_owner = DatumGetObjectId(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull));
		found[i].text = MemoryContextStrdup(caller, SPI_getvalue(tup, SPI_tuptable->tupdesc, 3));
	}
	SPI_finish();
	UnpinSettings(level);
	bool adopted = false;
	for (int i = 0; i < n; i++) {
		ErrorData *error = TrySubtransaction(AdoptOne, &found[i]);
		adopted |= found[i].adopted;
		if (error != nullptr)
			ereport(
			    WARNING,
			    (errcode(error->sqlerrcode),
			     errmsg("the description of view %s, owned by %s, is not honoured: %s", QualifiedName(found[i].view),
			            quote_identifier(GetUserNameFromId(found[i].view_owner, false)), error->message),
			     errdetail("A comment \"counters: {...}\" on a view describes a counter a dump did not restore; it "
			               "is declared again only as the view's owner could declare it."),
			     errhint("Declare the counter with counters.create_counter(), or remove the comment (COMMENT ON "
			             "VIEW %s IS NULL).",
			             QualifiedName(found[i].view))));
	}
	/* (what the caller compiles next sees the counters declared) */
	CommandCounterIncrement();
	return adopted;
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

namespace {

/*
 * A counter kept in columns of an existing table updates the row whose key columns equal the counter's key. A key
 * column of another type than the definition's key (varchar(3) for text, integer for bigint) would compare after a
 * conversion that folds different keys into one row, or fails: the types must be the same (a domain counts as its
 * base type; a narrower typmod is fine, the comparison does not convert).
 */
void
CheckTargetKeyTypes(const CounterDef *def, Oid target)
{
	for (int k = 0; k < def->nkeys; k++) {
		const KeyDef *key = &def->keys[k];
		AttrNumber attnum = get_attnum(target, key->column_name);
		if (attnum == InvalidAttrNumber)
			continue; /* (reported with the other missing columns) */
		Oid type;
		int32 typmod;
		Oid collation;
		get_atttypetypmodcoll(target, attnum, &type, &typmod, &collation);
		if (getBaseType(type) != getBaseType(key->type))
			ereport(ERROR,
			        (errcode(ERRCODE_DATATYPE_MISMATCH),
			         errmsg("counter \"%s\": key column \"%s\" of %s has type %s, the definition's key has type %s",
			                def->name, key->column_name, QualifiedName(target), format_type_with_typemod(type, typmod),
			                format_type_be(key->type)),
			         errdetail("Keys are compared without conversion, so that no two keys fold into one row."),
			         errhint("Cast the key in the definition to the column's type, e.g. %s::%s AS %s.",
			                 quote_identifier(key->column_name), format_type_be(getBaseType(type)),
			                 quote_identifier(key->column_name))));
	}
}

} // namespace

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

namespace {

Datum
OidOrNull(Oid oid, char *null)
{
	*null = OidIsValid(oid) ? ' ' : 'n';
	return ObjectIdGetDatum(oid);
}

} // namespace

void
CheckCounterName(const char *name)
{
	if (name == nullptr)
		ereport(ERROR, (errcode(ERRCODE_INVALID_NAME), errmsg("invalid counter name NULL"),
		                errdetail("A counter name has 1 to %d bytes.", COUNTER_NAME_MAX_BYTES)));
	/* The definition view is named <name>_definition, an identifier of at most NAMEDATALEN - 1 bytes. */
	if (strlen(name) == 0 || strlen(name) > COUNTER_NAME_MAX_BYTES)
		ereport(ERROR, (errcode(ERRCODE_INVALID_NAME), errmsg("invalid counter name %s", quote_literal_cstr(name)),
		                errdetail("A counter name has 1 to %d bytes (this one has %zu): its tables and views are "
		                          "named after it.",
		                          COUNTER_NAME_MAX_BYTES, strlen(name))));
}

namespace {

struct KeyColumns {
	int n;
	AttrNumber *attnums;
};

/* A unique index on exactly the columns `arg` (KeyColumns) names, in any order, without expressions. */
bool
UniqueOnColumns(HeapTuple tup, const void *arg)
{
	const KeyColumns *keys = (const KeyColumns *)arg;
	Form_pg_index index = (Form_pg_index)GETSTRUCT(tup);
	bool ok = index->indisunique && index->indnatts == keys->n && heap_attisnull(tup, Anum_pg_index_indexprs, nullptr);
	for (int k = 0; ok && k < keys->n; k++) {
		bool in_index = false;
		for (int j = 0; j < index->indnatts; j++)
			in_index |= index->indkey.values[j] == keys->attnums[k];
		ok = in_index;
	}
	return ok;
}

/*
 * An existing table that keeps a counter's columns must have the definition's columns, values of integer or numeric
 * types, and keys of the definition's key types (its unique key: RequireTargetKey).
 */
void
CheckExistingTarget(const char *name, const CounterDef *def, Oid target)
{
	StringInfoData missing;
	initStringInfo(&missing);
	for (int i = 0; i < def->ncolumns; i++) {
		const char *column = ColumnName(def, i);
		if (get_attnum(target, column) == InvalidAttrNumber)
			appendStringInfo(&missing, "%s%s", missing.len ? ", " : "", quote_identifier(column));
	}
	if (missing.len > 0)
		ereport(ERROR,
		        (errcode(ERRCODE_UNDEFINED_COLUMN),
		         errmsg("counter \"%s\": target table %s has no column %s", name, QualifiedName(target), missing.data),
		         errhint("The key and value aliases of the definition must name columns of the target table.")));
	for (int v = 0; v < def->nvalues; v++) {
		AttrNumber attnum = get_attnum(target, def->values[v].column_name);
		Oid type;
		int32 typmod;
		Oid collation;
		get_atttypetypmodcoll(target, attnum, &type, &typmod, &collation);
		if (type != INT2OID && type != INT4OID && type != INT8OID && type != NUMERICOID)
			appendStringInfo(&missing, "%s%s (%s)", missing.len ? ", " : "",
			                 quote_identifier(def->values[v].column_name), format_type_with_typemod(type, typmod));
	}
	if (missing.len > 0)
		ereport(ERROR,
		        (errcode(ERRCODE_DATATYPE_MISMATCH),
		         errmsg("counter \"%s\": target column %s is not of an integer or numeric type", name, missing.data)));
	CheckTargetKeyTypes(def, target);
}

} // namespace

void
RequireTargetKey(const char *name, const CounterDef *def, Oid target)
{
	/* a valid unique index, without predicate or expressions, on exactly the key columns */
	KeyColumns keys = {def->nkeys, (AttrNumber *)palloc(sizeof(AttrNumber) * def->nkeys)};
	for (int k = 0; k < def->nkeys; k++)
		keys.attnums[k] = get_attnum(target, def->keys[k].column_name);
	if (!AnyIndexOf(target, UniqueOnColumns, &keys))
		ereport(ERROR, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
		                errmsg("counter \"%s\": key columns (%s) are not a unique key of target table %s", name,
		                       KeyNames(def), QualifiedName(target)),
		                errhint("Create a unique index or primary key on exactly the key columns.")));
}

namespace {

/* 42809 naming the counter unless relation `rel` (what it is to the counter: `what`) is one of the kinds given. */
void
RequireKind(const char *name, Oid rel, const char *what, char kind, char other = '\0')
{
	char relkind = get_rel_relkind(rel);
	if (relkind == '\0')
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
		                errmsg("counter \"%s\": its %s, relation %u, does not exist", name, what, rel)));
	if (relkind != kind && (other == '\0' || relkind != other))
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
		                errmsg("counter \"%s\": its %s %s is not a %s", name, what, QualifiedName(rel),
		                       kind == RELKIND_VIEW ? "view" : "table")));
}

bool
IsValueColumn(const CounterDef *def, const char *column)
{
	for (int v = 0; v < def->nvalues; v++)
		if (strcmp(def->values[v].column_name, column) == 0)
			return true;
	return false;
}

bool
IsKeyColumn(const CounterDef *def, const char *column)
{
	for (int k = 0; k < def->nkeys; k++)
		if (strcmp(def->keys[k].column_name, column) == 0)
			return true;
	return false;
}

/*
 * Options `kept` as definition `def` can keep them: bounds and thresholds of value columns it has, a retention of a
 * key column it has, a window over a key and value columns it has (window_ok: an exact counter with a table of its
 * own), touch, keep_zero and max_slots; what the counter's own state was (building, last_rebuild) goes. What did not
 * survive is said, in a NOTICE naming the counter.
 */
CounterOptions
FitOptions(const char *name, const CounterOptions *kept, const CounterDef *def, bool window_ok)
{
	CounterOptions o = *kept;
	List *dropped = NIL;
	ColumnBounds *bounds = (ColumnBounds *)palloc0(sizeof(ColumnBounds) * Max(o.nbounds, 1));
	int nbounds = 0;
	for (int i = 0; i < o.nbounds; i++)
		if (IsValueColumn(def, o.bounds[i].column))
			bounds[nbounds++] = o.bounds[i];
		else
			dropped = lappend(dropped, psprintf("bounds of column %s: the definition has no such column",
			                                    quote_identifier(o.bounds[i].column)));
	ColumnThresholds *thresholds = (ColumnThresholds *)palloc0(sizeof(ColumnThresholds) * Max(o.nthresholds, 1));
	int nthresholds = 0;
	for (int i = 0; i < o.nthresholds; i++)
		if (IsValueColumn(def, o.thresholds[i].column))
			thresholds[nthresholds++] = o.thresholds[i];
		else
			dropped = lappend(dropped, psprintf("thresholds of column %s: the definition has no such column",
			                                    quote_identifier(o.thresholds[i].column)));
	o.bounds = bounds;
	o.nbounds = nbounds;
	o.thresholds = thresholds;
	o.nthresholds = nthresholds;
	if (o.retention_column != nullptr && !IsKeyColumn(def, o.retention_column)) {
		dropped = lappend(dropped, psprintf("the retention of key %s: the definition has no such key",
		                                    quote_identifier(o.retention_column)));
		o.retention_column = nullptr;
	}
	if (o.window != nullptr) {
		bool keep = window_ok && o.window->bucket != nullptr && IsKeyColumn(def, o.window->bucket);
		for (int i = 0; keep && i < o.window->ncolumns; i++)
			keep = IsValueColumn(def, o.window->columns[i].column);
		if (!keep) {
			dropped = lappend(dropped, pstrdup("window thresholds: set them again with "
			                                   "counters.set_window_thresholds()"));
			o.window = nullptr;
		}
	}
	ListCell *lc;
	foreach (lc, dropped)
		ereport(NOTICE, (errmsg("counter \"%s\": dropped its %s", name, (const char *)lfirst(lc))));
	return o;
}

/*
 * What Register checks of a declaration, and what it writes: `auth` is for the owner of the table that holds its
 * values, and its principal has the privileges of the owner of every relation the row names (the view's rule read
 * before the view is analysed); the relations have the mode's kinds and the definition's columns; the options, typed,
 * are written back by the C writer. Returns the analysed definition and the options to write.
 */
CounterDef *
Validate(const Declaration *d, const Authorization &auth, Datum *options)
{
	const char *name = d->name;
	CheckCounterName(name);
	bool exact = d->mode == Mode::Exact;
	if (!OidIsValid(d->query) || !OidIsValid(d->target) || exact != (!OidIsValid(d->totals) && !OidIsValid(d->log)))
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
		         errmsg("counter \"%s\": log and sharded mode have totals and a log, exact mode neither", name)));
	if (!exact && !d->owns)
		ereport(ERROR, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
		                errmsg("counter \"%s\": counter-cache columns of an existing table are kept in exact mode only",
		                       name)));
	RequireKind(name, d->query, "definition", RELKIND_VIEW);
	if (exact)
		RequireKind(name, d->target, "table", RELKIND_RELATION, d->owns ? '\0' : RELKIND_PARTITIONED_TABLE);
	else {
		RequireKind(name, d->target, "view of totals and pending deltas", RELKIND_VIEW);
		RequireKind(name, d->totals, "totals", RELKIND_RELATION);
		RequireKind(name, d->log, d->mode == Mode::Log ? "log" : "slots", RELKIND_RELATION);
	}
	if (OidIsValid(d->crossings))
		RequireKind(name, d->crossings, "window state", RELKIND_RELATION);
	/* Whose code it runs: the owner of its values' table, whom the authorization must be for. */
	Oid owner = OwnerOfTable(d->target, d->totals);
	if (auth.role() != owner || !OidIsValid(auth.principal()))
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("counter \"%s\": not authorized for its owner %s", name,
		                       quote_identifier(GetUserNameFromId(owner, false)))));
	/* Every relation the row names, the view's own rule's first: checked before the view is analysed. */
	List *rels = ViewRelations(d->query);
	Oid named[5] = {d->query, d->target, d->totals, d->log, d->crossings};
	for (int i = 0; i < 5; i++)
		if (OidIsValid(named[i]))
			rels = list_append_unique_oid(rels, named[i]);
	ListCell *lc;
	foreach (lc, rels) {
		RequireOwnerPrivileges(name, lfirst_oid(lc), auth.principal());
		RequireOwnerRights(name, lfirst_oid(lc), owner);
	}
	CounterDef *def = AnalyzeView(name, d->query, auth);
	if (!list_member_oid(rels, def->source) || (OidIsValid(def->parent) && !list_member_oid(rels, def->parent)))
		elog(ERROR, "counters: counter \"%s\": its definition reads a relation its view's rule does not name", name);
	/* The tables keep the definition's columns. */
	const char **names;
	if (!d->owns)
		CheckExistingTarget(name, def, d->target);
	else {
		ColumnsByPosition(def, exact ? d->target : d->totals, &names, nullptr);
		if (!exact)
			ColumnsByPosition(def, d->target, &names, nullptr);
	}
	CounterOptions none = *ParseOptions((Datum)0, true);
	CounterOptions o = FitOptions(name, d->options != nullptr ? d->options : &none, def, exact && d->owns);
	if (o.invalid != nullptr)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": its options are invalid: %s", name, o.invalid)));
	o.building = false;
	*options = OptionsJsonb(&o);
	return def;
}

} // namespace

Oid
Register(const Declaration *d, const Authorization &auth)
{
	Datum options;
	CounterDef *def = Validate(d, auth, &options);
	/* (a catalog of 0.4, not updated yet, has no column for the window state) */
	bool crossings = HasCrossingsColumn();
	if (OidIsValid(d->crossings) && !crossings)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("counter \"%s\": window thresholds need the extension updated", d->name),
		                errhint("ALTER EXTENSION counters UPDATE")));
	Oid argtypes[10] = {TEXTOID, OIDOID, OIDOID, OIDOID, BOOLOID, TEXTOID, OIDOID, OIDOID, JSONBOID, OIDOID};
	char nulls[10] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Datum values[10] = {
	    CStringGetTextDatum(d->name),      ObjectIdGetDatum(def->source), ObjectIdGetDatum(d->target),
	    ObjectIdGetDatum(d->query),        BoolGetDatum(d->owns),         CStringGetTextDatum(ModeName(d->mode)),
	    OidOrNull(d->totals, &nulls[6]),   OidOrNull(d->log, &nulls[7]),  options,
	    OidOrNull(d->crossings, &nulls[9])};
	ExecuteAsCatalogOwner(crossings
	                          ? "INSERT INTO counters.counter (name, source, target, query, owns_target, mode, "
	                            "totals, log, options, crossings) VALUES ($1, $2::pg_catalog.regclass, "
	                            "$3::pg_catalog.regclass, $4::pg_catalog.regclass, $5, $6, $7::pg_catalog.regclass, "
	                            "$8::pg_catalog.regclass, $9, $10::pg_catalog.regclass)"
	                          : "INSERT INTO counters.counter (name, source, target, query, owns_target, mode, "
	                            "totals, log, options) VALUES ($1, $2::pg_catalog.regclass, "
	                            "$3::pg_catalog.regclass, $4::pg_catalog.regclass, $5, $6, $7::pg_catalog.regclass, "
	                            "$8::pg_catalog.regclass, $9)",
	                      crossings ? 10 : 9, argtypes, values, nulls, SPI_OK_INSERT, true);
	CounterChanged(d->name, def->source);
	if (OidIsValid(def->parent))
		CacheInvalidateRelcacheByRelid(def->parent);
	CommandCounterIncrement();
	return def->source;
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
	Oid rels[COUNTER_RELATIONS];
	int n = RequiredRelations(e, rels);
	bool broken = false;
	for (int i = 0; i < n; i++)
		broken |= !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(rels[i]));
	if (!broken)
		return nullptr;
	Oid argtypes[1] = {TEXTOID};
	Datum args[1] = {CStringGetTextDatum(e->name)};
	ExecuteAsCatalogOwner("DELETE FROM counters.counter WHERE name OPERATOR(pg_catalog.=) $1", 1, argtypes, args,
	                      nullptr, SPI_OK_DELETE, true);
	CounterChanged(e->name, SearchSysCacheExists1(RELOID, ObjectIdGetDatum(e->source)) ? e->source : InvalidOid);
	return e;
}

void
RequireModeAllowed(const char *name, Oid source, Mode mode, Oid table, Oid except)
{
	if (mode == Mode::Exact)
		return;
	citus::RefuseFeature(name, source, "log and sharded mode");
	const CounterOptions *options = CurrentOptions(name);
	if (options->nbounds > 0)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\" has bounds, which only exact mode can check at write time", name),
		                errhint("Remove them first with counters.set_bounds(name, column_name).")));
	if (options->window != nullptr)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\" has window thresholds, which only exact mode checks", name),
		                errdetail("The window sums are read from the counter's rows after each write."),
		                errhint("Remove them first with counters.set_window_thresholds(name, column_name, '{}').")));
	if (options->keep_zero)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\" keeps rows whose values are all zero, which only exact mode does", name),
		                errhint("Remove it first with counters.set_keep_zero(name, false).")));
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
		                errhint("Drop the views, switch the mode, then create them again over \"%s\".", read)));
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
	if (mode != Mode::Exact)
		RequireModeAllowed(name, e->source, mode, totals, target);
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
	if (strcmp(key, "bounds") != 0 && strcmp(key, "thresholds") != 0 && strcmp(key, "max_slots") != 0 &&
	    strcmp(key, "retention") != 0 && strcmp(key, "touch") != 0 && strcmp(key, "last_rebuild") != 0 &&
	    strcmp(key, "building") != 0 && strcmp(key, "keep_zero") != 0 && strcmp(key, "window") != 0)
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

namespace {

/* Column `column` of a row of the catalog (isnull: NULL, or no such column in this installation's catalog). */
Datum
RowColumn(Relation catalog, HeapTuple row, const char *column, bool *isnull)
{
	AttrNumber attnum = get_attnum(RelationGetRelid(catalog), column);
	if (attnum == InvalidAttrNumber) {
		*isnull = true;
		return (Datum)0;
	}
	return heap_getattr(row, attnum, RelationGetDescr(catalog), isnull);
}

Oid
RowRelation(Relation catalog, HeapTuple row, const char *column)
{
	bool isnull;
	Datum d = RowColumn(catalog, row, column, &isnull);
	return isnull ? InvalidOid : DatumGetObjectId(d);
}

} // namespace

HeapTuple
CatalogRowInserted(TriggerData *td)
{
	HeapTuple row = td->tg_trigtuple;
	if (!TRIGGER_FIRED_BEFORE(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event) ||
	    !TRIGGER_FIRED_BY_INSERT(td->tg_event))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("counters._catalog_row() must fire before insert, for each row")));
	Relation catalog = td->tg_relation;
	/* (Register's own insert: as the catalog's owner, in the scope AuthorizeCatalogOwner gave it) */
	if (GetUserId() == catalog->rd_rel->relowner && InSecurityRestrictedOperation())
		return row;
	/*
	 * Anyone else's -- only a superuser may insert (a restore of a dump made by 0.5 or earlier, which dumped the rows,
	 * or a row typed by hand) -- is a declaration like any other: validated as Register validates, as the inserting
	 * role, its options written back in their typed form.
	 */
	bool null_name, null_mode, null_owns, null_options;
	Datum name = RowColumn(catalog, row, "name", &null_name);
	Datum mode = RowColumn(catalog, row, "mode", &null_mode);
	Mode parsed = Mode::Exact;
	if (!null_mode && !LookupModeName(TextDatumGetCString(mode), &parsed))
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("unknown mode %s", TextDatumGetCString(mode))));
	Datum owns = RowColumn(catalog, row, "owns_target", &null_owns);
	Datum options = RowColumn(catalog, row, "options", &null_options);
	Declaration d = {null_name ? nullptr : TextDatumGetCString(name),
	                 RowRelation(catalog, row, "query"),
	                 RowRelation(catalog, row, "target"),
	                 !null_owns && DatumGetBool(owns),
	                 parsed,
	                 RowRelation(catalog, row, "totals"),
	                 RowRelation(catalog, row, "log"),
	                 RowRelation(catalog, row, "crossings"),
	                 ParseOptions(options, null_options)};
	CheckCounterName(d.name);
	Oid named[5] = {d.query, d.target, d.totals, d.log, d.crossings};
	for (int i = 0; i < 5; i++)
		if (OidIsValid(named[i]) && !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(named[i])))
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
			                errmsg("counter \"%s\": relation %u does not exist", d.name, named[i])));
	List *rels = OidIsValid(d.query) && get_rel_relkind(d.query) == RELKIND_VIEW ? ViewRelations(d.query) : NIL;
	for (int i = 0; i < 5; i++)
		if (OidIsValid(named[i]))
			rels = list_append_unique_oid(rels, named[i]);
	Authorization auth = AuthorizeDeclaration(d.name, GetUserId(), rels,
	                                          OidIsValid(d.target) ? OwnerOfTable(d.target, d.totals) : GetUserId());
	Datum written;
	CounterDef *def = Validate(&d, auth, &written);
	if (RowRelation(catalog, row, "source") != def->source)
		ereport(ERROR, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
		                errmsg("counter \"%s\": its source is not the table its definition counts, %s", d.name,
		                       QualifiedName(def->source))));
	TupleDesc desc = RelationGetDescr(catalog);
	Datum *values = (Datum *)palloc0(sizeof(Datum) * desc->natts);
	bool *nulls = (bool *)palloc0(sizeof(bool) * desc->natts);
	bool *replace = (bool *)palloc0(sizeof(bool) * desc->natts);
	AttrNumber attnum = get_attnum(RelationGetRelid(catalog), "options");
	values[attnum - 1] = written;
	replace[attnum - 1] = true;
	CacheInvalidateRelcacheByRelid(def->source);
	return heap_modify_tuple(row, desc, values, nulls, replace);
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
	return ReadCatalogWhere(citus::CatalogRelation(),
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
LockSource(Oid source, LOCKMODE mode)
{
	LockRelationOid(source, mode);
	(void)find_all_inheritors(source, mode, nullptr); /* (the partitions: it locks all but the one given) */
	citus::LockOnEveryNode(source, mode);
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

void
RestoreOptions(const char *name, const CounterOptions *kept, const CounterDef *def)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	CounterOptions o = FitOptions(name, kept, def, ApplyModeOf(e) == ApplyMode::Exact);
	o.building = false;
	Oid argtypes[2] = {TEXTOID, JSONBOID};
	Datum args[2] = {CStringGetTextDatum(name), OptionsJsonb(&o)};
	ExecuteAsCatalogOwner("UPDATE counters.counter SET options = $2 WHERE name OPERATOR(pg_catalog.=) $1", 2, argtypes,
	                      args, nullptr, SPI_OK_UPDATE, true);
	CounterChanged(name, e->source);
}

} // namespace counters
