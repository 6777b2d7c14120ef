/*
 * aggregates.cpp: the aggregate kinds a value column keeps, one row each (model.hpp says what a row holds). The
 * universal formula keeps what a row's old and new versions add and subtract exactly: counts of the rows (that pass
 * the WHERE and FILTER, and whose argument is not NULL) and sums of integers and numerics. The derived kinds (avg,
 * bool_or, bool_and, every) are rows here too: two such counts and sums, and the expression that reads them
 * (derived.cpp gives a definition what it lacks of them). New kinds (min and max, distinct counts) are rows here,
 * with what they need of a mode; the analysis and the write path follow.
 */
#include "model/model.hpp"

extern "C" {
#include "catalog/pg_aggregate.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
}

namespace counters {

namespace {

constexpr unsigned ALL_MODES = (1u << (int)Mode::Exact) | (1u << (int)Mode::Log) | (1u << (int)Mode::Sharded);

const AggregateKind COUNT_STAR = {ValueKind::CountStar, "count(*)",       false,
                                  Contribution::One,    AccumKind::Int64, ALL_MODES};
const AggregateKind COUNT_ARG = {ValueKind::CountArg, "count(expression)", true,
                                 Contribution::One,   AccumKind::Int64,    ALL_MODES};
const AggregateKind SUM_INTEGER = {ValueKind::Sum,         "sum(integer)",   true,
                                   Contribution::Argument, AccumKind::Int64, ALL_MODES};
const AggregateKind SUM_NUMERIC = {ValueKind::Sum,         "sum(numeric)",     true,
                                   Contribution::Argument, AccumKind::Numeric, ALL_MODES};

/* The aggregate functions, by their OID, and the kind each declares. */
const struct {
	Oid function;
	const AggregateKind *kind;
} FUNCTIONS[] = {
    {F_COUNT_, &COUNT_STAR},    {F_COUNT_ANY, &COUNT_ARG},  {F_SUM_INT2, &SUM_INTEGER},
    {F_SUM_INT4, &SUM_INTEGER}, {F_SUM_INT8, &SUM_INTEGER}, {F_SUM_NUMERIC, &SUM_NUMERIC},
};

/*
 * The derived kinds. An average is its sum over its count, numeric division as avg() itself divides (so that a
 * recount by the definition's own avg() is equal); a boolean aggregate counts its true arguments (the sum of their
 * integer values) and its non-NULL ones. None has a value where nothing was counted, as the aggregate has none.
 */
const DerivedKind AVG = {"avg",
                         "pg_catalog.numeric",
                         {"sum", "count"},
                         "CASE WHEN %2$s OPERATOR(pg_catalog.=) 0 THEN NULL ELSE %1$s::pg_catalog.numeric "
                         "OPERATOR(pg_catalog./) %2$s::pg_catalog.numeric END",
                         true};
const DerivedKind BOOL_OR = {"bool_or",
                             "pg_catalog.bool",
                             {"true", "count"},
                             "CASE WHEN %2$s OPERATOR(pg_catalog.=) 0 THEN NULL ELSE %1$s OPERATOR(pg_catalog.>) 0 END",
                             false};
const DerivedKind BOOL_AND = {"bool_and",
                              "pg_catalog.bool",
                              {"true", "count"},
                              "CASE WHEN %2$s OPERATOR(pg_catalog.=) 0 THEN NULL ELSE %1$s OPERATOR(pg_catalog.=) "
                              "%2$s END",
                              false};
const DerivedKind EVERY = {"every", BOOL_AND.type, {"true", "count"}, BOOL_AND.read, false};

/* The aggregate functions of derived kinds, and the aggregate of the first accumulator (the second counts). */
const struct DerivedRowDef {
	Oid function;
	const DerivedKind *kind;
	Oid first;
	bool counts_true; /* the first sums its argument as an integer */
} DERIVED[] = {
    {F_AVG_INT2, &AVG, F_SUM_INT2, false},   {F_AVG_INT4, &AVG, F_SUM_INT4, false},
    {F_AVG_INT8, &AVG, F_SUM_INT8, false},   {F_AVG_NUMERIC, &AVG, F_SUM_NUMERIC, false},
    {F_BOOL_OR, &BOOL_OR, F_SUM_INT4, true}, {F_BOOL_AND, &BOOL_AND, F_SUM_INT4, true},
    {F_EVERY, &EVERY, F_SUM_INT4, true},
};

/* The row of DERIVED of aggregate function `aggfnoid`, or NULL. */
const DerivedRowDef *
DerivedRow(Oid aggfnoid)
{
	for (const auto &d : DERIVED)
		if (d.function == aggfnoid)
			return &d;
	return nullptr;
}

/* An aggregate of `function` over `arg`, with `filter`, as parse analysis makes one. */
Aggref *
MakeAggregate(Oid function, Expr *arg, Expr *filter)
{
	Aggref *agg = makeNode(Aggref);
	agg->aggfnoid = function;
	agg->aggtype = get_func_rettype(function);
	agg->aggtranstype = InvalidOid;
	agg->aggargtypes = list_make1_oid(exprType((Node *)arg));
	agg->args = list_make1(makeTargetEntry(arg, 1, nullptr, false));
	agg->aggfilter = (Expr *)copyObject(filter);
	agg->aggkind = AGGKIND_NORMAL;
	agg->aggsplit = AGGSPLIT_SIMPLE;
	agg->aggno = -1;
	agg->aggtransno = -1;
	agg->location = -1;
	return agg;
}

} // namespace

const DerivedKind *
DerivedKindOf(Oid aggfnoid)
{
	const auto *d = DerivedRow(aggfnoid);
	return d != nullptr ? d->kind : nullptr;
}

void
DerivedAccumulators(const Aggref *agg, Aggref *out[2])
{
	const auto *d = DerivedRow(agg->aggfnoid);
	if (d == nullptr)
		elog(ERROR, "counters: aggregate %u is of no derived kind", agg->aggfnoid);
	Expr *arg = (Expr *)copyObject(linitial_node(TargetEntry, agg->args)->expr);
	Expr *first = d->counts_true ? (Expr *)makeFuncExpr(F_INT4_BOOL, INT4OID, list_make1(arg), InvalidOid, InvalidOid,
	                                                    COERCE_EXPLICIT_CAST)
	                             : arg;
	out[0] = MakeAggregate(d->first, first, agg->aggfilter);
	out[1] = MakeAggregate(F_COUNT_ANY, (Expr *)copyObject(arg), agg->aggfilter);
}

const AggregateKind *
AggregateOfFunction(Oid aggfnoid)
{
	for (const auto &f : FUNCTIONS)
		if (f.function == aggfnoid)
			return f.kind;
	return nullptr;
}

const char *
RecipeOf(Oid aggfnoid, bool distinct, const char *arg)
{
	if (arg == nullptr || get_func_namespace(aggfnoid) != PG_CATALOG_NAMESPACE)
		return nullptr;
	const char *name = get_func_name(aggfnoid);
	if (distinct)
		return strcmp(name, "count") == 0
		           ? psprintf("Keep a counter of (keys..., %s) pairs with count(*), and count its rows per key with a "
		                      "second counter: see docs/aggregates.md.",
		                      arg)
		           : nullptr;
	if (strcmp(name, "avg") == 0)
		return psprintf("avg() of integers and numerics is kept: average a numeric value instead, e.g. "
		                "avg((%s)::numeric).",
		                arg);
	if (strcmp(name, "min") == 0 || strcmp(name, "max") == 0)
		return psprintf("Keep a counter of (keys..., %s) pairs with count(*) and read %s() of it per key, or read "
		                "%s(%s) through an index on the keys and %s: see docs/aggregates.md.",
		                arg, name, name, arg, arg);
	return nullptr;
}

Oid
StoredType(const ValueDef *vd)
{
	return vd->accum == AccumKind::Int64 ? INT8OID : NUMERICOID;
}

const char *
StoredTypeName(const ValueDef *vd)
{
	return vd->accum == AccumKind::Int64 ? "bigint" : "numeric";
}

} // namespace counters
