/*
 * decide.cpp: what a counter's new value decides, as its deltas are applied.
 *
 *   bounds      a value outside counters.set_bounds() is an error (check_violation) naming the counter and the key;
 *   thresholds  a value that crosses one of counters.set_thresholds() is an event: the column's callback, called
 *               with its key and values as the counter's owner, and a NOTIFY on channel "counters.<counter>" that
 *               wakes listeners and carries nothing a role could not read in counters.counter (the counter and column:
 *               any role may LISTEN, and any role may NOTIFY). Repeating thresholds (every => N: N, 2N, ... and -N,
 *               -2N, ...) make one event per key and statement however many multiples it crossed, at the farthest
 *               one, with the count.
 *
 * Crossings are noted while the statement's deltas are applied and announced once all of them are: a callback sees
 * every counter of the statement up to date.
 */
#include "write/write.hpp"
#include "compat.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
}

namespace counters {

namespace {

/* A value that crossed a threshold (counters.set_thresholds). */
struct Crossing {
	CompiledCounter *c;
	int v;
	Datum *keys;
	bool *key_nulls;
	Datum old_value; /* numeric */
	Datum new_value;
	Datum threshold;
	bool up;
	/* repeating thresholds: the step and the number of its multiples crossed ((Datum)0 for a listed threshold) */
	Datum every;
	Datum crossed;
	/* the key as jsonb, as the node that found the crossing rendered it ((Datum)0: render keys[], CrossingKey) */
	Datum key;
};

/* The crossings of the statement being applied (allocated in CurTransactionContext). */
List *crossings = NIL;

/*
 * The first counter whose threshold crossing this transaction announced, and the subtransaction level it was
 * announced at (a subtransaction that rolls back takes its notifications with it).
 */
char notified_counter[NAMEDATALEN];
int notified_level = 0;

/*
 * jsonb_build_object(names[0], values[0], ...) (or another function of that signature) over datums of the given
 * types, exactly as SQL calls it: top() and verify() build their keys so, and events render keys the same way (ISO
 * dates whatever the DateStyle). In `owner`'s scope: a key type's cast to json is the owner's code.
 */
Datum
BuildObject(Oid owner, Oid function, Oid result_type, int n, const char *const *names, const Datum *values,
            const bool *nulls, const Oid *types)
{
	RequireOwnerScope(owner);
	List *args = NIL;
	for (int i = 0; i < n; i++) {
		args = lappend(args, makeNullConst(TEXTOID, -1, InvalidOid));
		args = lappend(args, makeNullConst(types[i], -1, InvalidOid));
	}
	FmgrInfo flinfo;
	fmgr_info(function, &flinfo);
	fmgr_info_set_expr((Node *)makeFuncExpr(function, result_type, args, InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL),
	                   &flinfo);
	FunctionCallInfo fcinfo = (FunctionCallInfo)palloc(SizeForFunctionCallInfo(2 * n));
	InitFunctionCallInfoData(*fcinfo, &flinfo, 2 * n, InvalidOid, nullptr, nullptr);
	for (int i = 0; i < n; i++) {
		fcinfo->args[2 * i].value = CStringGetTextDatum(names[i]);
		fcinfo->args[2 * i].isnull = false;
		fcinfo->args[2 * i + 1].value = nulls != nullptr && nulls[i] ? (Datum)0 : values[i];
		fcinfo->args[2 * i + 1].isnull = nulls != nullptr && nulls[i];
	}
	Datum result = FunctionCallInvoke(fcinfo);
	if (fcinfo->isnull)
		elog(ERROR, "counters: building a JSON object returned NULL");
	return result;
}

/* The key of a crossing as jsonb: {"<key column>": value, ...} (as the counter's owner: see CallCallback). */
Datum
CrossingKey(const Crossing *x)
{
	if (x->key != (Datum)0)
		return x->key;
	const CounterDef *def = x->c->def;
	Oid *types = (Oid *)palloc(sizeof(Oid) * def->nkeys);
	for (int k = 0; k < def->nkeys; k++)
		types[k] = def->keys[k].type;
	return RenderKey(x->c->auth.role(), def->nkeys, x->c->key_columns, x->keys, x->key_nulls, types);
}

/*
 * The fields of a crossing, as the callback takes them: counter, key (jsonb, as top() renders keys), column, old, new,
 * threshold, direction; then every and crossed (the step of repeating thresholds and the multiples crossed: NULL and
 * 1 for a listed threshold), which a callback may take too.
 */
enum { CROSSING_FIELDS = 7, ALL_CROSSING_FIELDS = 9 };
const Oid field_types[ALL_CROSSING_FIELDS] = {TEXTOID,    JSONBOID, TEXTOID,    NUMERICOID, NUMERICOID,
                                              NUMERICOID, TEXTOID,  NUMERICOID, NUMERICOID};

Datum
NumericOf(int64 n)
{
	return NumericGetDatum(int64_to_numeric(n));
}

int
Compare(Datum a, Datum b)
{
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp, a, b));
}

