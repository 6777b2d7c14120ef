/*
 * options.cpp: a counter's options (counters.counter.options), typed. The catalog keeps them as one jsonb object,
 * which pg_dump dumps as text; this file is the one place that reads and writes its keys and shapes:
 *
 *   {"bounds":      {"<value column>": {"min": n, "max": n}, ...},
 *    "thresholds":  {"<value column>": {"values": [n, ...], "every": n, "callback": "<regprocedure>"}, ...},
 *    "window":      {"bucket": "<key column>", "width": "<interval>",
 *                    "columns": {"<value column>": {"values": [n, ...], "callback": "<regprocedure>"}, ...}},
 *    "retention":   {"column": "<key column>", "keep": "<interval>"},
 *    "touch":       "<column of the target>",
 *    "keep_zero":   true,
 *    "deferred":    true,
 *    "part_of":     "<counter>",  (a level of a counter through a chain of parent rows: chain.cpp)
 *    "chain":       "<definition>",  (that counter's whole definition, as declared)
 *    "max_slots":   n,
 *    "building":    {"mode": "exact" | "log" | "sharded", "max_slots": n},
 *    "last_rebuild": ...}
 *
 * Column names are the definition's. Each catalog row read (catalog.cpp) is parsed here once, into the
 * Counter; the compiled form (compile.cpp) and the control plane read the typed fields. Written back from the typed
 * fields too (OptionsJsonb and the jsonb of one key), never from text put together by hand.
 */
#include "model/model.hpp"

extern "C" {
#include "access/genam.h"
#include "catalog/pg_type.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "access/stratnum.h"
#include "access/xlog.h"
#include "utils/rel.h"
#include "access/table.h"
#include "catalog/pg_subscription.h"
#include "catalog/pg_subscription_rel.h"
#include "catalog/pg_trigger.h"
#include "mb/pg_wchar.h"
#include "parser/parse_func.h"
#include "utils/fmgroids.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/regproc.h"
}

