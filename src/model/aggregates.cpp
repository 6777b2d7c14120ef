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
#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "utils/fmgroids.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

namespace counters {

namespace {

constexpr unsigned ALL_MODES = (1u << (int)Mode::Exact) | (1u << (int)Mode::Log) | (1u << (int)Mode::Sharded);

const AggregateKind COUNT_STAR = {ValueKind::CountStar, "count(*)", false, Contribution::One,
                                  AccumKind::Int64,     ALL_MODES,  0};
const AggregateKind COUNT_ARG = {ValueKind::CountArg, "count(expression)", true, Contribution::One,
                                 AccumKind::Int64,    ALL_MODES,           0};
const AggregateKind SUM_INTEGER = {ValueKind::Sum,   "sum(integer)", true, Contribution::Argument,
                                   AccumKind::Int64, ALL_MODES,      0};
const AggregateKind SUM_NUMERIC = {ValueKind::Sum,     "sum(numeric)", true, Contribution::Argument,
                                   AccumKind::Numeric, ALL_MODES,      0};
/*
 * The extremes: a row adds its argument, and a removal that reaches the stored extreme re-reads the key's rows (the
 * write path: apply.cpp). Exact mode only: a log row or a slot cannot take back an extreme.
 */
constexpr unsigned EXACT_ONLY = 1u << (int)Mode::Exact;
const AggregateKind MAX_KIND = {ValueKind::Extreme, "max(expression)", true, Contribution::Extreme,
                                AccumKind::Extreme, EXACT_ONLY,        1};
const AggregateKind MIN_KIND = {ValueKind::Extreme, "min(expression)", true, Contribution::Extreme,
                                AccumKind::Extreme, EXACT_ONLY,        -1};
/*
 * count(DISTINCT x): a count of (key, x) pairs, each pair read again from the source when a statement changes its
 * rows (whether it still has some, whether it had some before): the index on (keys, x) is the pairs' reference count.
 */
const AggregateKind COUNT_DISTINCT = {
    ValueKind::Distinct, "count(DISTINCT expression)", true, Contribution::Distinct, AccumKind::Int64, EXACT_ONLY, 0};

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
	/* min() and max() of every type that has them: PostgreSQL's own, which order by their sort operator */
	if (OidIsValid(ExtremeSortOperator(aggfnoid))) {
		const char *name = get_func_name(aggfnoid);
		return strcmp(name, "max") == 0 ? &MAX_KIND : &MIN_KIND;
	}
	return nullptr;
}

const AggregateKind *
AggregateOf(const Aggref *agg)
{
	if (agg->aggdistinct != NIL)
		return agg->aggfnoid == F_COUNT_ANY && list_length(agg->args) == 1 ? &COUNT_DISTINCT : nullptr;
	return AggregateOfFunction(agg->aggfnoid);
}

bool
ReadsSource(const ValueDef *vd)
{
	return vd->kind == ValueKind::Extreme || vd->kind == ValueKind::Distinct;
}

Oid
ExtremeSortOperator(Oid aggfnoid)
{
	if (get_func_namespace(aggfnoid) != PG_CATALOG_NAMESPACE || get_func_nargs(aggfnoid) != 1)
		return InvalidOid;
	const char *name = get_func_name(aggfnoid);
	if (name == nullptr || (strcmp(name, "max") != 0 && strcmp(name, "min") != 0))
		return InvalidOid;
	HeapTuple tuple = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggfnoid));
	if (!HeapTupleIsValid(tuple))
		return InvalidOid;
	Oid sortop = ((Form_pg_aggregate)GETSTRUCT(tuple))->aggsortop;
	ReleaseSysCache(tuple);
	return sortop;
}

bool
KindKeptIn(const AggregateKind *kind, int mode)
{
	return (kind->modes & (1u << mode)) != 0;
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
	return nullptr;
}

Oid
StoredType(const ValueDef *vd)
{
	switch (vd->accum) {
	case AccumKind::Int64:
		return INT8OID;
	case AccumKind::Numeric:
		return NUMERICOID;
	default:
		return vd->extreme_type;
	}
}

