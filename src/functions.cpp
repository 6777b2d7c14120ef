/*
 * functions.cpp: the C boundary. Every SQL-callable function of the extension is defined here with
 * COUNTERS_FUNCTION, which gives it C linkage and runs its body inside a guard that turns any C++ exception into a
 * PostgreSQL ERROR (after the exception has been fully handled, so no longjmp starts inside a catch block).
 */
#include <exception>

#include "counters.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "catalog/partition.h"
#include "catalog/pg_inherits.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/syscache.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "rewrite/rewriteHandler.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

PG_MODULE_MAGIC;
PGDLLEXPORT void _PG_init(void);
}

namespace counters {
namespace {

using Body = Datum (*)(FunctionCallInfo);

Datum
CallGuarded(Body body, FunctionCallInfo fcinfo)
{
	static char message[256];
	try {
		return body(fcinfo);
	} catch (const std::exception &e) {
		strlcpy(message, e.what(), sizeof(message));
	} catch (...) {
		strlcpy(message, "unknown C++ exception", sizeof(message));
	}
	ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("counters: %s", message)));
	pg_unreachable();
}

} // namespace
} // namespace counters

#define COUNTERS_FUNCTION(name)                                                                                        \
	extern "C" {                                                                                                       \
	PGDLLEXPORT PG_FUNCTION_INFO_V1(name);                                                                             \
	}                                                                                                                  \
	static Datum name##_body(FunctionCallInfo fcinfo);                                                                 \
	extern "C" Datum name(PG_FUNCTION_ARGS)                                                                            \
	{                                                                                                                  \
		return counters::CallGuarded(name##_body, fcinfo);                                                             \
	}                                                                                                                  \
	static Datum name##_body(FunctionCallInfo fcinfo)

namespace {

char *
CollationName(Oid collation)
{
	HeapTuple tup = SearchSysCache1(COLLOID, ObjectIdGetDatum(collation));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for collation %u", collation);
	Form_pg_collation form = (Form_pg_collation)GETSTRUCT(tup);
	char *name = quote_qualified_identifier(get_namespace_name(form->collnamespace), NameStr(form->collname));
	ReleaseSysCache(tup);
	return name;
}

struct DefinitionContext {
	const char *name;
	const char *definition;
};

void
DefinitionErrorContext(void *arg)
{
	DefinitionContext *dc = (DefinitionContext *)arg;
	int position = geterrposition();
	if (position > 0) {
		errposition(0);
		internalerrposition(position);
		internalerrquery(dc->definition);
	}
	errcontext("definition of counter \"%s\"", dc->name);
}

} // namespace

extern "C" void
_PG_init(void)
{
	DefineCustomIntVariable("counters.statement_memory",
	                        "Memory for the summed deltas of one statement before they are applied in a batch.",
	                        "A statement that touches more keys applies its deltas in several sorted batches.",
	                        &counters::statement_memory_kb, 65536, 64, MAX_KILOBYTES, PGC_USERSET, GUC_UNIT_KB, nullptr,
	                        nullptr, nullptr);
	counters::InitWorkers();
	MarkGUCPrefixReserved("counters");
	counters::InitCache();
	counters::InitCapture();
}

/* counters.capture(): the generic statement-level trigger. */
COUNTERS_FUNCTION(counters_capture)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("counters.capture() must be called as a trigger")));
	TriggerData *td = (TriggerData *)fcinfo->context;
	TriggerEvent ev = td->tg_event;
	if (!TRIGGER_FIRED_FOR_STATEMENT(ev))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("counters.capture() must be fired FOR EACH STATEMENT"),
		                errhint("Re-create the triggers with counters.attach().")));

	counters::Capture(td);
	return PointerGetDatum(nullptr);
}