/* floor(x / step) for a positive step, exactly (numeric division rounds to a scale of its choosing). */
Datum
FloorDiv(Datum x, Datum step)
{
	Datum q = DirectFunctionCall2(numeric_div_trunc, x, step);
	if (Compare(DirectFunctionCall2(numeric_mod, x, step), NumericOf(0)) < 0)
		q = DirectFunctionCall2(numeric_sub, q, NumericOf(1));
	return q;
}

/* All ALL_CROSSING_FIELDS fields of a crossing; nulls[] says which are NULL (every, for a listed threshold). */
void
CrossingFields(const Crossing *x, Datum *fields, bool *nulls)
{
	const CounterDef *def = x->c->def;
	fields[0] = CStringGetTextDatum(def->name);
	fields[1] = CrossingKey(x);
	fields[2] = CStringGetTextDatum(def->values[x->v].column_name);
	fields[3] = x->old_value;
	fields[4] = x->new_value;
	fields[5] = x->threshold;
	fields[6] = CStringGetTextDatum(x->up ? "up" : "down");
	fields[7] = x->every;
	fields[8] = x->every != (Datum)0 ? x->crossed : NumericOf(1);
	for (int f = 0; f < ALL_CROSSING_FIELDS; f++)
		nulls[f] = false;
	nulls[7] = x->every == (Datum)0;
}

/*
 * Call the callback of a crossing's column: the owner's code, run as the owner, restricted (its result ignored). The
 * key is rendered there too: jsonb calls a cast to json of a key's type that a role created, and its output function.
 */
void
CallCallback(const Crossing *x)
{
	CompiledCounter *c = x->c;
	FmgrInfo flinfo;
	if (!PrepareCallback(c, "threshold", c->def->values[x->v].column_name, c->callbacks[x->v],
	                     c->callback_missing[x->v], &flinfo))
		return;
	OwnerScope owner;
	EnterOwner(&owner, c->auth, PIN_SEARCH_PATH | PIN_OUTPUT);
	Datum fields[ALL_CROSSING_FIELDS];
	bool nulls[ALL_CROSSING_FIELDS];
	CrossingFields(x, fields, nulls);
	InvokeCallback(c, &flinfo, fields, nulls);
	LeaveOwner(&owner);
}

/*
 * PostgreSQL refuses to PREPARE a transaction that sent a NOTIFY, with a message that does not say why there was one:
 * name the counter whose threshold sent it.
 */
void
TransactionCallback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_PRE_PREPARE && notified_counter[0] != '\0')
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": a threshold crossed in this transaction sent a notification, which a "
		                       "prepared transaction cannot",
		                       notified_counter),
		                errdetail("Threshold events are sent with NOTIFY, and PREPARE TRANSACTION refuses transactions "
		                          "that executed NOTIFY."),
		                errhint("Commit such transactions directly, or remove the counter's thresholds.")));
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE ||
	    event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		notified_counter[0] = '\0';
}

void
SubtransactionCallback(SubXactEvent event, SubTransactionId sub, SubTransactionId parent, void *arg)
{
	if (notified_counter[0] == '\0')
		return;
	int level = GetCurrentTransactionNestLevel();
	if (event == SUBXACT_EVENT_ABORT_SUB && level <= notified_level)
		notified_counter[0] = '\0';
	else if (event == SUBXACT_EVENT_COMMIT_SUB && level == notified_level)
		notified_level = level - 1;
}

} // namespace

