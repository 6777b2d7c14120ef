/*
 * options.cpp: decisions a counter makes at write time and what it keeps: bounds, thresholds, window thresholds,
 * retention (the catalog's options, checked and recorded here; model/options.cpp reads and writes their form), the
 * window state a role may read, and top(), which reads a counter's largest keys.
 */
#include "control/control.hpp"
#include "citus/citus.hpp"
#include "compat.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"
}

namespace counters {

namespace {

/* A value column of a counter, named as in the definition or (a table create_counter made) as in the table. */
struct ValueColumn {
	const char *definition_name;
	const char *table_name;
};

/*
 * 0A000 (with `hint`) when value column `v` of counter `e` keeps min() or max(), not a count or a sum; or (unless
 * `ranked`: top() reads the values as stored) count(DISTINCT x), whose value is known only once its pairs are read
 * again, after bounds and thresholds are decided.
 */
void
RequireSummed(const Counter *e, int v, const char *hint, bool ranked = false)
{
	const CounterDef *def = DefinitionOf(e);
	const ValueDef *vd = &def->values[v];
	if (vd->kind == ValueKind::Distinct && !ranked)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": column \"%s\" keeps count(DISTINCT), not a count or a sum", e->name,
		                       vd->column_name),
		                errhint("%s", hint)));
	if (vd->accum != AccumKind::Extreme)
		return;
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	                errmsg("counter \"%s\": column \"%s\" keeps %s(), not a count or a sum", e->name, vd->column_name,
	                       vd->aggregate->direction > 0 ? "max" : "min"),
	                errhint("%s", hint)));
}

ValueColumn
FindValueColumn(const Counter *e, const char *column)
{
	const CounterLayout *l = LayoutOf(e);
	int found = -1;
	for (int i = 0; i < l->ncolumns; i++) {
		if (l->is_key[i])
			continue;
		if (strcmp(l->def_names[i], column) == 0) {
			found = i;
			break;
		}
		if (e->owns_target && found < 0 && strcmp(l->in_table.names[i], column) == 0)
			found = i;
	}
	const CounterDef *def = DefinitionOf(e);
	const DerivedDef *derived = found < 0 ? FindDerived(def, column) : nullptr;
	if (derived != nullptr)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": column \"%s\" is %s(), read from columns the counter keeps", e->name,
		                       column, derived->kind->name),
		                errhint("Bounds and thresholds apply to the count() and sum() columns: set them on %s or %s.",
		                        quote_identifier(def->values[derived->accumulators[0]].column_name),
		                        quote_identifier(def->values[derived->accumulators[1]].column_name))));
	if (found < 0)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
		                errmsg("counter \"%s\" has no value column \"%s\"", e->name, column),
		                errhint("Bounds and thresholds apply to the count() and sum() columns of the definition.")));
	RequireSummed(e, def->columns[found].index, "Bounds and thresholds apply to the count() and sum() columns.");
	return ValueColumn{l->def_names[found], l->in_table.names[found]};
}

char *
NumericText(Datum n)
{
	return DatumGetCString(DirectFunctionCall1(numeric_out, n));
}

/* The single value of a one-row, one-column SPI query (NULL stays NULL), copied into the caller's context. */
Datum
QueryValue(MemoryContext cxt, const char *sql, int nargs, Oid *types, Datum *args, const char *nulls, bool *isnull)
{
	int ret = SPI_execute_with_args(sql, nargs, types, args, nulls, true, 1);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "counters: \"%s\" failed: %s", sql, SPI_result_code_string(ret));
	Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
	if (*isnull)
		return (Datum)0;
	Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, 0);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	d = datumCopy(d, att->attbyval, att->attlen);
	MemoryContextSwitchTo(old);
	return d;
}

} // namespace