/* counters._describe(name, definition): parse and analyse a definition, describe the counter table's columns. */
COUNTERS_FUNCTION(counters_describe)
{
	char *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char *definition = text_to_cstring(PG_GETARG_TEXT_PP(1));

	/* Syntax and name errors point into the definition text, not into the statement that called us. */
	DefinitionContext dc = {name, definition};
	ErrorContextCallback context;
	context.callback = DefinitionErrorContext;
	context.arg = &dc;
	context.previous = error_context_stack;
	error_context_stack = &context;
	List *raw = raw_parser(definition, RAW_PARSE_DEFAULT);
	if (list_length(raw) != 1)
		ereport(ERROR, (errcode(ERRCODE_SYNTAX_ERROR),
		                errmsg("counter \"%s\": the definition must be exactly one SELECT statement", name)));
	RawStmt *stmt = linitial_node(RawStmt, raw);
	if (!IsA(stmt->stmt, SelectStmt) || ((SelectStmt *)stmt->stmt)->intoClause != nullptr)
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
		                errmsg("counter \"%s\": the definition must be a SELECT statement", name)));
#if PG_VERSION_NUM >= 150000
	Query *query = parse_analyze_fixedparams(stmt, definition, nullptr, 0, nullptr);
#else
	Query *query = parse_analyze(stmt, definition, nullptr, 0, nullptr);
#endif
	error_context_stack = context.previous;
	counters::CounterDef *def = counters::AnalyzeDefinition(name, query, nullptr);

	InitMaterializedSRF(fcinfo, 0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
	for (int i = 0; i < def->ncolumns; i++) {
		counters::ColumnDef *col = &def->columns[i];
		Datum values[5];
		bool nulls[5] = {false, false, false, false, false};
		values[0] = ObjectIdGetDatum(def->source);
		if (col->is_key) {
			counters::KeyDef *key = &def->keys[col->index];
			values[1] = CStringGetDatum(key->column_name);
			/* The key column groups like the definition's GROUP BY: same type and collation. */
			StringInfoData type;
			initStringInfo(&type);
			appendStringInfoString(&type, format_type_extended(key->type, key->typmod,
			                                                   FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
			if (OidIsValid(key->collation) && key->collation != get_typcollation(key->type))
				appendStringInfo(&type, " COLLATE %s", CollationName(key->collation));
			values[3] = CStringGetTextDatum(type.data);
			values[4] = BoolGetDatum(key->not_null);
		} else {
			counters::ValueDef *value = &def->values[col->index];
			values[1] = CStringGetDatum(value->column_name);
			values[3] = CStringGetTextDatum(value->accum == counters::AccumKind::Int64 ? "bigint" : "numeric");
			values[4] = BoolGetDatum(true);
		}
		values[1] = DirectFunctionCall1(namein, values[1]);
		values[2] = BoolGetDatum(col->is_key);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum)0;
}

namespace {

/*
 * A counter kept in columns of an existing table updates the row whose key columns equal the counter's key. A key
 * column of another type than the definition's key (varchar(3) for text, integer for bigint) would compare after a
 * conversion that folds different keys into one row, or fails: the types must be the same (a domain counts as its
 * base type; a narrower typmod is fine, the comparison does not convert).
 */
void
CheckTargetKeyTypes(const counters::CounterDef *def, Oid target)
{
	for (int k = 0; k < def->nkeys; k++) {
		const counters::KeyDef *key = &def->keys[k];
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
			                def->name, key->column_name, counters::QualifiedName(target),
			                format_type_with_typemod(type, typmod), format_type_be(key->type)),
			         errdetail("Keys are compared without conversion, so that no two keys fold into one row."),
			         errhint("Cast the key in the definition to the column's type, e.g. %s::%s AS %s.",
			                 quote_identifier(key->column_name), format_type_be(getBaseType(type)),
			                 quote_identifier(key->column_name))));
	}
}

Datum
CatalogEntryOids(const counters::CatalogEntry *e, FunctionCallInfo fcinfo)
{
	TupleDesc desc;
	if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "counters: the function must return a record");
	desc = BlessTupleDesc(desc);
	Datum values[4] = {ObjectIdGetDatum(e->source), ObjectIdGetDatum(e->target), ObjectIdGetDatum(e->query),
	                   BoolGetDatum(e->owns_target)};
	bool nulls[4] = {false, false, false, false};
	return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
}

char *
TextArg(FunctionCallInfo fcinfo, int n)
{
	return PG_ARGISNULL(n) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(n));
}

} // namespace

/*
 * counters._register(name, query, target, owns_target): record a counter (the caller must have the privileges of the
 * owners of its source, view and target), compile it once, invalidate caches.
 */
