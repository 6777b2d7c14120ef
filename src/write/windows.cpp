/*
 * windows.cpp: thresholds on a sliding-window sum ("a hashtag trends when it reaches 10,000 uses in a region within
 * 24 hours").
 *
 * An exact counter keyed by a time bucket (and other keys: the prefix) has at most one window: its bucket key column
 * and a width. A value column's window sum for a prefix is the sum of its rows whose bucket is later than
 * now() - width. Which thresholds each prefix's window sum is at or above, as announced, is kept in a table of the
 * counter owner's (counters.counter.crossings, <table>_crossings); a crossing is announced when that changes, once:
 *   - a statement that writes the counter checks the prefixes it wrote, once its deltas are applied (what it wrote and
 *     what others committed count; a concurrent writer of another bucket of the same prefix can be missed, and is
 *     found by the next check_windows());
 *   - counters.check_windows() checks every prefix: buckets ageing out of the window (no write happens then) and
 *     anything missed. compact() calls it, so the compaction worker or a scheduler does it.
 * Crossings are announced as thresholds' are: NOTIFY "counters.<name>" (delivered at commit) with the window in the
 * payload, then the callback, with old NULL (a window sum checked now has no "before" to compare with).
 */
#include "write/write.hpp"
#include "compat.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"
#include "funcapi.h"
#include "utils/tuplestore.h"
}

namespace counters {

namespace {

} // namespace

WindowConfig *
ReadWindow(const Counter *e)
{
	const WindowOptions *o = e->options->window;
	if (o == nullptr || o->ncolumns == 0)
		return nullptr;
	WindowConfig *w = (WindowConfig *)palloc0(sizeof(WindowConfig));
	w->bucket = pstrdup(o->bucket != nullptr ? o->bucket : "");
	w->width = pstrdup(o->width != nullptr ? o->width : "");
	w->ncolumns = o->ncolumns;
	w->columns = (char **)palloc(sizeof(char *) * w->ncolumns);
	w->thresholds = (Datum *)palloc(sizeof(Datum) * w->ncolumns);
	w->callbacks = (Oid *)palloc(sizeof(Oid) * w->ncolumns);
	w->callback_missing = (bool *)palloc(sizeof(bool) * w->ncolumns);
	w->crossings = e->crossings;
	for (int i = 0; i < w->ncolumns; i++) {
		const ColumnThresholds *t = &o->columns[i];
		w->columns[i] = pstrdup(t->column);
		w->thresholds[i] = PointerGetDatum(construct_array(t->values, t->nvalues, NUMERICOID, -1, false, TYPALIGN_INT));
		w->callbacks[i] = ResolveCallback(t->callback);
		w->callback_missing[i] = t->callback != nullptr && !OidIsValid(w->callbacks[i]);
	}
	return w;
}

namespace {

/*
 * Check the window sums of counter `c` (SPI connected, settings pinned): with `prefixes` (one array per prefix key
 * column) the prefixes a statement wrote, else every prefix. Returns the crossings announced.
 */
int64
Check(CompiledCounter *c, const WindowConfig *w, Datum *prefixes)
{
	int bucket = -1;
	for (int k = 0; k < c->def->nkeys; k++)
		if (strcmp(c->key_columns[k], w->bucket) == 0)
			bucket = k;
	if (bucket < 0)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
		                errmsg("counter \"%s\": its window's bucket column \"%s\" is gone", c->def->name, w->bucket),
		                errhint("Set its window thresholds again with counters.set_window_thresholds().")));
	/*
	 * The window sums, as the counter's owner: of the prefixes written, only those where a threshold's state would
	 * change (usually none, and then nothing more is done); else of every prefix.
	 */
	if (!OidIsValid(w->crossings))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("counter \"%s\" has window thresholds but no table of their state", c->def->name),
		                errhint("Set its window thresholds again with counters.set_window_thresholds().")));
	int np = c->def->nkeys - 1;
	int nargs = prefixes != nullptr ? np + 1 + 2 * w->ncolumns : 1;
	Oid *argtypes = (Oid *)palloc(sizeof(Oid) * nargs);
	Datum *args = (Datum *)palloc(sizeof(Datum) * nargs);
	int a = 0;
	if (prefixes != nullptr)
		for (int k = 0, p = 0; k < c->def->nkeys; k++)
			if (k != bucket) {
				argtypes[a] = get_array_type(c->def->keys[k].type);
				args[a++] = prefixes[p++];
			}
	argtypes[a] = TEXTOID;
	args[a++] = CStringGetTextDatum(w->width);
	if (prefixes != nullptr) {
		for (int i = 0; i < w->ncolumns; i++) {
			argtypes[a] = TEXTOID;
			args[a++] = CStringGetTextDatum(w->columns[i]);
			argtypes[a] = NUMERICARRAYOID;
			args[a++] = w->thresholds[i];
		}
	}
	OwnerScope owner;
	EnterOwner(&owner, c->owner, 0);
	int ret;
	if (prefixes != nullptr) {
		/* (the latest snapshot, and this command's writes: what others committed to the prefix's other buckets) */
		Snapshot latest = RegisterSnapshot(GetLatestSnapshot());
		latest->curcid = GetCurrentCommandId(false);
		ret = SPI_execute_snapshot(FetchPlan(c, PLAN_WINDOW_SUMS, nargs, argtypes), args, nullptr, latest,
		                           InvalidSnapshot, true, false, 0);
		UnregisterSnapshot(latest);
	} else
		ret = QueryLatest(WindowSumsStatement(c, bucket, w, false), nargs, argtypes, args, nullptr, false);
	LeaveOwner(&owner);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: window sums of counter \"%s\" failed: %s", c->def->name, SPI_result_code_string(ret));
	if (prefixes != nullptr && SPI_processed == 0)
		return 0;
	uint64 nrows = SPI_processed;
	SPITupleTable *sums = SPI_tuptable;
	Datum *keys = (Datum *)palloc(sizeof(Datum) * Max(nrows, 1));
	Datum *values = (Datum *)palloc(sizeof(Datum) * Max(nrows, 1));
	int64 announced = 0;
	for (int i = 0; i < w->ncolumns; i++) {
		bool isnull;
		for (uint64 r = 0; r < nrows; r++) {
			keys[r] = SPI_getbinval(sums->vals[r], sums->tupdesc, 1, &isnull);
			values[r] = SPI_getbinval(sums->vals[r], sums->tupdesc, 2 + i, &isnull);
		}
		/* What changed, as the counter's owner (the state is a table of the owner's). */
		Oid state_types[5] = {TEXTOID, JSONBARRAYOID, NUMERICARRAYOID, NUMERICARRAYOID, BOOLOID};
		Datum state_args[5] = {
		    CStringGetTextDatum(w->columns[i]),
		    PointerGetDatum(construct_array(keys, (int)nrows, JSONBOID, -1, false, TYPALIGN_INT)),
		    PointerGetDatum(construct_array(values, (int)nrows, NUMERICOID, -1, false, TYPALIGN_INT)), w->thresholds[i],
		    BoolGetDatum(prefixes == nullptr)};
		EnterOwner(&owner, c->owner, 0);
		ret = SPI_execute_plan(FetchPlan(c, PLAN_WINDOW_STATE, 5, state_types), state_args, nullptr, false, 0);
		LeaveOwner(&owner);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "counters: window state of counter \"%s\" failed: %s", c->def->name,
			     SPI_result_code_string(ret));
		/* up, prefix, new, threshold */
		for (uint64 r = 0; r < SPI_processed; r++) {
			HeapTuple tup = SPI_tuptable->vals[r];
			bool up = DatumGetBool(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
			NotifyCrossing(c->def->name, w->columns[i]);
			FmgrInfo flinfo;
			if (PrepareCallback(c, "window", w->columns[i], w->callbacks[i], w->callback_missing[i], &flinfo)) {
				/* (old: none, a window sum checked now has no "before"; every: none, crossed: 1) */
				Datum fields[9] = {CStringGetTextDatum(c->def->name),
				                   SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull),
				                   CStringGetTextDatum(w->columns[i]),
				                   (Datum)0,
				                   SPI_getbinval(tup, SPI_tuptable->tupdesc, 3, &isnull),
				                   SPI_getbinval(tup, SPI_tuptable->tupdesc, 4, &isnull),
				                   CStringGetTextDatum(up ? "up" : "down"),
				                   (Datum)0,
				                   NumericGetDatum(int64_to_numeric(1))};
				bool nulls[9] = {false, false, false, true, false, false, false, true, false};
				OwnerScope as;
				EnterOwner(&as, c->owner, PIN_SEARCH_PATH | PIN_OUTPUT);
				InvokeCallback(c, &flinfo, fields, nulls);
				LeaveOwner(&as);
			}
			announced++;
		}
	}
	return announced;
}

} // namespace