void
SetBounds(const char *name, const char *column, Datum min, bool min_null, Datum max, bool max_null)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	ValueColumn col = FindValueColumn(e, column);
	RequireFeature(e, Feature::Bounds);
	if (!min_null && !max_null && DatumGetInt32(DirectFunctionCall2(numeric_cmp, min, max)) > 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": minimum %s of \"%s\" is above its maximum %s", name, NumericText(min),
		                       col.definition_name, NumericText(max))));
	if (!min_null || !max_null) {
		RequireReadCommitted("counters.set_bounds()");
		/* No write slips in between the check and the bounds taking effect; the check reads as the owner. */
		Change change;
		e = BeginChange(&change, name, ShareLock, AccessShareLock);
		RequireFeature(e, Feature::Bounds);
		char *outside = BoundsViolation(col.table_name, min, min_null, max, max_null);
		SpiConnect();
		bool isnull;
		int level = PinSettings(PIN_SEARCH_PATH);
		int64 violating = DatumGetInt64(QueryValue(CurrentMemoryContext, CountWhereStatement(e->target, outside), 0,
		                                           nullptr, nullptr, nullptr, &isnull));
		UnpinSettings(level);
		SPI_finish();
		if (violating > 0)
			ereport(ERROR, (errcode(ERRCODE_CHECK_VIOLATION),
			                errmsg("counter \"%s\": %lld of its keys have a value of \"%s\" outside [%s, %s]", name,
			                       (long long)violating, col.definition_name, min_null ? "-infinity" : NumericText(min),
			                       max_null ? "infinity" : NumericText(max)),
			                errhint("SELECT * FROM %s WHERE %s lists them.", QualifiedName(e->target), outside)));
		EndChange(&change);
	}
	/* (read-modify-write: the options now, locked, not as `e` was read before the check above) */
	CounterOptions o = LockOptions(name);
	ColumnBounds entry = {col.definition_name, !min_null, !max_null, min_null ? (Datum)0 : min,
	                      max_null ? (Datum)0 : max};
	o.bounds = WithColumnEntry(o.bounds, &o.nbounds, col.definition_name, min_null && max_null ? nullptr : &entry);
	WriteOption(name, &o, "bounds");
}

void
SetThresholds(const char *name, const char *column, ArrayType *thresholds, Oid callback, Datum every, bool every_null)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	RequireFeature(e, Feature::Thresholds);
	ValueColumn col = FindValueColumn(e, column);
	if ((thresholds == nullptr && every_null) || (thresholds != nullptr && array_contains_nulls(thresholds)))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
		                errmsg("counter \"%s\": thresholds of \"%s\" must be an array without NULLs", name,
		                       col.definition_name),
		                errhint("An empty array removes the thresholds.")));
	Numeric step = every_null ? nullptr : DatumGetNumeric(every);
	if (step != nullptr &&
	    (numeric_is_nan(step) || numeric_is_inf(step) ||
	     DatumGetInt32(DirectFunctionCall2(numeric_cmp, every, NumericGetDatum(int64_to_numeric(0)))) <= 0))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": repeating thresholds of \"%s\" need a positive finite step, not %s",
		                       name, col.definition_name, NumericText(every)),
		                errhint("every => 1000 makes 1000, 2000, 3000, ... (and -1000, -2000, ...) thresholds.")));
	int n = thresholds == nullptr ? 0 : ArrayGetNItems(ARR_NDIM(thresholds), ARR_DIMS(thresholds));
	/* (log and sharded counters cross thresholds when compaction folds their pending rows) */
	const char *callback_text = nullptr;
	if (OidIsValid(callback)) {
		bool ok = IsThresholdCallback(callback);
		/* (its name as the catalog will show it: schema-qualified) */
		int level = PinSettings(PIN_SEARCH_PATH);
		callback_text = format_procedure(callback);
		UnpinSettings(level);
		if (!ok)
			ereport(
			    ERROR,
			    (errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
			     errmsg("counter \"%s\": callback %s must be a function taking (text, jsonb, text, numeric, numeric, "
			            "numeric, text), optionally followed by (numeric, numeric)",
			            name, callback_text),
			     errhint("The arguments are counter, key, column_name, old, new, threshold, direction, and optionally "
			             "every and crossed.")));
		/* It will run as the counter's owner. */
		Oid owner = CounterOwner(e);
		if (compat::FunctionAclCheck(callback, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK ||
		    compat::FunctionAclCheck(callback, owner, ACL_EXECUTE) != ACLCHECK_OK)
			ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			                errmsg("counter \"%s\": permission denied for callback %s", name, callback_text),
			                errdetail("The callback runs as the counter's owner, %s.",
			                          quote_identifier(GetUserNameFromId(owner, false)))));
	}
	/* the thresholds sorted and without duplicates (no "values" when there are none), the step */
	ColumnThresholds entry = {col.definition_name, 0, nullptr, every_null ? (Datum)0 : every, callback_text};
	if (n > 0) {
		Datum *values;
		bool *nulls;
		int nvalues;
		deconstruct_array(thresholds, NUMERICOID, -1, false, TYPALIGN_INT, &values, &nulls, &nvalues);
		entry.values = (Datum *)palloc(sizeof(Datum) * nvalues);
		for (int i = 0; i < nvalues; i++) {
			int at = 0, cmp = 1;
			while (at < entry.nvalues &&
			       (cmp = DatumGetInt32(DirectFunctionCall2(numeric_cmp, entry.values[at], values[i]))) < 0)
				at++;
			if (at < entry.nvalues && cmp == 0)
				continue;
			memmove(&entry.values[at + 1], &entry.values[at], sizeof(Datum) * (entry.nvalues - at));
			entry.values[at] = values[i];
			entry.nvalues++;
		}
	}
	/* (read-modify-write: the options now, locked, whatever was set since `e` was read) */
	CounterOptions o = LockOptions(name);
	o.thresholds =
	    WithColumnEntry(o.thresholds, &o.nthresholds, col.definition_name, n == 0 && every_null ? nullptr : &entry);
	WriteOption(name, &o, "thresholds");
}