namespace counters {

namespace {

/* A string value as a C string, or NULL (absent, or of another type). */
const char *
StringOf(const JsonbValue *v)
{
	if (v == nullptr || v->type != jbvString)
		return nullptr;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* Whether `text` is a plain decimal number (digits, a sign, a point), which numeric_in reads without failing. */
bool
IsDecimalText(const char *text, int len)
{
	int i = len > 0 && (text[0] == '-' || text[0] == '+') ? 1 : 0;
	int digits = 0, points = 0;
	for (; i < len; i++) {
		if (text[i] >= '0' && text[i] <= '9')
			digits++;
		else if (text[i] == '.' && points++ == 0)
			continue;
		else
			return false;
	}
	return digits > 0 && len <= 1000;
}

/*
 * A number value as numeric (a copy), or (Datum)0. A string that reads as a plain decimal is taken too (as ->> would);
 * any other string makes the options invalid (*invalid says why: reading them never fails, see ParseOptions).
 */
Datum
NumericOf(const JsonbValue *v, const char **invalid)
{
	if (v == nullptr)
		return (Datum)0;
	if (v->type == jbvNumeric)
		return datumCopy(NumericGetDatum(v->val.numeric), false, -1);
	if (v->type == jbvString && IsDecimalText(v->val.string.val, v->val.string.len))
		return DirectFunctionCall3(numeric_in, CStringGetDatum(pnstrdup(v->val.string.val, v->val.string.len)),
		                           ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	if (v->type == jbvString && *invalid == nullptr)
		*invalid = psprintf("\"%s\" is not a number", pnstrdup(v->val.string.val, Min(v->val.string.len, 40)));
	return (Datum)0;
}

/* A number from `min` to `max` as an int (-1: none, or out of that range, which makes the options invalid). */
int
SmallIntOf(Datum number, int min, int max, const char *what, const char **invalid)
{
	if (number == (Datum)0)
		return -1;
	Numeric n = DatumGetNumeric(number);
	bool fits = !numeric_is_nan(n) &&
	            DatumGetBool(DirectFunctionCall2(numeric_ge, number, DirectFunctionCall1(int4_numeric, min))) &&
	            DatumGetBool(DirectFunctionCall2(numeric_le, number, DirectFunctionCall1(int4_numeric, max)));
	if (fits)
		return DatumGetInt32(DirectFunctionCall1(numeric_int4, number));
	if (*invalid == nullptr)
		*invalid = psprintf("%s must be from %d to %d, not %s", what, min, max,
		                    DatumGetCString(DirectFunctionCall1(numeric_out, number)));
	return -1;
}

/* The object or array container of a value, or NULL. */
JsonbContainer *
ContainerOf(const JsonbValue *v)
{
	return v != nullptr && v->type == jbvBinary ? v->val.binary.data : nullptr;
}

const JsonbValue *
Field(JsonbContainer *object, const char *key)
{
	if (object == nullptr || !JsonContainerIsObject(object))
		return nullptr;
	JsonbValue *out = (JsonbValue *)palloc(sizeof(JsonbValue));
	return getKeyJsonValueFromContainer(object, key, (uint32)strlen(key), out);
}

/*
 * The fields of an object, one by one: *it from FirstField (NULL: not an object), then NextField until false. Keys come
 * in jsonb's order (by length, then bytes).
 */
JsonbIterator *
FirstField(JsonbContainer *object)
{
	return object != nullptr && JsonContainerIsObject(object) ? JsonbIteratorInit(object) : nullptr;
}

bool
NextField(JsonbIterator **it, const char **key, JsonbValue *value)
{
	if (*it == nullptr)
		return false;
	JsonbIteratorToken token;
	while ((token = JsonbIteratorNext(it, value, true)) != WJB_DONE) {
		if (token == WJB_KEY)
			*key = pnstrdup(value->val.string.val, value->val.string.len);
		else if (token == WJB_VALUE)
			return true;
	}
	*it = nullptr;
	return false;
}

int
CountFields(JsonbContainer *object)
{
	return object != nullptr && JsonContainerIsObject(object) ? (int)JsonContainerSize(object) : 0;
}

/* The numbers of an array (values), in its order. */
void
ReadValues(const JsonbValue *array, int *n, Datum **values, const char **invalid)
{
	*n = 0;
	*values = nullptr;
	JsonbContainer *c = ContainerOf(array);
	if (c == nullptr || !JsonContainerIsArray(c))
		return;
	*values = (Datum *)palloc(sizeof(Datum) * Max(JsonContainerSize(c), 1));
	JsonbIterator *it = JsonbIteratorInit(c);
	JsonbValue v;
	JsonbIteratorToken token;
	while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
		if (token != WJB_ELEM)
			continue;
		Datum d = NumericOf(&v, invalid);
		if (d != (Datum)0)
			(*values)[(*n)++] = d;
	}
}

/* {"<column>": {"values": [...], "every": n, "callback": "..."}, ...}, the columns in jsonb's order or (sorted) C's. */
ColumnThresholds *
ReadColumnThresholds(JsonbContainer *object, int *n, bool sorted, const char **invalid)
{
	*n = CountFields(object);
	ColumnThresholds *out = (ColumnThresholds *)palloc0(sizeof(ColumnThresholds) * Max(*n, 1));
	int i = 0;
	JsonbIterator *it = FirstField(object);
	const char *column;
	JsonbValue v;
	while (i < *n && NextField(&it, &column, &v)) {
		ColumnThresholds *t = &out[i];
		JsonbContainer *entry = ContainerOf(&v);
		t->column = column;
		ReadValues(Field(entry, "values"), &t->nvalues, &t->values, invalid);
		t->every = NumericOf(Field(entry, "every"), invalid);
		t->callback = StringOf(Field(entry, "callback"));
		int j = i++;
		for (; sorted && j > 0 && strcmp(out[j - 1].column, out[j].column) > 0; j--) {
			ColumnThresholds tmp = out[j - 1];
			out[j - 1] = out[j];
			out[j] = tmp;
		}
	}
	*n = i;
	return out;
}

} // namespace

const CounterOptions *
ParseOptions(Datum options, bool isnull)
{
	CounterOptions *o = (CounterOptions *)palloc0(sizeof(CounterOptions));
	o->max_slots = MAX_SLOTS_DEFAULT;
	if (isnull)
		return o;
	JsonbContainer *root = &DatumGetJsonbP(options)->root;
	if (!JsonContainerIsObject(root)) {
		o->invalid = "they are not a JSON object";
		return o;
	}

	JsonbContainer *bounds = ContainerOf(Field(root, "bounds"));
	o->nbounds = CountFields(bounds);
	o->bounds = (ColumnBounds *)palloc0(sizeof(ColumnBounds) * Max(o->nbounds, 1));
	int i = 0;
	JsonbIterator *it = FirstField(bounds);
	const char *column;
	JsonbValue v;
	while (i < o->nbounds && NextField(&it, &column, &v)) {
		ColumnBounds *b = &o->bounds[i++];
		b->column = column;
		b->min = NumericOf(Field(ContainerOf(&v), "min"), &o->invalid);
		b->max = NumericOf(Field(ContainerOf(&v), "max"), &o->invalid);
		b->has_min = b->min != (Datum)0;
		b->has_max = b->max != (Datum)0;
	}
	o->nbounds = i;

	o->thresholds = ReadColumnThresholds(ContainerOf(Field(root, "thresholds")), &o->nthresholds, false, &o->invalid);

	const JsonbValue *window = Field(root, "window");
	if (window != nullptr) {
		WindowOptions *w = (WindowOptions *)palloc0(sizeof(WindowOptions));
		w->bucket = StringOf(Field(ContainerOf(window), "bucket"));
		w->width = StringOf(Field(ContainerOf(window), "width"));
		w->columns =
		    ReadColumnThresholds(ContainerOf(Field(ContainerOf(window), "columns")), &w->ncolumns, true, &o->invalid);
		o->window = w;
	}

	const JsonbValue *retention = Field(root, "retention");
	if (retention != nullptr) {
		o->retention_column = StringOf(Field(ContainerOf(retention), "column"));
		o->retention_keep = StringOf(Field(ContainerOf(retention), "keep"));
	}
	o->touch = StringOf(Field(root, "touch"));
	o->part_of = StringOf(Field(root, "part_of"));
	o->chain = StringOf(Field(root, "chain"));
	o->keep_zero = Field(root, "keep_zero") != nullptr;
	o->deferred = Field(root, "deferred") != nullptr;

	int max_slots = SmallIntOf(NumericOf(Field(root, "max_slots"), &o->invalid), MAX_SLOTS_MIN, MAX_SLOTS_MAX,
	                           "max_slots", &o->invalid);
	if (max_slots != -1) {
		o->max_slots_set = true;
		o->max_slots = max_slots;
	}

	const JsonbValue *building = Field(root, "building");
	if (building != nullptr) {
		o->building = true;
		const char *mode = StringOf(Field(ContainerOf(building), "mode"));
		o->building_has_mode = mode != nullptr;
		o->building_mode = mode != nullptr ? ParseModeName(mode) : Mode::Exact;
		o->building_max_slots = SmallIntOf(NumericOf(Field(ContainerOf(building), "max_slots"), &o->invalid),
		                                   MAX_SLOTS_MIN, MAX_SLOTS_MAX, "building's max_slots", &o->invalid);
	}
	return o;
}

void
RequireValidOptions(const Counter *e)
{
	if (e->options->invalid != nullptr)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": its options in counters.counter are invalid: %s", e->name,
		                       e->options->invalid),
		                errhint("Drop the counter with counters.drop_counter('%s') and declare it again.", e->name)));
}