const char *
StoredTypeName(const ValueDef *vd)
{
	switch (vd->accum) {
	case AccumKind::Int64:
		return "bigint";
	case AccumKind::Numeric:
		return "numeric";
	default:
		break;
	}
	/* (an extreme keeps its argument's type, and the collation its aggregate compares with) */
	const char *type = format_type_extended(vd->extreme_type, -1, FORMAT_TYPE_FORCE_QUALIFY);
	if (!OidIsValid(vd->collation) || vd->collation == get_typcollation(vd->extreme_type))
		return type;
	HeapTuple tuple = SearchSysCache1(COLLOID, ObjectIdGetDatum(vd->collation));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for collation %u", vd->collation);
	Form_pg_collation coll = (Form_pg_collation)GETSTRUCT(tuple);
	const char *name = quote_qualified_identifier(get_namespace_name(coll->collnamespace), NameStr(coll->collname));
	ReleaseSysCache(tuple);
	return psprintf("%s COLLATE %s", type, name);
}

const char *
ValueConstraints(const ValueDef *vd)
{
	return vd->accum == AccumKind::Extreme ? "" : " NOT NULL DEFAULT 0";
}

const char *
ZeroOf(const ValueDef *vd)
{
	return vd->accum == AccumKind::Extreme ? "NULL" : "0";
}

const char *
ValueOrZero(const ValueDef *vd, const char *expr)
{
	return vd->accum == AccumKind::Extreme ? expr : psprintf("COALESCE(%s, 0)", expr);
}

const char *
NonzeroTest(const ValueDef *vd, const char *expr)
{
	return vd->accum == AccumKind::Extreme ? psprintf("%s IS NOT NULL", expr)
	                                       : psprintf("COALESCE(%s, 0) OPERATOR(pg_catalog.<>) 0", expr);
}

void
RequireKindsKept(const char *name, const CounterDef *def, Mode mode)
{
	for (int v = 0; v < def->nvalues; v++) {
		const ValueDef *vd = &def->values[v];
		if (KindKeptIn(vd->aggregate, (int)mode))
			continue;
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": %s in column \"%s\" cannot be kept in %s mode", name,
		                       vd->aggregate->name, vd->column_name, ModeName(mode)),
		                errdetail("A log row or a slot adds to a key's values; it cannot take back an extreme, nor "
		                          "tell a value new to a key."),
		                errhint("Keep min(), max() and count(DISTINCT) in a counter in exact mode, declared with "
		                        "create_counter() "
		                        "(the concurrent procedures build counters in log mode), and the columns that take "
		                        "many writers per key in a counter of their own.")));
	}
}

void
RequireExtremeIndexes(const char *name, const CounterDef *def)
{
	for (int v = 0; v < def->nvalues; v++) {
		const ValueDef *vd = &def->values[v];
		if (!ReadsSource(vd))
			continue;
		Relation rel = relation_open(def->source, AccessShareLock);
		int key_of[INDEX_MAX_KEYS];
		bool backward;
		Oid index = ExtremeIndexOf(def, v, rel, key_of, &backward);
		relation_close(rel, AccessShareLock);
		if (OidIsValid(index))
			continue;
		StringInfoData columns;
		initStringInfo(&columns);
		for (int k = 0; k <= def->nkeys; k++) {
			Expr *expr = k < def->nkeys ? def->keys[k].expr : vd->arg;
			const char *text = DeparseSourceExpr((Node *)expr, def->source, 1);
			appendStringInfo(&columns, IsA(expr, Var) ? "%s%s" : "%s(%s)", k ? ", " : "", text);
		}
		bool distinct = vd->kind == ValueKind::Distinct;
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		         errmsg("counter \"%s\": %s in column \"%s\" needs an index on the keys and its argument", name,
		                distinct                       ? "count(DISTINCT)"
		                : vd->aggregate->direction > 0 ? "max()"
		                                               : "min()",
		                vd->column_name),
		         distinct ? errdetail("Whether a changed (key, value) pair still has rows, and had some before, is "
		                              "read through a btree index whose leading columns are the keys, then "
		                              "the argument.")
		                  : errdetail("Removing a key's extreme reads the key's next one through a btree index "
		                              "whose leading columns are the keys, then the argument."),
		         errhint("CREATE INDEX ON %s (%s);", QualifiedName(def->source), columns.data)));
	}
}

} // namespace counters
