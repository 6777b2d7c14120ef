/*
 * aggregates.cpp: the aggregate kinds a value column keeps, one row each (model.hpp says what a row holds). The
 * universal formula keeps what a row's old and new versions add and subtract exactly: counts of the rows (that pass
 * the WHERE and FILTER, and whose argument is not NULL) and sums of integers and numerics. New kinds (min and max,
 * averages, distinct counts) are rows here, with what they need of a mode; the analysis and the write path follow.
 */
#include "model/model.hpp"

extern "C" {
#include "catalog/pg_namespace.h"
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

} // namespace

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
		return psprintf("Keep sum(%s) and count(%s) as columns and divide when reading: see docs/aggregates.md.", arg,
		                arg);
	if (strcmp(name, "min") == 0 || strcmp(name, "max") == 0)
		return psprintf("Keep a counter of (keys..., %s) pairs with count(*) and read %s() of it per key, or read "
		                "%s(%s) through an index on the keys and %s: see docs/aggregates.md.",
		                arg, name, name, arg, arg);
	if (strcmp(name, "bool_or") == 0 || strcmp(name, "bool_and") == 0 || strcmp(name, "every") == 0)
		return psprintf("Keep count(%s) and count(*) FILTER (WHERE %s) as columns and compare them when reading: see "
		                "docs/aggregates.md.",
		                arg, arg);
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