/*
 * counters.set_touch: a timestamp column of a counter-cache counter's target, set to the transaction's start time
 * whenever the counter changes the row's values (cache keys). Kept by name; NULL removes it.
 */
void
SetTouch(const char *name, const char *column)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	CounterOptions o = LockOptions(name);
	o.touch = column;
	if (column == nullptr) {
		WriteOption(name, &o, "touch");
		return;
	}
	RequireFeature(e, Feature::Touch);
	AttrNumber attnum = get_attnum(e->target, column);
	if (attnum == InvalidAttrNumber)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN), errmsg("counter \"%s\": table %s has no column \"%s\"", name,
		                                                          QualifiedName(e->target), column)));
	Oid type = getBaseType(get_atttype(e->target, attnum));
	if (type != TIMESTAMPTZOID && type != TIMESTAMPOID)
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
		                errmsg("counter \"%s\": column \"%s\" to touch has type %s, not timestamptz or timestamp", name,
		                       column, format_type_be(get_atttype(e->target, attnum)))));
	const CounterLayout *l = LayoutOf(e);
	for (int i = 0; i < l->ncolumns; i++)
		if (strcmp(l->in_read.names[i], column) == 0)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			                errmsg("counter \"%s\": column \"%s\" is one of the counter's own columns", name, column),
			                errhint("Touch a timestamp column of the table, such as updated_at.")));
	WriteOption(name, &o, "touch");
}

/*
 * counters.set_keep_zero: rows of an exact counter whose values all come back to zero stay (with zeros) instead of
 * being deleted, for readers that take a missing row for a missing object (ORMs).
 */
void
SetKeepZero(const char *name, bool keep)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	CounterOptions o = LockOptions(name);
	o.keep_zero = keep;
	if (keep)
		RequireFeature(e, Feature::KeepZero);
	WriteOption(name, &o, "keep_zero");
}

/*
 * counters.set_deferred: the counter's deltas wait for the commit of the transactions that write its source
 * (write/deferred.cpp), unless counters.apply says otherwise. A counter through a chain defers its levels with it.
 */
void
SetDeferred(const char *name, bool deferred)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	RequireWhole(e, "deferred alone");
	if (deferred)
		RequireFeature(e, Feature::Deferred);
	List *counters = lappend(ChainParts(e), e);
	ListCell *lc;
	foreach (lc, counters) {
		const Counter *part = (const Counter *)lfirst(lc);
		CounterOptions o = LockOptions(part->name);
		o.deferred = deferred;
		WriteOption(part->name, &o, "deferred");
	}
}