COUNTERS_FUNCTION(counters_register)
{
	text *name = PG_GETARG_TEXT_PP(0);
	Oid query = PG_GETARG_OID(1);
	Oid target = PG_GETARG_OID(2);
	bool owns = PG_GETARG_BOOL(3);
	char *cname = text_to_cstring(name);

	counters::CounterDef *def = counters::AnalyzeView(cname, query);
	counters::RequireOwnerPrivileges(cname, def->source);
	counters::RequireOwnerPrivileges(cname, target);
	counters::RequireOwnerPrivileges(cname, query);
	if (!owns)
		CheckTargetKeyTypes(def, target);

	Oid argtypes[5] = {TEXTOID, OIDOID, OIDOID, OIDOID, BOOLOID};
	Datum values[5] = {PointerGetDatum(name), ObjectIdGetDatum(def->source), ObjectIdGetDatum(target),
	                   ObjectIdGetDatum(query), BoolGetDatum(owns)};
	counters::ExecuteAsCatalogOwner(
	    "INSERT INTO counters.counter (name, source, target, query, owns_target) "
	    "VALUES ($1, $2::pg_catalog.regclass, $3::pg_catalog.regclass, $4::pg_catalog.regclass, $5)",
	    5, argtypes, values, nullptr, SPI_OK_INSERT, true);
	CacheInvalidateRelcacheByRelid(def->source);
	CommandCounterIncrement();
	/* Compile now: anything the trigger could not run fails the declaration, not a later write. */
	(void)counters::GetSourceCounters(def->source);
	PG_RETURN_OID(target);
}

/* counters._unregister(name): remove a counter's catalog row (owner's privileges required); returns what it named. */
COUNTERS_FUNCTION(counters_unregister)
{
	counters::CatalogEntry *e = counters::LookupCounter(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	counters::RequireMaintainer(e);
	Oid argtypes[1] = {TEXTOID};
	Datum args[1] = {CStringGetTextDatum(e->name)};
	counters::ExecuteAsCatalogOwner("DELETE FROM counters.counter WHERE name OPERATOR(pg_catalog.=) $1", 1, argtypes,
	                                args, nullptr, SPI_OK_DELETE, true);
	CacheInvalidateRelcacheByRelid(e->source);
	return CatalogEntryOids(e, fcinfo);
}

/*
 * counters._forget(name): remove the catalog row of a counter one of whose relations no longer exists (the sql_drop
 * event trigger calls it after DROP TABLE or DROP VIEW ... CASCADE). Anyone may: such a counter cannot count any
 * more, and nothing else is touched. Returns what the row named (NULL if there is no such counter, or it is whole).
 */
COUNTERS_FUNCTION(counters_forget)
{
	List *entries = counters::ReadCatalog(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	if (entries == NIL)
		PG_RETURN_NULL();
	counters::CatalogEntry *e = (counters::CatalogEntry *)linitial(entries);
	Oid rels[5] = {e->source, e->target, e->query, e->totals, e->log};
	bool broken = false;
	for (int i = 0; i < 5; i++)
		broken |= OidIsValid(rels[i]) && !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(rels[i]));
	if (!broken)
		PG_RETURN_NULL();
	Oid argtypes[1] = {TEXTOID};
	Datum args[1] = {CStringGetTextDatum(e->name)};
	counters::ExecuteAsCatalogOwner("DELETE FROM counters.counter WHERE name OPERATOR(pg_catalog.=) $1", 1, argtypes,
	                                args, nullptr, SPI_OK_DELETE, true);
	if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(e->source)))
		CacheInvalidateRelcacheByRelid(e->source);
	return CatalogEntryOids(e, fcinfo);
}

/*
 * counters._require_owner(name): raise 42704 if the counter does not exist and 42501 unless the caller has the
 * privileges of the owner of every relation it reads and writes. The PL/pgSQL functions that change a counter call it
 * first.
 */
COUNTERS_FUNCTION(counters_require_owner)
{
	counters::RequireMaintainer(counters::LookupCounter(text_to_cstring(PG_GETARG_TEXT_PP(0))));
	PG_RETURN_VOID();
}

/* counters.verify(name): every stored value that differs from its definition. */
COUNTERS_FUNCTION(counters_verify)
{
	counters::Verify(TextArg(fcinfo, 0), fcinfo);
	return (Datum)0;
}