const CounterOptions *
CurrentOptions(const char *name)
{
	List *entries = ReadCatalog(name);
	if (entries == NIL)
		return ParseOptions((Datum)0, true);
	return ((Counter *)linitial(entries))->options;
}

bool
IsTimeBucketType(Oid type)
{
	return type == DATEOID || type == TIMESTAMPOID || type == TIMESTAMPTZOID;
}

Oid
ResolveCallback(const char *callback)
{
	if (callback == nullptr)
		return InvalidOid;
	/* (written qualified: resolved with nothing but pg_catalog on the path, whoever reads it) */
	int level = PinSettings(PIN_SEARCH_PATH);
	LOCAL_FCINFO(fcinfo, 1);
	InitFunctionCallInfoData(*fcinfo, nullptr, 1, InvalidOid, nullptr, nullptr);
	fcinfo->args[0].value = CStringGetTextDatum(callback);
	fcinfo->args[0].isnull = false;
	Datum proc = to_regprocedure(fcinfo);
	UnpinSettings(level);
	return fcinfo->isnull ? InvalidOid : DatumGetObjectId(proc);
}

/* ---- writing options back: jsonb built here, from the typed fields ---- */

namespace {

/*
 * Each Push* pushes one value, objects and arrays from their beginning to their end, and returns what the last push
 * returned: at the top level, the whole value.
 */
JsonbValue *
PushString(JsonbParseState **state, JsonbIteratorToken token, const char *text)
{
	JsonbValue v;
	v.type = jbvString;
	v.val.string.val = (char *)text;
	v.val.string.len = (int)strlen(text);
	return pushJsonbValue(state, token, &v);
}

JsonbValue *
PushNumeric(JsonbParseState **state, JsonbIteratorToken token, Datum n)
{
	JsonbValue v;
	v.type = jbvNumeric;
	v.val.numeric = DatumGetNumeric(n);
	return pushJsonbValue(state, token, &v);
}

JsonbValue *
PushBounds(JsonbParseState **state, int n, const ColumnBounds *bounds)
{
	(void)pushJsonbValue(state, WJB_BEGIN_OBJECT, nullptr);
	for (int i = 0; i < n; i++) {
		PushString(state, WJB_KEY, bounds[i].column);
		(void)pushJsonbValue(state, WJB_BEGIN_OBJECT, nullptr);
		if (bounds[i].has_min) {
			PushString(state, WJB_KEY, "min");
			PushNumeric(state, WJB_VALUE, bounds[i].min);
		}
		if (bounds[i].has_max) {
			PushString(state, WJB_KEY, "max");
			PushNumeric(state, WJB_VALUE, bounds[i].max);
		}
		(void)pushJsonbValue(state, WJB_END_OBJECT, nullptr);
	}
	return pushJsonbValue(state, WJB_END_OBJECT, nullptr);
}

JsonbValue *
PushThresholds(JsonbParseState **state, int n, const ColumnThresholds *thresholds)
{
	(void)pushJsonbValue(state, WJB_BEGIN_OBJECT, nullptr);
	for (int i = 0; i < n; i++) {
		const ColumnThresholds *t = &thresholds[i];
		PushString(state, WJB_KEY, t->column);
		(void)pushJsonbValue(state, WJB_BEGIN_OBJECT, nullptr);
		if (t->nvalues > 0) {
			PushString(state, WJB_KEY, "values");
			(void)pushJsonbValue(state, WJB_BEGIN_ARRAY, nullptr);
			for (int j = 0; j < t->nvalues; j++)
				PushNumeric(state, WJB_ELEM, t->values[j]);
			(void)pushJsonbValue(state, WJB_END_ARRAY, nullptr);
		}
		if (t->every != (Datum)0) {
			PushString(state, WJB_KEY, "every");
			PushNumeric(state, WJB_VALUE, t->every);
		}
		if (t->callback != nullptr) {
			PushString(state, WJB_KEY, "callback");
			PushString(state, WJB_VALUE, t->callback);
		}
		(void)pushJsonbValue(state, WJB_END_OBJECT, nullptr);
	}
	return pushJsonbValue(state, WJB_END_OBJECT, nullptr);
}

JsonbValue *
PushWindow(JsonbParseState **state, const WindowOptions *w)
{
	(void)pushJsonbValue(state, WJB_BEGIN_OBJECT, nullptr);
	PushString(state, WJB_KEY, "bucket");
	PushString(state, WJB_VALUE, w->bucket);
	PushString(state, WJB_KEY, "width");
	PushString(state, WJB_VALUE, w->width);
	PushString(state, WJB_KEY, "columns");
	PushThresholds(state, w->ncolumns, w->columns);
	return pushJsonbValue(state, WJB_END_OBJECT, nullptr);
}

Datum
JsonbOfValue(JsonbValue *v)
{
	return JsonbPGetDatum(JsonbValueToJsonb(v));
}

} // namespace