/* A counter declared as a level of counter `whole` through a chain of parent rows (DeclareChain). */
void
MarkPart(const char *name, const char *whole)
{
	CounterOptions o = LockOptions(name);
	o.part_of = pstrdup(whole);
	WriteOption(name, &o, "part_of");
}

void
MarkChain(const char *name, const char *declared)
{
	CounterOptions o = LockOptions(name);
	o.chain = pstrdup(declared);
	WriteOption(name, &o, "chain");
}

void
SetRetention(const char *name, const char *column, Datum keep, bool keep_null)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	CounterOptions o = LockOptions(name);
	o.retention_column = o.retention_keep = nullptr;
	if (keep_null) {
		WriteOption(name, &o, "retention");
		return;
	}
	RequireFeature(e, Feature::Retention);
	const CounterLayout *l = LayoutOf(e);
	int found = -1;
	for (int i = 0; i < l->ncolumns; i++) {
		if (!l->is_key[i])
			continue;
		if (strcmp(l->def_names[i], column) == 0) {
			found = i;
			break;
		}
		if (found < 0 && strcmp(l->in_table.names[i], column) == 0)
			found = i;
	}
	Oid type = found >= 0 ? ColumnType(DefinitionOf(e), found) : InvalidOid;
	if (!IsTimeBucketType(type))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": retention needs a key column of type date, timestamp or timestamptz, "
		                       "not \"%s\"",
		                       name, column)));
	/* (the interval as text in the same style whatever the session's IntervalStyle) */
	int level = PinSettings(PIN_OUTPUT);
	char *keep_text = DatumGetCString(DirectFunctionCall1(interval_out, keep));
	UnpinSettings(level);
	Datum zero =
	    DirectFunctionCall3(interval_in, CStringGetDatum("0"), ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	if (DatumGetInt32(DirectFunctionCall2(interval_cmp, keep, zero)) <= 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": retention must keep a positive interval, not %s", name,
		                       DatumGetCString(DirectFunctionCall1(interval_out, keep)))));
	o.retention_column = l->def_names[found];
	o.retention_keep = keep_text;
	WriteOption(name, &o, "retention");
}

namespace {

/* top()'s (key jsonb, value numeric) rows from its statement's (keys..., value) rows, the keys rendered as the owner.
 */
void
RenderTopKeys(const Counter *e, TupleDesc desc, FunctionCallInfo fcinfo)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
	TupleDesc got = SPI_tuptable->tupdesc;
	const CounterLayout *l = LayoutOf(e);
	int nkeys = DefinitionOf(e)->nkeys;
	const char **names = (const char **)palloc(sizeof(char *) * nkeys);
	Oid *types = (Oid *)palloc(sizeof(Oid) * nkeys);
	for (int i = 0, k = 0; i < l->ncolumns; i++)
		if (l->is_key[i]) {
			names[k] = l->in_table.names[i];
			types[k] = TupleDescAttr(got, k)->atttypid;
			k++;
		}
	Datum *in_values = (Datum *)palloc(sizeof(Datum) * got->natts);
	bool *in_nulls = (bool *)palloc(sizeof(bool) * got->natts);
	Oid owner = CounterOwner(e);
	OwnerScope scope;
	EnterOwner(&scope, AuthorizedByCatalog(e), PIN_SEARCH_PATH | PIN_OUTPUT);
	for (uint64 r = 0; r < SPI_processed; r++) {
		heap_deform_tuple(SPI_tuptable->vals[r], got, in_values, in_nulls);
		Datum values[2] = {RenderKey(owner, nkeys, names, in_values, in_nulls, types), in_values[nkeys]};
		bool nulls[2] = {false, in_nulls[nkeys]};
		tuplestore_putvalues(rsinfo->setResult, desc, values, nulls);
	}
	LeaveOwner(&scope);
}

/*
 * The k largest keys of counter `e` by value column `col`, read with the caller's rights, into the function's
 * result: (key jsonb, value numeric) rows, or (rows) whole rows of the row type of the relation it is read from. The
 * key is rendered as jsonb as the counter's owner (its type's cast to json is the owner's code to run).
 */