bool
PrepareCallback(const CompiledCounter *c, const char *kind, const char *column, Oid callback, bool missing,
                FmgrInfo *flinfo)
{
	/* (called through fmgr with the callback's arguments: anything but a function of that signature is refused) */
	if (missing || (OidIsValid(callback) && !IsThresholdCallback(callback)))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
		                errmsg("counter \"%s\": the %s callback of column \"%s\" no longer exists", c->def->name, kind,
		                       column),
		                errhint(strcmp(kind, "window") == 0
		                            ? "Set the window thresholds again with counters.set_window_thresholds()."
		                            : "Set the thresholds again with counters.set_thresholds().")));
	if (!OidIsValid(callback))
		return false;
	if (compat::FunctionAclCheck(callback, c->auth.role(), ACL_EXECUTE) != ACLCHECK_OK)
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("counter \"%s\": its owner %s may not execute the %s callback %s", c->def->name,
		                       GetUserNameFromId(c->auth.role(), false), kind, format_procedure(callback))));
	fmgr_info(callback, flinfo);
	return true;
}

void
InvokeCallback(const CompiledCounter *c, FmgrInfo *flinfo, const Datum *fields, const bool *nulls)
{
	RequireOwnerScope(c->auth.role());
	/* (seven arguments, or all nine: IsThresholdCallback() said so) */
	int nargs = flinfo->fn_nargs;
	/* (a STRICT callback is not called with a NULL argument, as SQL would not call it) */
	for (int a = 0; flinfo->fn_strict && a < nargs; a++)
		if (nulls[a])
			return;
	LOCAL_FCINFO(fcinfo, ALL_CROSSING_FIELDS);
	InitFunctionCallInfoData(*fcinfo, flinfo, nargs, InvalidOid, nullptr, nullptr);
	for (int a = 0; a < nargs; a++) {
		fcinfo->args[a].value = nulls[a] ? (Datum)0 : fields[a];
		fcinfo->args[a].isnull = nulls[a];
	}
	(void)FunctionCallInvoke(fcinfo);
}

Datum
RenderKey(Oid owner, int n, const char *const *names, const Datum *values, const bool *nulls, const Oid *types)
{
	return BuildObject(owner, F_JSONB_BUILD_OBJECT_ANY, JSONBOID, n, names, values, nulls, types);
}

Datum
ToNumeric(Datum value, Oid type)
{
	switch (type) {
	case INT8OID:
		return DirectFunctionCall1(int8_numeric, value);
	case INT4OID:
		return DirectFunctionCall1(int4_numeric, value);
	case INT2OID:
		return DirectFunctionCall1(int2_numeric, value);
	default:
		return value;
	}
}

void
CheckBounds(CompiledCounter *c, int v, Datum value, Oid type, Datum *keys, const char *key_nulls)
{
	if (c->has_min == nullptr || (!c->has_min[v] && !c->has_max[v]))
		return;
	Datum n = ToNumeric(value, type);
	bool below = c->has_min[v] && DatumGetInt32(DirectFunctionCall2(numeric_cmp, n, c->min[v])) < 0;
	bool above = c->has_max[v] && DatumGetInt32(DirectFunctionCall2(numeric_cmp, n, c->max[v])) > 0;
	if (!below && !above)
		return;
	/* (the keys' text, for the message: their types' output functions run as the owner) */
	RequireOwnerScope(c->auth.role());
	CounterDef *def = c->def;
	StringInfoData names, vals;
	initStringInfo(&names);
	initStringInfo(&vals);
	for (int k = 0; k < def->nkeys; k++) {
		appendStringInfo(&names, "%s%s", k ? ", " : "", quote_identifier(c->key_columns[k]));
		if (key_nulls != nullptr && key_nulls[k] == 'n')
			appendStringInfo(&vals, "%snull", k ? ", " : "");
		else {
			Oid out;
			bool varlena;
			getTypeOutputInfo(def->keys[k].type, &out, &varlena);
			appendStringInfo(&vals, "%s%s", k ? ", " : "", OidOutputFunctionCall(out, keys[k]));
		}
	}
	char *would = DatumGetCString(DirectFunctionCall1(numeric_out, n));
	char *bound = DatumGetCString(DirectFunctionCall1(numeric_out, below ? c->min[v] : c->max[v]));
	ereport(ERROR,
	        (errcode(ERRCODE_CHECK_VIOLATION),
	         errmsg("counter \"%s\": %s would be %s for key (%s)=(%s), %s its %s %s", def->name, c->value_columns[v],
	                would, names.data, vals.data, below ? "below" : "above", below ? "minimum" : "maximum", bound),
	         errhint("The bounds were set with counters.set_bounds().")));
}

