/*
 * functions.cpp: the C boundary. Every SQL-callable function of the extension is defined here with
 * COUNTERS_FUNCTION, which gives it C linkage; each body only takes its arguments apart and calls the module that
 * does the work. The code base is compiled without exceptions and RTTI (see CONTRIBUTING.md), so nothing but
 * PostgreSQL's own errors can leave a body.
 */
#include "functions.hpp"
#include "citus/citus.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "funcapi.h"
#include "nodes/parsenodes.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

PG_MODULE_MAGIC;
PGDLLEXPORT void _PG_init(void);
}

namespace {

/* A text argument that must be given, or an error naming the function. */
char *
RequiredTextArg(FunctionCallInfo fcinfo, int n, const char *what)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not be null", what)));
	return text_to_cstring(PG_GETARG_TEXT_PP(n));
}

void
RequireEventTrigger(FunctionCallInfo fcinfo, const char *name)
{
	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("%s must be called as an event trigger", name)));
}

/* The trigger's data, or an error if `name` was not called as a trigger. */
TriggerData *
RequireTrigger(FunctionCallInfo fcinfo, const char *name)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
		        (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED), errmsg("%s must be called as a trigger", name)));
	return (TriggerData *)fcinfo->context;
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
	DefineCustomBoolVariable("counters.suspend",
	                         "Suspends the counting of this session's writes, for a data load by the counters' owner.",
	                         "For pg_restore --data-only into a database whose counters hold the restored values: only "
	                         "a role with the privileges of each counter's owner may suspend it; each suspended write "
	                         "is noted, and shown by counters.stats and verify().",
	                         &counters::counting_suspended, false, PGC_USERSET, 0, nullptr, nullptr, nullptr);
	static const struct config_enum_entry apply_settings[] = {{"default", counters::APPLY_DEFAULT, false},
	                                                          {"deferred", counters::APPLY_DEFERRED, false},
	                                                          {"immediate", counters::APPLY_IMMEDIATE, false},
	                                                          {nullptr, 0, false}};
	DefineCustomEnumVariable("counters.apply", "When this session's writes are applied to counters.",
	                         "default: each counter as set (counters.set_deferred); deferred: every counter at commit; "
	                         "immediate: every counter at the end of each statement. Like SET CONSTRAINTS, usually SET "
	                         "LOCAL in a transaction; switching to immediate applies what was deferred.",
	                         &counters::apply_setting, counters::APPLY_DEFAULT, apply_settings, PGC_USERSET, 0, nullptr,
	                         nullptr, nullptr);
	counters::InitWorkers();
	counters::InitStats();
	counters::InitMaintenance();
	MarkGUCPrefixReserved("counters");
	counters::InitCache();
	counters::InitCapture();
	counters::InitDdl();
	counters::citus::Init();
}

/* counters.capture(): the generic statement-level trigger, and the row trigger of sinks. */
COUNTERS_FUNCTION(counters_capture)
{
	return PointerGetDatum(counters::Fire(RequireTrigger(fcinfo, "counters.capture()")));
}

/* counters.create_counter(name, definition, target, mode): declare a counter; returns the relation to read. */
COUNTERS_FUNCTION(counters_create_counter)
{
	PG_RETURN_OID(
	    counters::CreateCounter(TextArg(fcinfo, 0), TextArg(fcinfo, 1), TextArg(fcinfo, 2), TextArg(fcinfo, 3)));
}

namespace {

/* A procedure that commits between its steps: CALLed outside a transaction block, then SPI connected non-atomic. */
void
BeginSteps(FunctionCallInfo fcinfo, const char *what)
{
	if (fcinfo->context == nullptr || !IsA(fcinfo->context, CallContext) || ((CallContext *)fcinfo->context)->atomic)
		ereport(ERROR,
		        (errcode(ERRCODE_ACTIVE_SQL_TRANSACTION), errmsg("%s cannot run inside a transaction block", what),
		         errdetail("It commits after each of its steps, so that writers are not blocked meanwhile."),
		         errhint("CALL it on its own, outside BEGIN ... COMMIT and not from a function.")));
	if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
		elog(ERROR, "counters: SPI_connect failed");
}

} // namespace

/* CALL counters.create_counter_concurrently(name, definition, mode) */
COUNTERS_FUNCTION(counters_create_counter_concurrently)
{
	BeginSteps(fcinfo, "counters.create_counter_concurrently()");
	counters::CreateCounterConcurrently(TextArg(fcinfo, 0), RequiredTextArg(fcinfo, 1, "the definition"),
	                                    TextArg(fcinfo, 2));
	SPI_finish();
	PG_RETURN_VOID();
}