void
RunTop(const Counter *e, int col, Datum k, bool k_null, const char *filter, bool rows, FunctionCallInfo fcinfo)
{
	char *limit = k_null ? pstrdup("NULL") : psprintf("%d", DatumGetInt32(k));
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
	TupleDesc desc = rsinfo->setDesc;
	SpiConnect();
	/* The caller reads the counter with its own rights; the statement's names are its own, pinned. */
	int level = PinSettings(PIN_SEARCH_PATH);
	/* In log and sharded mode a key's value is spread over several rows: the filter may name key columns only. */
	if (HasPending(e->mode) && filter != nullptr)
		RequireKeyFilter(e, filter);
	bool distributed = HasPending(e->mode) && citus::KindOfTable(e->totals) == citus::Kind::Distributed;
	int ret = SPI_execute(TopStatement(e, col, limit, filter, rows ? desc : nullptr, distributed), true, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: top() of counter \"%s\" failed: %s", e->name, SPI_result_code_string(ret));
	/*
	 * The statement returns the result's columns in order, without its dropped ones (a table's row type keeps them:
	 * they are NULL here), in the result's types: unless the relation changed between the caller's plan and now.
	 */
	TupleDesc got = SPI_tuptable->tupdesc;
	if (!rows) {
		RenderTopKeys(e, desc, fcinfo);
		UnpinSettings(level);
		SPI_finish();
		return;
	}
	int *source = (int *)palloc(sizeof(int) * desc->natts);
	int next = 0;
	bool mismatch = false;
	for (int a = 0; a < desc->natts; a++) {
		Form_pg_attribute att = TupleDescAttr(desc, a);
		source[a] = att->attisdropped ? -1 : next++;
		if (source[a] >= 0)
			mismatch |= source[a] >= got->natts || TupleDescAttr(got, source[a])->atttypid != att->atttypid;
	}
	if (mismatch || next != got->natts)
		ereport(ERROR,
		        (errcode(ERRCODE_DATATYPE_MISMATCH), errmsg("counter \"%s\": the columns of %s changed while top() ran",
		                                                    e->name, QualifiedName(e->target))));
	Datum *in_values = (Datum *)palloc(sizeof(Datum) * got->natts);
	bool *in_nulls = (bool *)palloc(sizeof(bool) * got->natts);
	Datum *values = (Datum *)palloc(sizeof(Datum) * desc->natts);
	bool *nulls = (bool *)palloc(sizeof(bool) * desc->natts);
	for (uint64 r = 0; r < SPI_processed; r++) {
		heap_deform_tuple(SPI_tuptable->vals[r], got, in_values, in_nulls);
		for (int a = 0; a < desc->natts; a++) {
			values[a] = source[a] >= 0 ? in_values[source[a]] : (Datum)0;
			nulls[a] = source[a] >= 0 ? in_nulls[source[a]] : true;
		}
		tuplestore_putvalues(rsinfo->setResult, desc, values, nulls);
	}
	UnpinSettings(level);
	SPI_finish();
}

/* The value column of counter `e` named `column` in the relation `names` come from (its layout's), or -1. */
int
FindTopColumn(const Counter *e, const char **names, const char *column)
{
	const CounterLayout *l = LayoutOf(e);
	int col = -1;
	for (int i = 0; i < l->ncolumns; i++)
		if (!l->is_key[i] && strcmp(names[i], column) == 0)
			col = i;
	return col;
}

} // namespace

void
Top(const char *name, const char *column, Datum k, bool k_null, const char *filter, FunctionCallInfo fcinfo)
{
	Counter *e = LookupCounter(name);
	int col = FindTopColumn(e, LayoutOf(e)->in_table.names, column);
	const DerivedDef *derived = col < 0 ? FindDerived(DefinitionOf(e), column) : nullptr;
	if (derived != nullptr)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": top() does not rank %s(), column %s", name, derived->kind->name,
		                       quote_identifier(column)),
		                errdetail("top() ranks the columns the counter keeps."),
		                errhint("Order the counter's table by the column (an index on it makes that fast).")));
	if (col < 0)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
		                errmsg("counter \"%s\" has no value column %s", name, quote_identifier(column))));
	RequireSummed(e, DefinitionOf(e)->columns[col].index,
	              "Order the counter's table by the column (an index on it makes that fast).", true);
	RunTop(e, col, k, k_null, filter, false, fcinfo);
}