/* counters.rebuild(name, condition): make stored counters equal to their definitions. */
COUNTERS_FUNCTION(counters_rebuild)
{
	PG_RETURN_INT64(counters::Rebuild(TextArg(fcinfo, 0), TextArg(fcinfo, 1)));
}

/* counters.compact(name): fold log rows and idle slots into the totals, then apply retentions. */
COUNTERS_FUNCTION(counters_compact)
{
	PG_RETURN_INT64(counters::Compact(TextArg(fcinfo, 0)));
}

/* counters.apply_retention(name): delete expired buckets. */
COUNTERS_FUNCTION(counters_apply_retention)
{
	PG_RETURN_INT64(counters::ApplyRetention(TextArg(fcinfo, 0)));
}

/* counters._on_ddl_start(): the ddl_command_start event trigger (ddl.cpp). */
COUNTERS_FUNCTION(counters_on_ddl_start)
{
	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("counters._on_ddl_start() must be called as an event trigger")));
	counters::OnDdlStart((EventTriggerData *)fcinfo->context);
	PG_RETURN_VOID();
}

/* counters._describe_keys(query): the key column names of a counter's definition view. */
COUNTERS_FUNCTION(counters_describe_keys)
{
	Oid query = PG_GETARG_OID(0);
	counters::CounterDef *def = counters::AnalyzeView(get_rel_name(query), query);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
	for (int i = 0; i < def->nkeys; i++) {
		Datum value = DirectFunctionCall1(namein, CStringGetDatum(def->keys[i].column_name));
		bool isnull = false;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
	}
	return (Datum)0;
}

/* Whether a counter has bounds or thresholds (counters.set_bounds, counters.set_thresholds). */
static bool
HasBounds(text *name)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "counters: SPI_connect failed");
	Oid argtypes[1] = {TEXTOID};
	Datum args[1] = {PointerGetDatum(name)};
	int ret = SPI_execute_with_args("SELECT 1 FROM counters.counter WHERE name OPERATOR(pg_catalog.=) $1 "
	                                "AND options OPERATOR(pg_catalog.?|) '{bounds,thresholds}'::pg_catalog.text[]",
	                                1, argtypes, args, nullptr, false, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: reading the catalog failed: %s", SPI_result_code_string(ret));
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
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "counters: SPI_connect failed");
	Oid argtypes[2] = {OIDOID, OIDOID};
	Datum args[2] = {ObjectIdGetDatum(rel), ObjectIdGetDatum(except)};
	int ret = SPI_execute_with_args(
	    "SELECT pg_catalog.string_agg(DISTINCT r.ev_class::pg_catalog.regclass::pg_catalog.text, ', ') "
	    "FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_rewrite r ON r.oid OPERATOR(pg_catalog.=) d.objid "
	    "WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass "
	    "AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
	    "AND d.refobjid OPERATOR(pg_catalog.=) $1 AND r.ev_class OPERATOR(pg_catalog.<>) $1 "
	    "AND r.ev_class OPERATOR(pg_catalog.<>) $2",
	    2, argtypes, args, nullptr, true, 1);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "counters: reading pg_depend failed: %s", SPI_result_code_string(ret));
	char *views = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	char *result = views ? MemoryContextStrdup(caller, views) : nullptr;
	SPI_finish();
	return result;
}

} // namespace