Datum *
WindowPrefixes(const CompiledCounter *c, DeltaEntry **entries, uint32 n)
{
	const CounterDef *def = c->def;
	Datum *arrays = (Datum *)palloc(sizeof(Datum) * Max(def->nkeys - 1, 1));
	Datum *elems = (Datum *)palloc(sizeof(Datum) * n);
	bool *nulls = (bool *)palloc(sizeof(bool) * n);
	int dims[1] = {(int)n};
	int lbs[1] = {1};
	for (int k = 0, p = 0; k < def->nkeys; k++) {
		if (k == c->window_bucket)
			continue;
		if (!OidIsValid(get_array_type(def->keys[k].type)))
			return nullptr; /* (no array type: the next check_windows() checks it) */
		for (uint32 i = 0; i < n; i++) {
			elems[i] = entries[i]->key[k];
			nulls[i] = entries[i]->KeyNulls(def->nkeys)[k];
		}
		arrays[p++] = PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs, def->keys[k].type,
		                                                 c->key_typlen[k], c->key_byval[k], c->key_typalign[k]));
	}
	return arrays;
}

void
CheckWrittenWindows(CompiledCounter *c, Datum *prefixes)
{
	if (c->window != nullptr)
		(void)Check(c, c->window, prefixes);
}

int64
CheckWindows(const char *name)
{
	List *entries = name ? list_make1(LookupCounter(name)) : ReadCatalog(nullptr);
	int64 announced = 0;
	ListCell *lc;
	foreach (lc, entries) {
		Counter *e = (Counter *)lfirst(lc);
		if (!MayMaintain(e)) {
			if (name != nullptr)
				RequireMaintainer(e);
			continue;
		}
		CompiledCounter *c = CompiledOf(e);
		WindowConfig *w = c->window;
		if (w == nullptr)
			continue;
		CHECK_FOR_INTERRUPTS();
		int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT);
		SpiConnect();
		announced += Check(c, w, nullptr);
		SPI_finish();
		UnpinSettings(level);
	}
	return announced;
}

} // namespace counters