void
TopRows(Oid rowtype, const char *column, Datum k, bool k_null, const char *filter, FunctionCallInfo fcinfo)
{
	Oid rel = OidIsValid(rowtype) ? get_typ_typrelid(rowtype) : InvalidOid;
	const char *type_name = OidIsValid(rowtype) ? format_type_be(rowtype) : "unknown";
	List *entries = OidIsValid(rel) ? ReadCatalogOfRelation(rel) : NIL;
	/*
	 * The counter read from that relation which has the value column (several counters can keep columns of one
	 * existing table).
	 */
	const Counter *found = nullptr;
	const char *read_from = nullptr; /* (the last counter read from it) */
	int col = -1, nread_from = 0;
	ListCell *lc;
	foreach (lc, entries) {
		Counter *e = (Counter *)lfirst(lc);
		if (e->target != rel)
			continue;
		nread_from++;
		read_from = e->name;
		int c = FindTopColumn(e, LayoutOf(e)->in_read.names, column);
		if (c < 0)
			continue;
		if (found != nullptr)
			ereport(ERROR, (errcode(ERRCODE_AMBIGUOUS_COLUMN),
			                errmsg("counters \"%s\" and \"%s\" both keep column %s of %s", found->name, e->name,
			                       quote_identifier(column), QualifiedName(rel)),
			                errhint("Use counters.top(name, column_name, k) with the counter's name.")));
		found = e;
		col = c;
	}
	if (found == nullptr && nread_from == 1)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
		                errmsg("counter \"%s\" has no value column %s", read_from, quote_identifier(column))));
	if (found == nullptr && nread_from > 1)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN), errmsg("no counter read from %s has a value column %s",
		                                                          QualifiedName(rel), quote_identifier(column))));
	if (found == nullptr && entries != NIL) {
		/* one of a counter's other relations: its totals, log, slots or definition view */
		Counter *e = (Counter *)linitial(entries);
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
		                errmsg("type %s is not the row type of a counter: counter \"%s\" is read from %s", type_name,
		                       e->name, QualifiedName(e->target)),
		                errhint("Pass a value of the row type of the relation the counter is read from, e.g. "
		                        "counters.top(NULL::%s, %s, 10).",
		                        QualifiedName(e->target), quote_literal_cstr(column))));
	}
	if (found == nullptr)
		ereport(ERROR,
		        (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("type %s is not the row type of a counter", type_name),
		         errhint("Pass a value of the row type of the relation a counter is read from (its \"target\" in "
		                 "counters.counters), e.g. counters.top(NULL::post_likes, 'likes', 10).")));
	RunTop(found, col, k, k_null, filter, true, fcinfo);
}

namespace {

struct Filter {
	const Counter *e;
	const char *filter;
};

void
ProbeFilter(void *arg)
{
	Filter *f = (Filter *)arg;
	int ret = SPI_execute(KeyFilterCheckStatement(f->e, f->filter), true, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: checking the filter of top() failed: %s", SPI_result_code_string(ret));
}

} // namespace

void
RequireKeyFilter(const Counter *e, const char *filter)
{
	Filter f = {e, filter};
	ErrorData *error = TryInSubtransaction(ProbeFilter, &f);
	if (error == nullptr)
		return;
	if (error->sqlerrcode != ERRCODE_UNDEFINED_COLUMN)
		ReThrowError(error);
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	                errmsg("counter \"%s\": in %s mode the filter of top() may name key columns only (%s)", e->name,
	                       ModeName(e->mode), KeyColumnList(e)),
	                errhint("Filter the result instead: SELECT * FROM %s WHERE ... ORDER BY ... LIMIT ...",
	                        QualifiedName(e->target))));
}

/* ---- window thresholds: the options (windows.cpp checks them) ---- */