namespace {

/* A crossing of value column `v` of `c` for the key in keys/key_nulls, noted (allocated in the current context). */
Crossing *
NewCrossing(CompiledCounter *c, int v, Datum *keys, const char *key_nulls, Datum old_value, Datum new_value)
{
	const CounterDef *def = c->def;
	Crossing *x = (Crossing *)palloc(sizeof(Crossing));
	x->c = c;
	x->v = v;
	x->keys = (Datum *)palloc(sizeof(Datum) * def->nkeys);
	x->key_nulls = (bool *)palloc(sizeof(bool) * def->nkeys);
	for (int k = 0; k < def->nkeys; k++) {
		x->key_nulls[k] = key_nulls != nullptr && key_nulls[k] == 'n';
		x->keys[k] = x->key_nulls[k] ? (Datum)0 : datumCopy(keys[k], c->key_byval[k], c->key_typlen[k]);
	}
	x->old_value = old_value;
	x->new_value = new_value;
	x->every = (Datum)0;
	x->crossed = (Datum)0;
	x->key = (Datum)0;
	crossings = lappend(crossings, x);
	return x;
}

} // namespace

void
NoteCrossings(CompiledCounter *c, int v, Datum value, Oid type, Datum delta, Datum *keys, const char *key_nulls)
{
	if (!c->has_thresholds || (c->nthresholds[v] == 0 && c->every[v] == (Datum)0))
		return;
	CounterDef *def = c->def;
	MemoryContext old = MemoryContextSwitchTo(CurTransactionContext);
	Datum new_value = ToNumeric(value, type);
	Datum old_value = DirectFunctionCall2(numeric_sub, new_value, ToNumeric(delta, StoredType(&def->values[v])));
	for (int t = 0; t < c->nthresholds[v]; t++) {
		Datum threshold = c->thresholds[v][t];
		bool was_below = Compare(old_value, threshold) < 0;
		bool is_below = Compare(new_value, threshold) < 0;
		if (was_below == is_below)
			continue;
		Crossing *x = NewCrossing(c, v, keys, key_nulls, old_value, new_value);
		x->threshold = threshold;
		x->up = was_below;
	}
	/*
	 * Repeating thresholds: the multiples k * every (k <> 0) that the value passed, those in (low, high] of its old
	 * and new value, are k = floor(low / every) + 1 ... floor(high / every), less k = 0. One crossing for them all, at
	 * the highest going up, the lowest going down.
	 */
	Datum every = c->every[v];
	int order = Compare(old_value, new_value);
	if (every != (Datum)0 && order != 0) {
		bool up = order < 0;
		Datum first = DirectFunctionCall2(numeric_add, FloorDiv(up ? old_value : new_value, every), NumericOf(1));
		Datum last = FloorDiv(up ? new_value : old_value, every);
		Datum crossed = DirectFunctionCall2(numeric_add, DirectFunctionCall2(numeric_sub, last, first), NumericOf(1));
		if (Compare(first, NumericOf(0)) <= 0 && Compare(last, NumericOf(0)) >= 0)
			crossed = DirectFunctionCall2(numeric_sub, crossed, NumericOf(1));
		if (Compare(crossed, NumericOf(0)) > 0) {
			Datum k = up ? last : first;
			if (Compare(k, NumericOf(0)) == 0)
				k = NumericOf(up ? -1 : 1);
			Crossing *x = NewCrossing(c, v, keys, key_nulls, old_value, new_value);
			x->threshold = DirectFunctionCall2(numeric_mul, k, every);
			x->up = up;
			x->every = every;
			x->crossed = crossed;
		}
	}
	MemoryContextSwitchTo(old);
}

bool
IsThresholdCallback(Oid proc_oid)
{
	HeapTuple tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(proc_oid));
	if (!HeapTupleIsValid(tup))
		return false;
	Form_pg_proc proc = (Form_pg_proc)GETSTRUCT(tup);
	bool ok = proc->prokind == PROKIND_FUNCTION && !proc->proretset &&
	          (proc->pronargs == CROSSING_FIELDS || proc->pronargs == ALL_CROSSING_FIELDS);
	for (int a = 0; ok && a < proc->pronargs; a++)
		ok = proc->proargtypes.values[a] == field_types[a];
	ReleaseSysCache(tup);
	return ok;
}

List *
StartCrossings()
{
	List *enclosing = crossings;
	crossings = NIL;
	return enclosing;
}