/* counters._set_mode(name, target, mode, totals, log): record a counter's mode and relations (see alter_counter). */
COUNTERS_FUNCTION(counters_set_mode)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("counters._set_mode: arguments are null")));
	text *name = PG_GETARG_TEXT_PP(0);
	char *cname = text_to_cstring(name);
	counters::CatalogEntry *e = counters::LookupCounter(cname);
	Oid source = e->source;
	counters::RequireMaintainer(e);
	/* The relations it will name: the caller must have their owners' privileges too. */
	for (int arg = 1; arg <= 4; arg += (arg == 1 ? 2 : 1))
		if (!PG_ARGISNULL(arg))
			counters::RequireOwnerPrivileges(cname, PG_GETARG_OID(arg));
	const char *mode = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (strcmp(mode, "exact") != 0 && strcmp(mode, "log") != 0 && strcmp(mode, "sharded") != 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": unknown mode %s", cname, quote_literal_cstr(mode))));
	if ((strcmp(mode, "exact") == 0) != (PG_ARGISNULL(3) && PG_ARGISNULL(4)))
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		         errmsg("counter \"%s\": log and sharded mode have totals and a log, exact mode neither", cname)));
	if (strcmp(mode, "exact") != 0 && HasBounds(name))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\" has bounds or thresholds, which only exact mode can check at write time",
		                       cname),
		                errhint("Remove them first with counters.set_bounds(name, column_name) or "
		                        "counters.set_thresholds(name, column_name, '{}').")));
	/*
	 * Leaving exact mode renames the counter table to <name>_totals and puts a view of totals plus pending deltas
	 * under its name. A user's view over the table would follow the rename and silently miss pending deltas.
	 */
	if (!PG_ARGISNULL(3)) {
		char *views = ViewsReading(PG_GETARG_OID(3), PG_GETARG_OID(1));
		if (views != nullptr)
			ereport(ERROR,
			        (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			         errmsg("counter \"%s\": views read its table: %s", cname, views),
			         errdetail("Leaving exact mode renames the counter table to \"%s\" and makes \"%s\" a view of "
			                   "totals plus pending deltas; these views would go on reading the totals alone.",
			                   get_rel_name(PG_GETARG_OID(3)), get_rel_name(PG_GETARG_OID(1))),
			         errhint("Drop the views, switch the mode, then create them again over \"%s\".",
			                 get_rel_name(PG_GETARG_OID(1)))));
	}
	Oid argtypes[5] = {TEXTOID, OIDOID, TEXTOID, OIDOID, OIDOID};
	Datum values[5] = {PointerGetDatum(name), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2),
	                   PG_ARGISNULL(3) ? (Datum)0 : PG_GETARG_DATUM(3),
	                   PG_ARGISNULL(4) ? (Datum)0 : PG_GETARG_DATUM(4)};
	char nulls[5] = {' ', ' ', ' ', PG_ARGISNULL(3) ? 'n' : ' ', PG_ARGISNULL(4) ? 'n' : ' '};
	counters::ExecuteAsCatalogOwner("UPDATE counters.counter SET target = $2::pg_catalog.regclass, mode = $3, "
	                                "totals = $4::pg_catalog.regclass, log = $5::pg_catalog.regclass "
	                                "WHERE name OPERATOR(pg_catalog.=) $1",
	                                5, argtypes, values, nulls, SPI_OK_UPDATE, true);
	CacheInvalidateRelcacheByRelid(source);
	PG_RETURN_VOID();
}

/*
 * counters._set_option(name, key, value jsonb): set (or, with a NULL value, remove) one entry of a counter's options
 * (bounds, thresholds), ownership checked, caches invalidated. The callers validate the value.
 */
COUNTERS_FUNCTION(counters_set_option)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("counters._set_option: arguments are null")));
	text *name = PG_GETARG_TEXT_PP(0);
	char *cname = text_to_cstring(name);
	counters::CatalogEntry *e = counters::LookupCounter(cname);
	Oid source = e->source;
	counters::RequireMaintainer(e);
	const char *key = text_to_cstring(PG_GETARG_TEXT_PP(1));
	/* (last_rebuild: written by 0.3's rebuild(), which runs with this library until ALTER EXTENSION UPDATE) */
	if (strcmp(key, "bounds") != 0 && strcmp(key, "thresholds") != 0 && strcmp(key, "max_slots") != 0 &&
	    strcmp(key, "retention") != 0 && strcmp(key, "last_rebuild") != 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": unknown option %s", cname, quote_literal_cstr(key))));
	Oid argtypes[3] = {TEXTOID, TEXTOID, JSONBOID};
	Datum values[3] = {PointerGetDatum(name), PG_GETARG_DATUM(1), PG_ARGISNULL(2) ? (Datum)0 : PG_GETARG_DATUM(2)};
	char nulls[3] = {' ', ' ', PG_ARGISNULL(2) ? 'n' : ' '};
	counters::ExecuteAsCatalogOwner("UPDATE counters.counter SET options = CASE WHEN $3 IS NULL "
	                                "THEN options OPERATOR(pg_catalog.-) $2 "
	                                "ELSE options OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object($2, $3) END "
	                                "WHERE name OPERATOR(pg_catalog.=) $1",
	                                3, argtypes, values, nulls, SPI_OK_UPDATE, true);
	CacheInvalidateRelcacheByRelid(source);
	PG_RETURN_VOID();
}