namespace {

/*
 * Set (thresholds not (Datum)0) or remove column `column` of counter `name`'s window {bucket, width, columns: {column:
 * {values, callback}}}, the window going with its last column; crossings recorded for thresholds no longer set go.
 */
void
WriteWindowOption(const char *name, const char *bucket, const char *width, const char *column, Datum thresholds,
                  Oid callback)
{
	/* the window's other columns as they are now (read-modify-write, locked), this one's thresholds (none: it goes) */
	CounterOptions o = LockOptions(name);
	WindowOptions w = {bucket, width, 0, nullptr};
	if (o.window != nullptr) {
		w.ncolumns = o.window->ncolumns;
		w.columns = o.window->columns;
	}
	ColumnThresholds entry = {column, 0, nullptr, (Datum)0,
	                          OidIsValid(callback) ? format_procedure_qualified(callback) : nullptr};
	if (thresholds != (Datum)0) {
		bool *nulls;
		deconstruct_array(DatumGetArrayTypeP(thresholds), NUMERICOID, -1, false, TYPALIGN_INT, &entry.values, &nulls,
		                  &entry.nvalues);
	}
	w.columns = WithColumnEntry(w.columns, &w.ncolumns, column, thresholds != (Datum)0 ? &entry : nullptr);
	/* (in C order, as the window's columns are read) */
	for (int i = w.ncolumns - 1; i > 0 && strcmp(w.columns[i - 1].column, w.columns[i].column) > 0; i--) {
		ColumnThresholds swap = w.columns[i - 1];
		w.columns[i - 1] = w.columns[i];
		w.columns[i] = swap;
	}
	o.window = &w;
	WriteOption(name, &o, "window");
	/* The state: a table of the owner's while there is a window, without the thresholds no longer set. */
	Counter *e = LookupCounter(name);
	Oid crossings = WindowCrossings(e, w.ncolumns > 0);
	if (!OidIsValid(crossings))
		return;
	Oid state_types[2] = {TEXTOID, NUMERICARRAYOID};
	Datum state_args[2] = {CStringGetTextDatum(column), thresholds};
	char state_nulls[2] = {' ', thresholds == (Datum)0 ? 'n' : ' '};
	OwnerScope owner;
	EnterOwner(&owner, AuthorizeMaintainer(e), PIN_SEARCH_PATH);
	SpiConnect();
	if (SPI_execute_with_args(DeleteCrossingsStatement(crossings), 2, state_types, state_args, state_nulls, false, 0) !=
	    SPI_OK_DELETE)
		elog(ERROR, "counters: updating the window state of counter \"%s\" failed", name);
	SPI_finish();
	LeaveOwner(&owner);
}

} // namespace

void
WindowState(const char *name, FunctionCallInfo fcinfo)
{
	InitMaterializedSRF(fcinfo, 0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
	List *entries = name ? list_make1(LookupCounter(name)) : ReadCatalog(nullptr);
	ListCell *lc;
	foreach (lc, entries) {
		Counter *e = (Counter *)lfirst(lc);
		if (!OidIsValid(e->crossings))
			continue;
		if (!MayRead(e)) {
			if (name != nullptr)
				ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				                errmsg("counter \"%s\": permission denied for %s", e->name, QualifiedName(e->target)),
				                errdetail("Its window state shows keys of the counter, which only roles that may read "
				                          "it may see.")));
			continue;
		}
		/* (read as the owner, whose table it is: for a role that may read the counter) */
		OwnerScope owner;
		EnterOwner(&owner, AuthorizedByCatalog(e), PIN_SEARCH_PATH | PIN_ROW_SECURITY);
		SpiConnect();
		if (SPI_execute(CrossingsStatement(e->crossings), true, 0) != SPI_OK_SELECT)
			elog(ERROR, "counters: reading the window state of counter \"%s\" failed", e->name);
		for (uint64 r = 0; r < SPI_processed; r++) {
			Datum values[5];
			bool nulls[5];
			values[0] = CStringGetTextDatum(e->name);
			nulls[0] = false;
			for (int col = 1; col < 5; col++)
				values[col] = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, col, &nulls[col]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		SPI_finish();
		LeaveOwner(&owner);
	}
}

/*
 * counters.set_window_thresholds(name, column_name, thresholds, bucket_column, width, callback): the window is the
 * counter's (one bucket column and width for all its columns); NULL or empty thresholds remove the column's.
 */