/* CALL counters.alter_counter_concurrently(name, definition) */
COUNTERS_FUNCTION(counters_alter_counter_concurrently)
{
	BeginSteps(fcinfo, "counters.alter_counter_concurrently()");
	counters::AlterCounterConcurrently(RequiredTextArg(fcinfo, 0, "the counter name"),
	                                   RequiredTextArg(fcinfo, 1, "the definition"));
	SPI_finish();
	PG_RETURN_VOID();
}

/* CALL counters.rebuild_concurrently(name) */
COUNTERS_FUNCTION(counters_rebuild_concurrently)
{
	BeginSteps(fcinfo, "counters.rebuild_concurrently()");
	counters::RebuildConcurrently(RequiredTextArg(fcinfo, 0, "the counter name"));
	SPI_finish();
	PG_RETURN_VOID();
}

/* counters.alter_counter(name, mode, max_slots, definition) */
COUNTERS_FUNCTION(counters_alter_counter)
{
	const char *name = RequiredTextArg(fcinfo, 0, "the counter name");
	const char *mode = TextArg(fcinfo, 1);
	int max_slots = PG_ARGISNULL(2) ? -1 : PG_GETARG_INT32(2);
	/* (0.4's alter_counter(name, mode, max_slots) has no definition argument) */
	const char *definition = PG_NARGS() > 3 ? TextArg(fcinfo, 3) : nullptr;
	if (definition == nullptr && mode == nullptr && max_slots == -1)
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
		                errmsg("counter \"%s\": alter_counter() needs a mode, max_slots or a definition", name)));
	if (definition != nullptr) {
		counters::AlterDefinition(name, definition, mode);
		if (max_slots == -1)
			PG_RETURN_VOID();
		mode = nullptr;
	}
	counters::AlterCounter(name, mode, max_slots);
	PG_RETURN_VOID();
}

/* counters.drop_counter(name) */
COUNTERS_FUNCTION(counters_drop_counter)
{
	counters::DropCounter(RequiredTextArg(fcinfo, 0, "the counter name"));
	PG_RETURN_VOID();
}

/* counters.attach(source), counters.detach(source): the capture triggers. */
COUNTERS_FUNCTION(counters_attach)
{
	counters::AttachCounted(PG_GETARG_OID(0));
	PG_RETURN_VOID();
}

COUNTERS_FUNCTION(counters_detach)
{
	counters::Detach(PG_GETARG_OID(0));
	PG_RETURN_VOID();
}

/* counters.distribute(source, column) */
COUNTERS_FUNCTION(counters_distribute)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("counters.distribute() takes no NULL argument")));
	counters::citus::Distribute(PG_GETARG_OID(0), text_to_cstring(PG_GETARG_TEXT_PP(1)));
	PG_RETURN_VOID();
}

/* counters._catalog_row(): BEFORE INSERT on counters.counter, for each row */
COUNTERS_FUNCTION(counters_catalog_row)
{
	return PointerGetDatum(counters::CatalogRowInserted(RequireTrigger(fcinfo, "counters._catalog_row()")));
}

/* counters._replica_changed(): AFTER INSERT OR DELETE on each copy of counters.counter_replica */
COUNTERS_FUNCTION(counters_replica_changed)
{
	TriggerData *td = RequireTrigger(fcinfo, "counters._replica_changed()");
	counters::citus::ReplicaChanged(td);
	return PointerGetDatum(nullptr);
}

/* counters.enable_citus() */
COUNTERS_FUNCTION(counters_enable_citus)
{
	counters::citus::EnableCitus(true);
	PG_RETURN_VOID();
}

/* counters.set_sink(source, sink) */
COUNTERS_FUNCTION(counters_set_sink)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("counters.set_sink() takes no NULL argument")));
	counters::SetSink(PG_GETARG_OID(0), PG_GETARG_BOOL(1));
	PG_RETURN_VOID();
}

/* counters.set_bounds(name, column_name, min, max) */
COUNTERS_FUNCTION(counters_set_bounds)
{
	counters::SetBounds(RequiredTextArg(fcinfo, 0, "the counter name"), RequiredTextArg(fcinfo, 1, "column_name"),
	                    PG_GETARG_DATUM(2), PG_ARGISNULL(2), PG_GETARG_DATUM(3), PG_ARGISNULL(3));
	PG_RETURN_VOID();
}

