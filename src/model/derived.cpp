/*
 * derived.cpp: the kinds a definition keeps as accumulators (model.hpp, DerivedKind), in its select list. A definition
 * being declared is given the accumulators its derived aggregates lack (AddAccumulators), and stored so; a stored
 * definition's derived columns are matched with its accumulators (MatchDerived), which the write path keeps as any
 * count and sum: nothing of a derived kind reaches it.
 */
#include "model/model.hpp"

extern "C" {
#include "catalog/pg_aggregate.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "utils/lsyscache.h"
}

namespace counters {

namespace {

/* `agg` is what `acc` describes: the same function over the same argument with the same FILTER, nothing else. */
bool
SameAccumulator(const Aggref *agg, const Aggref *acc)
{
	return agg->aggfnoid == acc->aggfnoid && agg->aggdistinct == NIL && agg->aggorder == NIL && !agg->aggstar &&
	       agg->aggkind == AGGKIND_NORMAL && agg->agglevelsup == 0 && list_length(agg->args) == 1 &&
	       equal(linitial_node(TargetEntry, agg->args)->expr, linitial_node(TargetEntry, acc->args)->expr) &&
	       equal(agg->aggfilter, acc->aggfilter);
}

/* The select list's aggregate (not of a GROUP BY expression) of a derived kind at `tle`, or NULL. */
Aggref *
DerivedAggregate(TargetEntry *tle)
{
	if (tle->resjunk || !IsA(tle->expr, Aggref))
		return nullptr;
	Aggref *agg = (Aggref *)tle->expr;
	return DerivedKindOf(agg->aggfnoid) != nullptr && agg->aggdistinct == NIL && agg->aggorder == NIL &&
	               agg->agglevelsup == 0 && list_length(agg->args) == 1
	           ? agg
	           : nullptr;
}

/* The name a definition gives accumulator `j` of derived column `column` of `kind`: "<column>_<suffix>". */
char *
AccumulatorName(const char *column, const DerivedKind *kind, int j)
{
	return DerivedName(column, psprintf("_%s", kind->suffixes[j]));
}

} // namespace

const DerivedDef *
FindDerived(const CounterDef *def, const char *column)
{
	for (int d = 0; d < def->nderived; d++)
		if (strcmp(def->derived[d].column_name, column) == 0)
			return &def->derived[d];
	return nullptr;
}

int
ValueColumnIndex(const CounterDef *def, int v)
{
	for (int i = 0; i < def->ncolumns; i++)
		if (!def->columns[i].is_key && def->columns[i].index == v)
			return i;
	elog(ERROR, "counters: counter \"%s\" has no value column %d", def->name, v);
}

bool
AddAccumulators(Query *query)
{
	List *added = NIL;
	ListCell *lc;
	foreach (lc, query->targetList) {
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		Aggref *agg = DerivedAggregate(tle);
		if (agg == nullptr)
			continue;
		const DerivedKind *kind = DerivedKindOf(agg->aggfnoid);
		Aggref *acc[2];
		DerivedAccumulators(agg, acc);
		for (int j = 0; j < 2; j++) {
			bool found = false;
			ListCell *other;
			foreach (other, query->targetList) {
				TargetEntry *o = lfirst_node(TargetEntry, other);
				found |= !o->resjunk && IsA(o->expr, Aggref) && SameAccumulator((Aggref *)o->expr, acc[j]);
			}
			foreach (other, added)
				found |= SameAccumulator((Aggref *)lfirst_node(TargetEntry, other)->expr, acc[j]);
			if (!found) {
				const char *column = tle->resname != nullptr ? tle->resname : kind->name;
				added = lappend(added, makeTargetEntry((Expr *)acc[j], 0, AccumulatorName(column, kind, j), false));
			}
		}
	}
	if (added == NIL)
		return false;
	/* after the selected columns, before the GROUP BY expressions not selected; numbered again */
	List *junk = NIL, *list = NIL;
	foreach (lc, query->targetList) {
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		if (tle->resjunk)
			junk = lappend(junk, tle);
		else
			list = lappend(list, tle);
	}
	list = list_concat(list_concat(list, added), junk);
	AttrNumber resno = 1;
	foreach (lc, list)
		lfirst_node(TargetEntry, lc)->resno = resno++;
	query->targetList = list;
	return true;
}

void
MatchDerived(const char *counter, CounterDef *def, Aggref *const *derived, Aggref *const *values)
{
	for (int i = 0; i < def->nderived; i++) {
		DerivedDef *d = &def->derived[i];
		/*
		 * avg() of a numeric divides with as many digits as the largest scale among the rows' values, which a sum
		 * kept by adding and subtracting does not know once a row of a larger scale is gone: the rows' values must
		 * all have one scale, which a declared scale gives them.
		 */
		Node *arg = (Node *)linitial_node(TargetEntry, derived[i]->args)->expr;
		if (d->kind->fixed_scale && getBaseType(exprType(arg)) == NUMERICOID && exprTypmod(arg) < 0)
			ereport(ERROR,
			        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			         errmsg("counter \"%s\": %s() of a numeric without a declared scale in column \"%s\" is not "
			                "supported",
			                counter, d->kind->name, d->column_name),
			         errdetail("The digits of %s() of numerics depend on the largest scale among the rows' values, "
			                   "which is not kept from one row's old and new version.",
			                   d->kind->name),
			         errhint("Give the argument a scale, e.g. %s(x::numeric(20, 4)), or average an integer.",
			                 d->kind->name)));
		Aggref *acc[2];
		DerivedAccumulators(derived[i], acc);
		for (int j = 0; j < 2; j++) {
			d->accumulators[j] = -1;
			for (int v = 0; v < def->nvalues && d->accumulators[j] < 0; v++)
				if (SameAccumulator(values[v], acc[j]))
					d->accumulators[j] = v;
			if (d->accumulators[j] < 0)
				ereport(ERROR, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				                errmsg("counter \"%s\": column \"%s\" is %s(), and the definition does not select what "
				                       "keeps it",
				                       counter, d->column_name, d->kind->name),
				                errdetail("%s() is read from two columns the definition selects with its argument and "
				                          "FILTER, such as \"%s\" and \"%s\".",
				                          d->kind->name, AccumulatorName(d->column_name, d->kind, 0),
				                          AccumulatorName(d->column_name, d->kind, 1)),
				                errhint("Declare the counter with counters.create_counter(), which adds them.")));
		}
	}
}

} // namespace counters