List *
TakeCrossings(List *enclosing)
{
	List *mine = crossings;
	crossings = enclosing;
	return mine;
}

/*
 * Announce each crossing: NOTIFY on channel "counters.<counter>" (delivered if the transaction commits), then the
 * counter's callback for the column, if any.
 */
void
AnnounceCrossings(List *list)
{
	ListCell *lc;
	foreach (lc, list) {
		Crossing *x = (Crossing *)lfirst(lc);
		NotifyCrossing(x->c->def->name, x->c->def->values[x->v].column_name);
		CallCallback(x);
	}
}

namespace {

/* `value` (numeric) as a JSON string, or null ((Datum)0). */
void
AppendNumeric(StringInfo out, const char *field, Datum value)
{
	appendStringInfo(out, ", \"%s\": ", field);
	if (value == (Datum)0)
		appendStringInfoString(out, "null");
	else
		escape_json(out, DatumGetCString(DirectFunctionCall1(numeric_out, value)));
}

} // namespace

char *
CompactionReport(int64 folded, List *list)
{
	StringInfoData out;
	initStringInfo(&out);
	appendStringInfo(&out, "{\"folded\": " INT64_FORMAT ", \"crossings\": [", folded);
	ListCell *lc;
	foreach (lc, list) {
		Crossing *x = (Crossing *)lfirst(lc);
		/* (the key rendered as the owner: a key type's cast to json and output function are the owner's code) */
		OwnerScope owner;
		EnterOwner(&owner, x->c->auth, PIN_SEARCH_PATH | PIN_OUTPUT);
		Datum key = CrossingKey(x);
		LeaveOwner(&owner);
		appendStringInfoString(&out, foreach_current_index(lc) > 0 ? ", {\"column\": " : "{\"column\": ");
		escape_json(&out, x->c->def->values[x->v].column_name);
		appendStringInfo(&out, ", \"key\": %s", JsonbToCString(nullptr, &DatumGetJsonbP(key)->root, 0));
		AppendNumeric(&out, "old", x->old_value);
		AppendNumeric(&out, "new", x->new_value);
		AppendNumeric(&out, "threshold", x->threshold);
		appendStringInfo(&out, ", \"direction\": \"%s\"", x->up ? "up" : "down");
		AppendNumeric(&out, "every", x->every);
		AppendNumeric(&out, "crossed", x->crossed);
		appendStringInfoChar(&out, '}');
	}
	appendStringInfoString(&out, "]}");
	return out.data;
}