/*
 * counters.set_thresholds(name, column_name, thresholds, callback, every); `every` is absent where the installed SQL
 * predates it (0.4, before ALTER EXTENSION UPDATE).
 */
COUNTERS_FUNCTION(counters_set_thresholds)
{
	bool every_null = PG_NARGS() < 5 || PG_ARGISNULL(4);
	counters::SetThresholds(RequiredTextArg(fcinfo, 0, "the counter name"), RequiredTextArg(fcinfo, 1, "column_name"),
	                        PG_ARGISNULL(2) ? nullptr : PG_GETARG_ARRAYTYPE_P(2),
	                        PG_ARGISNULL(3) ? InvalidOid : PG_GETARG_OID(3), every_null ? (Datum)0 : PG_GETARG_DATUM(4),
	                        every_null);
	PG_RETURN_VOID();
}

/* counters.set_retention(name, column_name, keep) */
COUNTERS_FUNCTION(counters_set_retention)
{
	counters::SetRetention(RequiredTextArg(fcinfo, 0, "the counter name"), RequiredTextArg(fcinfo, 1, "column_name"),
	                       PG_GETARG_DATUM(2), PG_ARGISNULL(2));
	PG_RETURN_VOID();
}

/* counters.set_touch(name, column_name) */
/* counters.set_window_thresholds(name, column_name, thresholds, bucket_column, width, callback) */
COUNTERS_FUNCTION(counters_set_window_thresholds)
{
	counters::SetWindowThresholds(
	    RequiredTextArg(fcinfo, 0, "the counter name"), RequiredTextArg(fcinfo, 1, "column_name"),
	    PG_ARGISNULL(2) ? nullptr : PG_GETARG_ARRAYTYPE_P(2), TextArg(fcinfo, 3),
	    PG_ARGISNULL(4) ? nullptr : DatumGetCString(DirectFunctionCall1(interval_out, PG_GETARG_DATUM(4))),
	    PG_ARGISNULL(5) ? InvalidOid : PG_GETARG_OID(5));
	PG_RETURN_VOID();
}

/* counters.key_digest(text), counters.key_digest(bytea) */
COUNTERS_FUNCTION(counters_key_digest_text)
{
	return counters::KeyDigest(PG_GETARG_DATUM(0), TEXTOID);
}

COUNTERS_FUNCTION(counters_key_digest_bytea)
{
	return counters::KeyDigest(PG_GETARG_DATUM(0), BYTEAOID);
}

/* counters.window_state(name) */
COUNTERS_FUNCTION(counters_window_state)
{
	counters::WindowState(TextArg(fcinfo, 0), fcinfo);
	return (Datum)0;
}

/* counters.check_windows(name) */
COUNTERS_FUNCTION(counters_check_windows)
{
	PG_RETURN_INT64(counters::CheckWindows(TextArg(fcinfo, 0)));
}

/* counters.set_keep_zero(name, keep) */
COUNTERS_FUNCTION(counters_set_keep_zero)
{
	if (PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("counters.set_keep_zero(): keep is NULL")));
	counters::SetKeepZero(RequiredTextArg(fcinfo, 0, "the counter name"), PG_GETARG_BOOL(1));
	PG_RETURN_VOID();
}

/* counters.set_deferred(name, deferred) */
COUNTERS_FUNCTION(counters_set_deferred)
{
	if (PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("counters.set_deferred(): deferred is NULL")));
	counters::SetDeferred(RequiredTextArg(fcinfo, 0, "the counter name"), PG_GETARG_BOOL(1));
	PG_RETURN_VOID();
}

/* counters.apply_deferred(): this transaction's deferred deltas, applied now; the keys written. */
COUNTERS_FUNCTION(counters_apply_deferred)
{
	PG_RETURN_INT64(counters::ApplyDeferred());
}

COUNTERS_FUNCTION(counters_set_touch)
{
	counters::SetTouch(RequiredTextArg(fcinfo, 0, "the counter name"),
	                   PG_ARGISNULL(1) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(1)));
	PG_RETURN_VOID();
}

/* counters.top(name, column_name, k, filter): the k largest keys by a value column. */
COUNTERS_FUNCTION(counters_top)
{
	counters::Top(RequiredTextArg(fcinfo, 0, "the counter name"), RequiredTextArg(fcinfo, 1, "column_name"),
	              PG_GETARG_DATUM(2), PG_ARGISNULL(2), TextArg(fcinfo, 3), fcinfo);
	return (Datum)0;
}

/*
 * counters.top(counter anyelement, column_name, k, filter): the same, as whole rows of the counter's row type. Only
 * the argument's type matters (its value, usually NULL::<relation>, is not read).
 */
