/*
 * functions_legacy.cpp: entry points of earlier versions' SQL (0.1 to 0.3 declared them as internal _-functions). The
 * library is installed before ALTER EXTENSION ... UPDATE runs, so a database still at an earlier version calls these
 * until it is updated; they do what their SQL expects, with this version's checks. Part of the C boundary
 * (functions.hpp).
 */
#include "functions.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
}

/* counters._describe(name, definition) (0.1 to 0.3) */
COUNTERS_FUNCTION(counters_describe)
{
	char *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	/* (parsed as the caller, who will own the counter: restricted, with its own search_path, as Declare does) */
	counters::OwnerScope scope;
	counters::EnterOwner(&scope, counters::AuthorizeCaller(), counters::PIN_CALLER_PATH);
	counters::CounterDef *def = counters::DescribeDefinition(name, text_to_cstring(PG_GETARG_TEXT_PP(1)), GetUserId());
	counters::LeaveOwner(&scope);
	InitMaterializedSRF(fcinfo, 0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
	for (int i = 0; i < def->ncolumns; i++) {
		counters::ColumnDef *col = &def->columns[i];
		Datum values[5];
		bool nulls[5] = {false, false, false, false, false};
		values[0] = ObjectIdGetDatum(def->source);
		values[1] = DirectFunctionCall1(namein, CStringGetDatum(counters::ColumnName(def, i)));
		values[2] = BoolGetDatum(col->is_key);
		if (col->is_key) {
			values[3] = CStringGetTextDatum(counters::KeyColumnType(&def->keys[col->index]));
			values[4] = BoolGetDatum(def->keys[col->index].not_null);
		} else {
			values[3] = CStringGetTextDatum(counters::StoredTypeName(&def->values[col->index]));
			values[4] = BoolGetDatum(true);
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum)0;
}

/* counters._describe_keys(query) (0.1 to 0.3) */
COUNTERS_FUNCTION(counters_describe_keys)
{
	Oid query = PG_GETARG_OID(0);
	/* (planned as the view's owner: for a caller who may act as it) */
	counters::CounterDef *def = counters::AnalyzeView(get_rel_name(query), query, counters::AuthorizeTableOwner(query));
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
	for (int i = 0; i < def->nkeys; i++) {
		Datum value = DirectFunctionCall1(namein, CStringGetDatum(def->keys[i].column_name));
		bool isnull = false;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
	}
	return (Datum)0;
}

/* counters._register(name, query, target, owns_target) (0.1 to 0.3) */
COUNTERS_FUNCTION(counters_register)
{
	const char *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid query = PG_GETARG_OID(1), target = PG_GETARG_OID(2);
	counters::Declaration d = {name,       query,      target,     PG_GETARG_BOOL(3), counters::Mode::Exact,
	                           InvalidOid, InvalidOid, InvalidOid, nullptr,           InvalidOid};
	/* (the caller's declaration: every relation the view reads and the target authorized before it is analysed) */
	List *rels = list_append_unique_oid(list_append_unique_oid(counters::ViewRelations(query), query), target);
	(void)counters::GetSourceCounters(counters::Register(
	    &d, counters::AuthorizeDeclaration(name, GetUserId(), rels, counters::RelationOwner(target))));
	PG_RETURN_OID(PG_GETARG_OID(2));
}

/* counters._unregister(name) (0.1 to 0.3): returns what the removed row named. */
COUNTERS_FUNCTION(counters_unregister)
{
	counters::Counter *e = counters::LookupCounter(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	counters::Unregister(e);
	TupleDesc desc;
	if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "counters: _unregister must return a record");
	desc = BlessTupleDesc(desc);
	Datum values[4] = {ObjectIdGetDatum(e->source), ObjectIdGetDatum(e->target), ObjectIdGetDatum(e->query),
	                   BoolGetDatum(e->owns_target)};
	bool nulls[4] = {false, false, false, false};
	return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
}

/* counters._set_mode(name, target, mode, totals, log) (0.1 to 0.3) */
COUNTERS_FUNCTION(counters_set_mode)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("counters._set_mode: arguments are null")));
	const char *mode = text_to_cstring(PG_GETARG_TEXT_PP(2));
	counters::Mode m = strcmp(mode, "log") == 0       ? counters::Mode::Log
	                   : strcmp(mode, "sharded") == 0 ? counters::Mode::Sharded
	                                                  : counters::Mode::Exact;
	counters::SetMode(text_to_cstring(PG_GETARG_TEXT_PP(0)), PG_GETARG_OID(1), m,
	                  PG_ARGISNULL(3) ? InvalidOid : PG_GETARG_OID(3), PG_ARGISNULL(4) ? InvalidOid : PG_GETARG_OID(4));
	PG_RETURN_VOID();
}

/* counters._set_option(name, key, value) (0.2, 0.3) */
COUNTERS_FUNCTION(counters_set_option)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("counters._set_option: arguments are null")));
	counters::SetOption(text_to_cstring(PG_GETARG_TEXT_PP(0)), text_to_cstring(PG_GETARG_TEXT_PP(1)),
	                    PG_GETARG_DATUM(2), PG_ARGISNULL(2));
	PG_RETURN_VOID();
}

/* counters._declare(name, definition, target, mode, caller_search_path) (0.3) */
COUNTERS_FUNCTION(counters_declare)
{
	PG_RETURN_OID(
	    counters::CreateCounter(TextArg(fcinfo, 0), TextArg(fcinfo, 1), TextArg(fcinfo, 2), TextArg(fcinfo, 3)));
}