void
SetWindowThresholds(const char *name, const char *column, ArrayType *thresholds, const char *bucket, const char *width,
                    Oid callback)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	RequireFeature(e, Feature::WindowThresholds);
	const CounterDef *def = DefinitionOf(e);
	if (DefinitionColumn(def, column, false) < 0)
		ereport(ERROR,
		        (errcode(ERRCODE_UNDEFINED_COLUMN), errmsg("counter \"%s\" has no value column \"%s\"", name, column)));
	RequireSummed(e, DefinitionColumn(def, column, false), "Window thresholds apply to the count() and sum() columns.");
	bool remove = thresholds == nullptr || ArrayGetNItems(ARR_NDIM(thresholds), ARR_DIMS(thresholds)) == 0;
	/* (its window: one with columns; a row written by hand may lack its bucket or width) */
	const WindowOptions *current = LookupCounter(name)->options->window;
	if (current != nullptr && current->ncolumns == 0)
		current = nullptr;
	if (remove) {
		if (current != nullptr)
			WriteWindowOption(name, current->bucket, current->width, column, (Datum)0, InvalidOid);
		return;
	}
	if (bucket == nullptr || width == nullptr)
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
		                errmsg("counter \"%s\": window thresholds need a bucket column and a width", name)));
	int key = DefinitionColumn(def, bucket, true);
	if (key < 0)
		ereport(ERROR,
		        (errcode(ERRCODE_UNDEFINED_COLUMN), errmsg("counter \"%s\" has no key column \"%s\"", name, bucket)));
	Oid type = def->keys[key].type;
	if (!IsTimeBucketType(type))
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
		                errmsg("counter \"%s\": key \"%s\" is a %s, not a time bucket (date, timestamp or timestamptz)",
		                       name, bucket, format_type_be(type))));
	/* (a window whose only column is this one is replaced) */
	bool only_this = current != nullptr && current->ncolumns == 1 && strcmp(current->columns[0].column, column) == 0;
	if (current != nullptr && !only_this &&
	    (current->bucket == nullptr || current->width == nullptr || strcmp(current->bucket, bucket) != 0 ||
	     !DatumGetBool(DirectFunctionCall2(interval_eq,
	                                       DirectFunctionCall3(interval_in, CStringGetDatum(current->width), 0, -1),
	                                       DirectFunctionCall3(interval_in, CStringGetDatum(width), 0, -1)))))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\" already has a window of %s over \"%s\"", name,
		                       current->width != nullptr ? current->width : "",
		                       current->bucket != nullptr ? current->bucket : ""),
		                errdetail("A counter has one window, for all its columns."),
		                errhint("Remove its window thresholds first (thresholds => '{}' for each column).")));
	Datum interval = DirectFunctionCall3(interval_in, CStringGetDatum(width), 0, -1);
	Datum zero = DirectFunctionCall3(interval_in, CStringGetDatum("0"), 0, -1);
	if (!DatumGetBool(DirectFunctionCall2(interval_gt, interval, zero)))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": the window's width must be positive, not %s", name, width)));
	if (array_contains_nulls(thresholds))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
		                errmsg("counter \"%s\": window thresholds of \"%s\" must not contain NULL", name, column)));
	Datum *elems;
	int n;
	deconstruct_array(thresholds, NUMERICOID, -1, false, TYPALIGN_INT, &elems, nullptr, &n);
	Datum numeric_zero = NumericGetDatum(int64_to_numeric(0));
	for (int i = 0; i < n; i++)
		if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, elems[i], numeric_zero)) <= 0)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			                errmsg("counter \"%s\": window thresholds must be positive", name)));
	if (OidIsValid(callback) && !IsThresholdCallback(callback))
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		         errmsg("counter \"%s\": %s cannot be a threshold callback", name, format_procedure(callback)),
		         errhint("A callback takes (counter text, key jsonb, column_name text, old numeric, new numeric, "
		                 "threshold numeric, direction text).")));
	/* (stored in IntervalStyle postgres, as events show it, whatever the session's style) */
	int level = PinSettings(PIN_OUTPUT);
	char *width_text = DatumGetCString(DirectFunctionCall1(interval_out, interval));
	UnpinSettings(level);
	WriteWindowOption(name, bucket, width_text, column, PointerGetDatum(thresholds), callback);
}

} // namespace counters