COUNTERS_FUNCTION(counters_top_rows)
{
	counters::TopRows(get_fn_expr_argtype(fcinfo->flinfo, 0), RequiredTextArg(fcinfo, 1, "column_name"),
	                  PG_GETARG_DATUM(2), PG_ARGISNULL(2), TextArg(fcinfo, 3), fcinfo);
	return (Datum)0;
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

/* counters.compact_placements(name): on a Citus worker, fold this node's placements; the report, as jsonb. */
COUNTERS_FUNCTION(counters_compact_placements)
{
	char *report = counters::CompactPlacements(TextArg(fcinfo, 0));
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(report)));
}

/* counters.apply_retention(name): delete expired buckets. */
COUNTERS_FUNCTION(counters_apply_retention)
{
	PG_RETURN_INT64(counters::ApplyRetention(TextArg(fcinfo, 0)));
}

/* The event triggers (ddl.cpp). */
COUNTERS_FUNCTION(counters_on_ddl_start)
{
	RequireEventTrigger(fcinfo, "counters._on_ddl_start()");
	counters::OnDdlStart((EventTriggerData *)fcinfo->context);
	PG_RETURN_VOID();
}

COUNTERS_FUNCTION(counters_on_ddl_end)
{
	RequireEventTrigger(fcinfo, "counters._on_ddl_end()");
	counters::OnDdlEnd((EventTriggerData *)fcinfo->context);
	PG_RETURN_VOID();
}

COUNTERS_FUNCTION(counters_on_sql_drop)
{
	RequireEventTrigger(fcinfo, "counters._on_sql_drop()");
	counters::OnSqlDrop();
	PG_RETURN_VOID();
}

/* counters._bounds(options): the rows of view counters.bounds, from a catalog row's options (read in C, typed) */
COUNTERS_FUNCTION(counters_bounds_rows)
{
	const counters::CounterOptions *o = counters::ParseOptions(PG_GETARG_DATUM(0), false);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
	for (int i = 0; i < o->nbounds; i++) {
		const counters::ColumnBounds *b = &o->bounds[i];
		Datum values[3] = {CStringGetTextDatum(b->column), b->min, b->max};
		bool nulls[3] = {false, !b->has_min, !b->has_max};
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum)0;
}

/* counters._building(options): whether a counter is being built concurrently (view counters.stats) */
COUNTERS_FUNCTION(counters_building)
{
	PG_RETURN_BOOL(counters::ParseOptions(PG_GETARG_DATUM(0), false)->building);
}

/*
 * counters._counter_stats(definition_view): a counter's statistics of the write path (view counters.stats), or NULL
 * when they are not kept (the library is not in shared_preload_libraries).
 */
COUNTERS_FUNCTION(counters_counter_stats)
{
	counters::CounterStats st;
	if (!counters::ReadCounterStats(PG_GETARG_OID(0), &st))
		PG_RETURN_NULL();
	TupleDesc desc;
	if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "counters._counter_stats must return a row");
	desc = BlessTupleDesc(desc);
	Datum values[6] = {Int64GetDatum(st.calls),       Int64GetDatum(st.rows),
	                   Int64GetDatum(st.keys),        Float8GetDatum(st.time_ms),
	                   TimestampTzGetDatum(st.since), TimestampTzGetDatum(st.pending_since)};
	bool nulls[6] = {false, false, false, false, false, st.pending_since == 0};
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

/* counters.reset_stats(): empty this database's statistics of the write path; false when none are kept. */
COUNTERS_FUNCTION(counters_reset_stats)
{
	PG_RETURN_BOOL(counters::ResetCounterStats());
}

/* counters._thresholds(options): the rows of view counters.thresholds, from a catalog row's options */
COUNTERS_FUNCTION(counters_thresholds_rows)
{
	const counters::CounterOptions *o = counters::ParseOptions(PG_GETARG_DATUM(0), false);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
	for (int i = 0; i < o->nthresholds; i++) {
		const counters::ColumnThresholds *t = &o->thresholds[i];
		Oid callback = counters::ResolveCallback(t->callback);
		Datum values[4] = {CStringGetTextDatum(t->column),
		                   PointerGetDatum(construct_array(t->values, t->nvalues, NUMERICOID, -1, false, TYPALIGN_INT)),
		                   ObjectIdGetDatum(callback), t->every};
		bool nulls[4] = {false, false, !OidIsValid(callback), t->every == (Datum)0};
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum)0;
}