namespace {

/* A scalar as a jsonb value of its own. */
Datum
ScalarJsonb(JsonbValue v)
{
	return JsonbOfValue(&v);
}

Datum
StringJsonb(const char *text)
{
	JsonbValue v;
	v.type = jbvString;
	v.val.string.val = pstrdup(text);
	v.val.string.len = (int)strlen(text);
	return ScalarJsonb(v);
}

Datum
IntJsonb(int n)
{
	JsonbValue v;
	v.type = jbvNumeric;
	v.val.numeric = DatumGetNumeric(DirectFunctionCall1(int4_numeric, Int32GetDatum(n)));
	return ScalarJsonb(v);
}

/* Each key's value from the typed fields, or (Datum)0 when the options have none. */
Datum
BoundsValue(const CounterOptions *o)
{
	JsonbParseState *state = nullptr;
	return o->nbounds == 0 ? (Datum)0 : JsonbOfValue(PushBounds(&state, o->nbounds, o->bounds));
}

Datum
ThresholdsValue(const CounterOptions *o)
{
	JsonbParseState *state = nullptr;
	return o->nthresholds == 0 ? (Datum)0 : JsonbOfValue(PushThresholds(&state, o->nthresholds, o->thresholds));
}

Datum
WindowValue(const CounterOptions *o)
{
	JsonbParseState *state = nullptr;
	return o->window == nullptr || o->window->ncolumns == 0 ? (Datum)0 : JsonbOfValue(PushWindow(&state, o->window));
}

Datum
RetentionValue(const CounterOptions *o)
{
	if (o->retention_column == nullptr || o->retention_keep == nullptr)
		return (Datum)0;
	JsonbParseState *state = nullptr;
	(void)pushJsonbValue(&state, WJB_BEGIN_OBJECT, nullptr);
	PushString(&state, WJB_KEY, "column");
	PushString(&state, WJB_VALUE, o->retention_column);
	PushString(&state, WJB_KEY, "keep");
	PushString(&state, WJB_VALUE, o->retention_keep);
	return JsonbOfValue(pushJsonbValue(&state, WJB_END_OBJECT, nullptr));
}

Datum
TouchValue(const CounterOptions *o)
{
	return o->touch == nullptr ? (Datum)0 : StringJsonb(o->touch);
}

Datum
PartOfValue(const CounterOptions *o)
{
	return o->part_of == nullptr ? (Datum)0 : StringJsonb(o->part_of);
}

Datum
ChainValue(const CounterOptions *o)
{
	return o->chain == nullptr ? (Datum)0 : StringJsonb(o->chain);
}

Datum
KeepZeroValue(const CounterOptions *o)
{
	JsonbValue v;
	v.type = jbvBool;
	v.val.boolean = true;
	return o->keep_zero ? ScalarJsonb(v) : (Datum)0;
}

Datum
DeferredValue(const CounterOptions *o)
{
	JsonbValue v;
	v.type = jbvBool;
	v.val.boolean = true;
	return o->deferred ? ScalarJsonb(v) : (Datum)0;
}

Datum
MaxSlotsValue(const CounterOptions *o)
{
	return o->max_slots_set ? IntJsonb(o->max_slots) : (Datum)0;
}

Datum
BuildingValue(const CounterOptions *o)
{
	if (!o->building)
		return (Datum)0;
	JsonbParseState *state = nullptr;
	(void)pushJsonbValue(&state, WJB_BEGIN_OBJECT, nullptr);
	if (o->building_has_mode) {
		PushString(&state, WJB_KEY, "mode");
		PushString(&state, WJB_VALUE, ModeName(o->building_mode));
	}
	if (o->building_max_slots > 0) {
		PushString(&state, WJB_KEY, "max_slots");
		PushNumeric(&state, WJB_VALUE, DirectFunctionCall1(int4_numeric, Int32GetDatum(o->building_max_slots)));
	}
	return JsonbOfValue(pushJsonbValue(&state, WJB_END_OBJECT, nullptr));
}

/*
 * The keys of the options object, one row each, in the order they are written: the user's settings, which
 * OptionsJsonb writes and a description carries, and the counter's own state (`state`), which neither does; each
 * key's value from the typed fields (last_rebuild, kept from older versions, is read by no one and never written).
 */
struct OptionKey {
	const char *key;
	bool state;
	Datum (*value)(const CounterOptions *o);
};
const OptionKey OPTION_KEYS[] = {
    {"bounds", false, BoundsValue},       {"thresholds", false, ThresholdsValue}, {"window", false, WindowValue},
    {"retention", false, RetentionValue}, {"touch", false, TouchValue},           {"keep_zero", false, KeepZeroValue},
    {"deferred", false, DeferredValue},   {"max_slots", false, MaxSlotsValue},    {"part_of", false, PartOfValue},
    {"chain", false, ChainValue},         {"building", true, BuildingValue},      {"last_rebuild", true, nullptr},
};

const OptionKey *
KeyOf(const char *key)
{
	for (const OptionKey &k : OPTION_KEYS)
		if (strcmp(k.key, key) == 0)
			return &k;
	return nullptr;
}

} // namespace

