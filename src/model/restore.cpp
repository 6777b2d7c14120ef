/*
 * restore.cpp: what a dump keeps of a counter, and how it comes back. A schema-only dump has the definition view and
 * its comment, not the catalog's rows: Describe writes each row as that comment after every write of it, and Adopt
 * declares a counter again from it -- through Register, as the view's owner would. A catalog row inserted by anyone
 * but the catalog's owner (the restore of a dump of 0.5 or earlier, which dumped the rows) is validated as Register
 * validates (CatalogRowInserted).
 */
#include "model/model.hpp"
#include "compat.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

namespace counters {

/* The views that read a relation ($1, or the root of its partition tree) and carry a description, whoever owns them. */
#define DESCRIBED_VIEWS                                                                                                \
	"  FROM pg_catalog.pg_class v"                                                                                     \
	"  JOIN pg_catalog.pg_description d ON d.objoid OPERATOR(pg_catalog.=) v.oid"                                      \
	"   AND d.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"                              \
	"   AND d.objsubid OPERATOR(pg_catalog.=) 0"                                                                       \
	" WHERE v.relkind OPERATOR(pg_catalog.=) 'v'"                                                                      \
	"   AND d.description OPERATOR(pg_catalog.~~) 'counters: {%'"                                                      \
	"   AND EXISTS (SELECT FROM pg_catalog.pg_rewrite r"                                                               \
	"                 JOIN pg_catalog.pg_depend dep ON dep.objid OPERATOR(pg_catalog.=) r.oid"                         \
	"                  AND dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass"            \
	"                WHERE r.ev_class OPERATOR(pg_catalog.=) v.oid"                                                    \
	"                  AND dep.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"           \
	"                  AND dep.refobjid OPERATOR(pg_catalog.=)"                                                        \
	"                      COALESCE(pg_catalog.pg_partition_root($1), $1))"                                            \
	" ORDER BY v.oid"

/*
 * The catalog row of counter `name`, as the comment of its definition view: "counters: " and a JSON object of its
 * name, mode, relations (qualified names, as the catalog's search_path gives them) and options. A schema-only dump
 * (Rails' structure.sql) has the view and its comment, not the catalog's rows: the first write to the source declares
 * the counter again from it (Adopt). Written as the catalog's owner, after every write of the row.
 */
void
Describe(const char *name)
{
	if (IsBinaryUpgrade || integration_hooks.on_worker())
		return;
	OwnerScope owner;
	EnterOwner(&owner, AuthorizeCatalogOwner(), PIN_SEARCH_PATH);
	SpiConnect();
	Oid argtypes[2] = {TEXTOID, TEXTARRAYOID};
	Datum args[2] = {CStringGetTextDatum(name), OptionKeys(true)};
	int ret = SPI_execute_with_args(
	    /* (the row as JSON: the columns this installation's catalog has, relations by name; options, the user's) */
	    "SELECT pg_catalog.format('COMMENT ON VIEW %s IS %L', c.query, 'counters: ' OPERATOR(pg_catalog.||) "
	    "  pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_set(pg_catalog.to_jsonb(c) "
	    "      OPERATOR(pg_catalog.-) '{query,created_at}'::pg_catalog.text[], '{options}', "
	    "    c.options OPERATOR(pg_catalog.-) $2))::pg_catalog.text) "
	    "  FROM counters.counter c WHERE c.name OPERATOR(pg_catalog.=) $1",
	    2, argtypes, args, nullptr, false, 1);
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
	Declaration decl = {name, d->view, DescribedRelation(name, j, "target"),
	                    owns != nullptr && owns->type == jbvBool && owns->val.boolean, mode,
	                    DescribedRelation(name, j, "totals"), DescribedRelation(name, j, "log"),
	                    DescribedRelation(name, j, "crossings"),
	                    options != nullptr && options->type == jbvBinary
	                        ? ParseOptions(JsonbPGetDatum(JsonbValueToJsonb((JsonbValue *)options)), false)
	                        : nullptr,
	                    /* (which of a join's tables it counts: one the view reads, else the analysis decides) */
	                    DescribedRelation(name, j, "source")};
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

namespace {
bool AdoptQueued(Oid rel, bool wait, bool *busy);
} // namespace

bool
Described(Oid rel)
{
	int level = PinSettings(PIN_SEARCH_PATH);
	SpiConnect();
	Oid argtypes[1] = {OIDOID};
	Datum args[1] = {ObjectIdGetDatum(rel)};
	(void)QueryLatest("SELECT v.oid" DESCRIBED_VIEWS, 1, argtypes, args, nullptr);
	bool described = SPI_processed > 0;
	SPI_finish();
	UnpinSettings(level);
	return described;
}

bool
Adopt(Oid rel)
{
	bool busy;
	return AdoptQueued(rel, true, &busy);
}

bool
TryAdopt(Oid rel, bool *busy)
{
	return AdoptQueued(rel, false, busy);
}

namespace {

bool
AdoptQueued(Oid rel, bool wait, bool *busy)
{
	*busy = false;
	if (IsBinaryUpgrade || integration_hooks.on_worker())
		return false;
	/*
	 * Adopters queue here until the first commits (a lock only adopters take); then they read what it declared, with
	 * the latest snapshot, and find the names taken by their own views' counters.
	 */
	Oid queue = RangeVarGetRelid(makeRangeVar(pstrdup("counters"), pstrdup("counter"), -1), NoLock, false);
	if (wait)
		LockRelationOid(queue, ShareUpdateExclusiveLock);
	else if (!ConditionalLockRelationOid(queue, ShareUpdateExclusiveLock)) {
		*busy = true;
		return false;
	}
	/* Views that read rel (or the root of its partition tree) and carry a description, whoever owns them. */
	MemoryContext caller = CurrentMemoryContext;
	int level = PinSettings(PIN_SEARCH_PATH);
	SpiConnect();
	Oid argtypes[1] = {OIDOID};
	Datum args[1] = {ObjectIdGetDatum(rel)};
	(void)QueryLatest("SELECT v.oid, v.relowner, pg_catalog.substr(d.description, 11)" DESCRIBED_VIEWS, 1, argtypes,
	                  args, nullptr);
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

} // namespace

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
	                 ParseOptions(options, null_options),
	                 RowRelation(catalog, row, "source")};
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

} // namespace counters