/*
 * counters._declare(name, definition, target, mode, caller_search_path): what create_counter() does (0.3). Runs the
 * declaration steps (_create_counter, then alter_counter for the mode) and makes sure every error they raise names
 * the counter: errors of PostgreSQL's own (CREATE TABLE of an existing name, a definition failing on the data during
 * the initial fill) get the counter's name put before their message; SQLSTATE, detail, hint and context are kept.
 */
COUNTERS_FUNCTION(counters_declare)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR, (errcode(ERRCODE_INVALID_NAME), errmsg("invalid counter name NULL"),
		                errdetail("A counter name has 1 to %d bytes.", COUNTER_NAME_MAX_BYTES)));
	char *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	/* The definition view is named <name>_definition, an identifier of at most NAMEDATALEN - 1 bytes. */
	if (strlen(name) == 0 || strlen(name) > COUNTER_NAME_MAX_BYTES)
		ereport(ERROR, (errcode(ERRCODE_INVALID_NAME), errmsg("invalid counter name %s", quote_literal_cstr(name)),
		                errdetail("A counter name has 1 to %d bytes (this one has %zu): its tables and views are "
		                          "named after it.",
		                          COUNTER_NAME_MAX_BYTES, strlen(name))));
	const char *named = psprintf("counter \"%s\"", name);

	Oid argtypes[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum args[4];
	char nulls[4];
	for (int i = 0; i < 4; i++) {
		int arg = i < 3 ? i : 4; /* name, definition, target, caller_search_path */
		nulls[i] = PG_ARGISNULL(arg) ? 'n' : ' ';
		args[i] = PG_ARGISNULL(arg) ? (Datum)0 : PG_GETARG_DATUM(arg);
	}
	Datum mode_args[2] = {args[0], PG_ARGISNULL(3) ? (Datum)0 : PG_GETARG_DATUM(3)};
	char mode_nulls[2] = {' ', PG_ARGISNULL(3) ? 'n' : ' '};

	volatile Oid target = InvalidOid;
	MemoryContext caller = CurrentMemoryContext;
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "counters: SPI_connect failed");
		int ret = SPI_execute_with_args("SELECT counters._create_counter($1, $2, $3, $4)", 4, argtypes, args, nulls,
		                                false, 1);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "counters: _create_counter failed: %s", SPI_result_code_string(ret));
		ret = SPI_execute_with_args("SELECT counters.alter_counter($1, mode => $2)", 2, argtypes, mode_args, mode_nulls,
		                            false, 1);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "counters: alter_counter failed: %s", SPI_result_code_string(ret));
		/* What the caller reads: the counter table, or in log and sharded mode the view over totals and deltas. */
		ret = SPI_execute_with_args("SELECT k.target::pg_catalog.oid FROM counters.counter k "
		                            "WHERE k.name OPERATOR(pg_catalog.=) $1",
		                            1, argtypes, args, nullptr, false, 1);
		if (ret != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "counters: reading the catalog failed: %s", SPI_result_code_string(ret));
		bool isnull;
		target = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		/* A target in pg_temp (named so, or the caller's temporary table) would vanish with the session. */
		if (get_rel_persistence(target) == RELPERSISTENCE_TEMP)
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			                errmsg("counter \"%s\": target \"%s\" is a temporary table", name, get_rel_name(target)),
			                errdetail("A counter is declared for every session; a temporary table belongs to one.")));
		SPI_finish();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(caller);
		ErrorData *edata = CopyErrorData();
		if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_OPERATOR_INTERVENTION && edata->message != nullptr &&
		    strstr(edata->message, named) == nullptr) {
			FlushErrorState();
			edata->message = psprintf("%s: %s", named, edata->message);
			ReThrowError(edata);
		}
		PG_RE_THROW();
	}
	PG_END_TRY();
	PG_RETURN_OID(target);
}