List *
ReportedCompaction(const char *counter, CompiledCounter *c, const char *report, int64 *folded)
{
	/*
	 * Another node's report, read as data: the rows folded; and (c: the counter with its thresholds) each crossing
	 * must name a value column of `c`, a key object with exactly the counter's key columns, numbers and a direction --
	 * anything else is an error, not an event.
	 */
	SpiConnect();
	int level = PinSettings(PIN_SEARCH_PATH);
	Oid argtypes[2] = {TEXTOID, TEXTARRAYOID};
	Datum args[2] = {CStringGetTextDatum(report), (Datum)0};
	if (SPI_execute_with_args("SELECT ($1::pg_catalog.jsonb OPERATOR(pg_catalog.->>) 'folded')::pg_catalog.int8", 1,
	                          argtypes, args, nullptr, true, 0) != SPI_OK_SELECT ||
	    SPI_processed != 1)
		elog(ERROR, "counters: reading a compaction report of counter \"%s\" failed", counter);
	bool isnull;
	Datum n = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
		                errmsg("counter \"%s\": a node's compaction report says nothing of the rows folded", counter),
		                errdetail("Reported: %s", report)));
	*folded = DatumGetInt64(n);
	if (c == nullptr) {
		UnpinSettings(level);
		SPI_finish();
		return NIL;
	}
	const CounterDef *def = c->def;
	Datum *names = (Datum *)palloc(sizeof(Datum) * def->nkeys);
	for (int k = 0; k < def->nkeys; k++)
		names[k] = CStringGetTextDatum(c->key_columns[k]);
	args[1] = PointerGetDatum(construct_array(names, def->nkeys, TEXTOID, -1, false, TYPALIGN_INT));
	if (SPI_execute_with_args(
	        "SELECT r.column, r.key, r.old, r.new, r.threshold, r.direction, r.every, r.crossed, "
	        "       pg_catalog.jsonb_typeof(r.key) OPERATOR(pg_catalog.=) 'object' AND "
	        "       (SELECT pg_catalog.array_agg(k ORDER BY k) FROM pg_catalog.jsonb_object_keys("
	        "          CASE pg_catalog.jsonb_typeof(r.key) WHEN 'object' THEN r.key END) k) "
	        "       OPERATOR(pg_catalog.=) (SELECT pg_catalog.array_agg(k ORDER BY k) FROM pg_catalog.unnest($2) k) "
	        "  FROM pg_catalog.jsonb_to_recordset($1::pg_catalog.jsonb OPERATOR(pg_catalog.->) 'crossings') "
	        "       AS r(\"column\" pg_catalog.text, key pg_catalog.jsonb, old pg_catalog.numeric, "
	        "            new pg_catalog.numeric, threshold pg_catalog.numeric, direction pg_catalog.text, "
	        "            every pg_catalog.numeric, crossed pg_catalog.numeric)",
	        2, argtypes, args, nullptr, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "counters: reading the crossings reported for counter \"%s\" failed", counter);
	MemoryContext old = MemoryContextSwitchTo(CurTransactionContext);
	List *enclosing = StartCrossings();
	TupleDesc desc = SPI_tuptable->tupdesc;
	for (uint64 r = 0; r < SPI_processed; r++) {
		enum { FIELDS = 9 };
		bool nulls[FIELDS];
		Datum f[FIELDS];
		for (int i = 0; i < FIELDS; i++)
			f[i] = SPI_getbinval(SPI_tuptable->vals[r], desc, i + 1, &nulls[i]);
		int v = -1;
		for (int i = 0; !nulls[0] && i < def->nvalues; i++)
			if (strcmp(def->values[i].column_name, TextDatumGetCString(f[0])) == 0)
				v = i;
		const char *direction = nulls[5] ? "" : TextDatumGetCString(f[5]);
		if (v < 0 || nulls[8] || !DatumGetBool(f[8]) || nulls[2] || nulls[3] || nulls[4] || nulls[6] != nulls[7] ||
		    (strcmp(direction, "up") != 0 && strcmp(direction, "down") != 0))
			ereport(ERROR,
			        (errcode(ERRCODE_DATA_CORRUPTED),
			         errmsg("counter \"%s\": a node reported a crossing that is not one of its value columns", counter),
			         errdetail("Reported: %s", report)));
		Crossing *x = (Crossing *)palloc(sizeof(Crossing));
		x->c = c;
		x->v = v;
		x->keys = nullptr;
		x->key_nulls = nullptr;
		x->key = datumCopy(f[1], false, -1);
		x->old_value = datumCopy(f[2], false, -1);
		x->new_value = datumCopy(f[3], false, -1);
		x->threshold = datumCopy(f[4], false, -1);
		x->up = strcmp(direction, "up") == 0;
		x->every = nulls[6] ? (Datum)0 : datumCopy(f[6], false, -1);
		x->crossed = nulls[7] ? (Datum)0 : datumCopy(f[7], false, -1);
		crossings = lappend(crossings, x);
	}
	List *mine = TakeCrossings(enclosing);
	MemoryContextSwitchTo(old);
	UnpinSettings(level);
	SPI_finish();
	return mine;
}

void
NotifyCrossing(const char *counter, const char *column)
{
	/*
	 * The payload names the counter and the column, as counters.thresholds shows them to every role: no key, no
	 * value. Any role may LISTEN on any channel, and NOTIFY on it too, so a notification is a hint to look, never a
	 * fact: the facts go to the callback, as the owner, which may keep them where the counter's grants apply.
	 * (Identical payloads of one transaction are delivered once.)
	 */
	StringInfoData payload;
	initStringInfo(&payload);
	appendStringInfoString(&payload, "{\"counter\": ");
	escape_json(&payload, counter);
	appendStringInfoString(&payload, ", \"column\": ");
	escape_json(&payload, column);
	appendStringInfoChar(&payload, '}');
	Async_Notify(psprintf("counters.%s", counter), payload.data);
	if (notified_counter[0] == '\0') {
		strlcpy(notified_counter, counter, sizeof(notified_counter));
		notified_level = GetCurrentTransactionNestLevel();
	}
}

void
InitDecisions()
{
	RegisterXactCallback(TransactionCallback, nullptr);
	RegisterSubXactCallback(SubtransactionCallback, nullptr);
}

} // namespace counters