Datum
OptionsJsonb(const CounterOptions *o)
{
	JsonbParseState *state = nullptr;
	(void)pushJsonbValue(&state, WJB_BEGIN_OBJECT, nullptr);
	for (const OptionKey &k : OPTION_KEYS) {
		Datum value = k.state ? (Datum)0 : k.value(o);
		if (value == (Datum)0)
			continue;
		PushString(&state, WJB_KEY, k.key);
		Jsonb *j = DatumGetJsonbP(value);
		JsonbValue v;
		if (JB_ROOT_IS_SCALAR(j))
			(void)JsonbExtractScalar(&j->root, &v);
		else {
			v.type = jbvBinary;
			v.val.binary.data = &j->root;
			v.val.binary.len = (int)VARSIZE(j) - VARHDRSZ;
		}
		(void)pushJsonbValue(&state, WJB_VALUE, &v);
	}
	return JsonbOfValue(pushJsonbValue(&state, WJB_END_OBJECT, nullptr));
}

Datum
OptionJsonb(const CounterOptions *o, const char *key, bool *isnull)
{
	const OptionKey *k = KeyOf(key);
	if (k == nullptr || k->value == nullptr)
		elog(ERROR, "counters: option \"%s\" is not written", key);
	Datum value = k->value(o);
	*isnull = value == (Datum)0;
	return value;
}

bool
IsOptionKey(const char *key)
{
	return KeyOf(key) != nullptr;
}

Datum
OptionKeys(bool state)
{
	ArrayBuildState *keys = initArrayResult(TEXTOID, CurrentMemoryContext, false);
	for (const OptionKey &k : OPTION_KEYS)
		if (k.state == state)
			keys = accumArrayResult(keys, CStringGetTextDatum(k.key), false, TEXTOID, CurrentMemoryContext);
	return makeArrayResult(keys, CurrentMemoryContext);
}

} // namespace counters
