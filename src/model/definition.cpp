/*
 * definition.cpp: decompose a counter definition (a single-table aggregate query) into the universal formula.
 *
 * keys   = the GROUP BY expressions, named by their select-list alias;
 * values = count(*) -> 1, count(x) -> 1 when x is not null, sum(x) -> x (null -> 0);
 *          FILTER (WHERE ...) and the query's WHERE make a row contribute nothing.
 * Everything else is rejected here, at declaration, with the counter's name and the offending part.
 */
#include "model/model.hpp"
#include "compat.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/sysattr.h"
#include "catalog/catalog.h"
#include "catalog/heap.h"
#include "catalog/namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "access/relation.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/regproc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
#include "utils/guc.h"
}

namespace counters {

namespace {

/* Whether `expr` reads no table but the source (at `varno`): one that reads a parent row has no text of its own. */
bool
OverSourceAlone(Node *expr, Index varno)
{
	Bitmapset *varnos = pull_varnos(nullptr, expr);
	return bms_num_members(varnos) == 0 || (bms_num_members(varnos) == 1 && bms_is_member((int)varno, varnos));
}

} // namespace

char *
DeparseSourceExpr(Node *expr, Oid source, Index varno)
{
	/* (an expression that also reads the parent of a counter through a parent row: the context has one table) */
	if (!OverSourceAlone(expr, varno))
		return pstrdup("(an expression over the table and its parent)");
	Node *copy = (Node *)copyObject(expr);
	if (varno != 1)
		ChangeVarNodes(copy, varno, 1, 0);
	List *context = deparse_context_for(get_rel_name(source), source);
	return deparse_expression(copy, context, false, false);
}

namespace {

/* (`hint`: what to do instead; by default, the shape of a definition) */
[[noreturn]] void
Reject(const char *counter, int sqlstate, const char *what, const char *detail, const char *hint = nullptr)
{
	ereport(ERROR,
	        (errcode(sqlstate), errmsg("counter \"%s\": %s", counter, what), detail ? errdetail("%s", detail) : 0,
	         hint ? errhint("%s", hint)
	              : errhint("A counter is defined as SELECT keys..., count(*)/count(x)/sum(x) [FILTER (WHERE ...)] "
	                        "FROM one_table [WHERE ...] GROUP BY keys.")));
	pg_unreachable();
}

void
RequireImmutable(const char *counter, const char *part, Node *expr, Oid source, Index varno)
{
	if (expr && contain_mutable_functions(expr))
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
		         errmsg("counter \"%s\": %s uses a function that is not immutable", counter, part),
		         errdetail("Offending expression: %s", DeparseSourceExpr(expr, source, varno)),
		         errhint("Counters subtract what a row contributed when it changes, so every expression must give "
		                 "the same result for the same row forever; now(), random() or a timestamptz date_trunc() "
		                 "cannot be used.")));
}

/* Prepare an expression of the analysed query for evaluation against source rows (planning folds, i.e. runs, it). */
Expr *
PlanSourceExpr(Node *expr, Index varno)
{
	RequireRestricted();
	if (expr == nullptr)
		return nullptr;
	Node *copy = (Node *)copyObject(expr);
	if (varno != 1)
		ChangeVarNodes(copy, varno, 1, 0);
	return expression_planner((Expr *)copy);
}

} // namespace

bool
IsGroupKey(Query *query, TargetEntry *tle)
{
	if (tle->ressortgroupref == 0)
		return false;
	ListCell *lc;
	foreach (lc, query->groupClause) {
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		if (sgc->tleSortGroupRef == tle->ressortgroupref)
			return true;
	}
	return false;
}

const char *
JoinColumns(const JoinExpr *join, Var **a, Var **b)
{
	if (join->jointype != JOIN_INNER || join->usingClause != NIL || join->isNatural || join->quals == nullptr ||
	    !IsA(join->quals, OpExpr))
		return "only inner joins ON one equality are supported";
	const OpExpr *eq = (const OpExpr *)join->quals;
	if (list_length(eq->args) != 2 || !IsA(linitial(eq->args), Var) || !IsA(lsecond(eq->args), Var))
		return "the join condition must compare two columns";
	*a = (Var *)linitial(eq->args);
	*b = (Var *)lsecond(eq->args);
	if ((*a)->varlevelsup != 0 || (*b)->varlevelsup != 0 || (*a)->varno == (*b)->varno ||
	    (*a)->vartype != (*b)->vartype ||
	    ((*a)->vartype != INT2OID && (*a)->vartype != INT4OID && (*a)->vartype != INT8OID) ||
	    eq->opno != lookup_type_cache((*a)->vartype, TYPECACHE_EQ_OPR)->eq_opr)
		return "the join condition must be = between integer columns of the same type, one of each table";
	return nullptr;
}

void
RequireUniqueParentKey(const char *name, const CounterDef *def)
{
	if (OidIsValid(def->parent) && !HasUniqueIndexOn(def->parent, def->parent_key))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("counter \"%s\": column \"%s\" of its parent %s has no unique index of its own", name,
		                       get_attname(def->parent, def->parent_key, false), QualifiedName(def->parent)),
		                errdetail("A row would be counted once for each parent row of its key."),
		                errhint("CREATE UNIQUE INDEX ON %s (%s);", QualifiedName(def->parent),
		                        quote_identifier(get_attname(def->parent, def->parent_key, false)))));
}

namespace {

/*
 * A key expression that is a plain column of the source (range table entry `varno`: 1 in a definition as written, 3 in
 * a view's stored query on PostgreSQL 15, which keeps OLD and NEW first) declared NOT NULL.
 */
bool
IsNotNullColumn(Node *expr, Oid source, Index varno)
{
	if (!IsA(expr, Var) || ((Var *)expr)->varno != varno || ((Var *)expr)->varlevelsup != 0)
		return false;
	Var *var = (Var *)expr;
	if (var->varattno <= 0)
		return var->varattno != 0;
	return AttributeNotNull(source, var->varattno);
}

void
CheckSource(const char *counter, RangeTblEntry *rte, bool declaring)
{
	if (rte->rtekind != RTE_RELATION)
		Reject(counter, ERRCODE_FEATURE_NOT_SUPPORTED, "FROM must name exactly one table",
		       "Subqueries, functions, VALUES and joins are not supported in FROM.");
	char relkind = get_rel_relkind(rte->relid);
	char *relname = get_rel_name(rte->relid);
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
		        (errcode(ERRCODE_WRONG_OBJECT_TYPE), errmsg("counter \"%s\": \"%s\" is not a table", counter, relname),
		         errdetail("Counters are fed by ordinary or partitioned tables, whose writes fire triggers.")));
	if (rte->tablesample)
		Reject(counter, ERRCODE_FEATURE_NOT_SUPPORTED, "TABLESAMPLE is not supported", nullptr);
	if (get_rel_relispartition(rte->relid))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": \"%s\" is a partition", counter, relname),
		                errhint("Declare the counter on the partitioned table; it counts the rows of every "
		                        "partition, including rows written through a partition directly.")));
	if (relkind == RELKIND_RELATION && has_subclass(rte->relid))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": table \"%s\" has inheritance children", counter, relname),
		                errdetail("Rows written to a child table do not fire the parent's triggers.")));
	if (relkind == RELKIND_PARTITIONED_TABLE && !rte->inh)
		Reject(counter, ERRCODE_FEATURE_NOT_SUPPORTED, "FROM ONLY on a partitioned table counts nothing", nullptr);
	/* (the rules below are checked when declaring: a counter declared before they existed keeps working) */
	if (!declaring)
		return;
	if (relkind == RELKIND_RELATION && !get_rel_relispartition(rte->relid) && has_superclass(rte->relid))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": table \"%s\" is an inheritance child", counter, relname),
		                errdetail("Statements that name the parent update and delete the child's rows without "
		                          "firing the child's triggers.")));
	if (get_rel_persistence(rte->relid) == RELPERSISTENCE_TEMP)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": \"%s\" is a temporary table", counter, relname),
		                errdetail("A counter is declared for every session; a temporary table belongs to one and is "
		                          "dropped at its end without any event the counter could follow.")));
	/* (crash recovery empties an unlogged table, and keeps the counter's) */
	List *tables = relkind == RELKIND_PARTITIONED_TABLE ? find_all_inheritors(rte->relid, NoLock, nullptr)
	                                                    : list_make1_oid(rte->relid);
	ListCell *lc;
	foreach (lc, tables)
		if (get_rel_persistence(lfirst_oid(lc)) == RELPERSISTENCE_UNLOGGED)
			ereport(ERROR,
			        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			         errmsg("counter \"%s\": \"%s\" is an unlogged table", counter, get_rel_name(lfirst_oid(lc))),
			         errdetail("After a crash PostgreSQL empties an unlogged table, and the counter would keep "
			                   "its values.")));
	Oid nsp = get_rel_namespace(rte->relid);
	if (IsCatalogRelationOid(rte->relid) || IsCatalogNamespace(nsp) || IsToastNamespace(nsp) ||
	    nsp == get_namespace_oid("counters", true))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": \"%s\" is a system or counters catalog table", counter, relname),
		                errdetail("Counters count the rows of user tables; catalogs are not written through "
		                          "statements that fire triggers.")));
}

/* The definition reads the whole row (`t IS NOT NULL`, `row_to_json(t)`, ...). */
bool
ReadsWholeRow(Query *query, Index varno)
{
	Bitmapset *attnos = nullptr;
	pull_varattnos((Node *)query->targetList, varno, &attnos);
	pull_varattnos(query->jointree->quals, varno, &attnos);
	return bms_is_member(InvalidAttrNumber - FirstLowInvalidHeapAttributeNumber, attnos);
}

/* The first system column (ctid, xmin, tableoid, ...) the definition reads, or 0. */
AttrNumber
FindSystemColumn(Query *query, Index varno)
{
	Bitmapset *attnos = nullptr;
	pull_varattnos((Node *)query->targetList, varno, &attnos);
	pull_varattnos(query->jointree->quals, varno, &attnos);
	int member = bms_next_member(attnos, -1);
	/* (members are attribute numbers offset by FirstLowInvalidHeapAttributeNumber; system columns come first) */
	if (member >= 0 && member + FirstLowInvalidHeapAttributeNumber < 0)
		return (AttrNumber)(member + FirstLowInvalidHeapAttributeNumber);
	return 0;
}

const char *
ColumnName(const CounterDef *def, const ColumnDef &col)
{
	return col.is_key ? def->keys[col.index].column_name : def->values[col.index].column_name;
}

/* Column names of the counter table: unique, not a system column's, not the sharded mode's slot column. */
void
CheckColumnNames(const char *counter, const CounterDef *def)
{
	/* (the counter's columns, then the generated columns of derived kinds) */
	int n = def->ncolumns + def->nderived;
	const char **names = (const char **)palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
		names[i] = i < def->ncolumns ? ColumnName(def, def->columns[i]) : def->derived[i - def->ncolumns].column_name;
	for (int i = 0; i < n; i++) {
		const char *name = names[i];
		if (SystemAttributeByName(name) != nullptr || strcmp(name, "counters_slot") == 0)
			ereport(ERROR, (errcode(ERRCODE_DUPLICATE_COLUMN),
			                errmsg("counter \"%s\": column name \"%s\" is reserved", counter, name),
			                errdetail("\"%s\" is %s.", name,
			                          strcmp(name, "counters_slot") == 0 ? "the slot column of sharded counter tables"
			                                                             : "a system column of every table"),
			                errhint("Give the column another alias.")));
		for (int j = 0; j < i; j++) {
			if (strcmp(name, names[j]) == 0)
				ereport(ERROR,
				        (errcode(ERRCODE_DUPLICATE_COLUMN),
				         errmsg("counter \"%s\": column name \"%s\" is used more than once", counter, name),
				         def->nderived > 0
				             ? errhint("Every selected key and value becomes a column of the counter table, and "
				                       "avg(), bool_or(), bool_and() and every() also keep <column>_sum or "
				                       "<column>_true, and <column>_count; give each a distinct alias.")
				             : errhint("Every selected key and value becomes a column of the counter table; give "
				                       "each a distinct alias.")));
		}
	}
	/* Sharded tables add the slot column to the keys' unique index and to the table. */
	if (def->nkeys > INDEX_MAX_KEYS - 1)
		ereport(ERROR,
		        (errcode(ERRCODE_TOO_MANY_COLUMNS), errmsg("counter \"%s\": %d keys is too many", counter, def->nkeys),
		         errdetail("A counter has at most %d keys (a unique index has at most %d columns, one of them "
		                   "kept for the slot of sharded mode).",
		                   INDEX_MAX_KEYS - 1, INDEX_MAX_KEYS)));
	if (def->ncolumns > MaxHeapAttributeNumber - 1)
		ereport(ERROR, (errcode(ERRCODE_TOO_MANY_COLUMNS),
		                errmsg("counter \"%s\": %d columns is too many", counter, def->ncolumns),
		                errdetail("A counter table has at most %d columns.", MaxHeapAttributeNumber - 1)));
}

/* An aggregate's argument as a hint names it: as written, or "x" when it reads a parent row too; NULL for none. */
const char *
ArgumentText(Node *arg, Oid source, Index varno)
{
	if (arg == nullptr)
		return nullptr;
	return OverSourceAlone(arg, varno) ? DeparseSourceExpr(arg, source, varno) : "x";
}

/* An aggregate of a kind we keep, written as one that can be kept: no DISTINCT, ORDER BY, ordered set or outer level.
 */
void
CheckAggregate(const char *counter, const char *column, Aggref *agg, Oid source, Index varno)
{
	const char *what;
	Node *arg = agg->args != NIL ? (Node *)linitial_node(TargetEntry, agg->args)->expr : nullptr;
	if (agg->aggdistinct != NIL && AggregateOf(agg) == nullptr) {
		what = psprintf("DISTINCT aggregate in column \"%s\" is not supported", column);
		Reject(counter, ERRCODE_FEATURE_NOT_SUPPORTED, what,
		       "A distinct count is not kept from one row's old and new version.",
		       RecipeOf(agg->aggfnoid, true, ArgumentText(arg, source, varno)));
	}
	if (agg->aggorder != NIL) {
		what = psprintf("ORDER BY inside aggregate of column \"%s\" is not supported", column);
		Reject(counter, ERRCODE_FEATURE_NOT_SUPPORTED, what, nullptr);
	}
	if (agg->aggkind != AGGKIND_NORMAL || agg->agglevelsup != 0) {
		what = psprintf("aggregate of column \"%s\" is not supported", column);
		Reject(counter, ERRCODE_FEATURE_NOT_SUPPORTED, what, nullptr);
	}
}

/* count/sum aggregates we can maintain, and what a row contributes to them. */
void
DecomposeAggregate(const char *counter, const char *column, Aggref *agg, Oid source, Index varno, ValueDef *out)
{
	const char *what;
	Node *arg = agg->args != NIL ? (Node *)linitial_node(TargetEntry, agg->args)->expr : nullptr;
	CheckAggregate(counter, column, agg, source, varno);
	out->column_name = column;
	out->arg = nullptr;
	out->arg_type = InvalidOid;
	const AggregateKind *kind = AggregateOf(agg);
	if (kind != nullptr) {
		out->kind = kind->kind;
		out->aggregate = kind;
		out->accum = kind->accum;
	} else if (agg->aggfnoid == F_SUM_FLOAT4 || agg->aggfnoid == F_SUM_FLOAT8) {
		what = psprintf("sum of a floating-point value in column \"%s\" is not supported", column);
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("counter \"%s\": %s", counter, what),
		                errdetail("Offending expression: %s", DeparseSourceExpr((Node *)agg, source, varno)),
		                errhint("Floating-point addition is not exact, so adding and subtracting deltas would "
		                        "drift; sum a numeric value instead, e.g. sum(x::numeric).")));
	} else {
		/* Name it with its schema unless it is built in: a count() of another schema is not count(). */
		what = psprintf("aggregate %s in column \"%s\" is not supported",
		                get_func_namespace(agg->aggfnoid) == PG_CATALOG_NAMESPACE
		                    ? format_procedure(agg->aggfnoid)
		                    : format_procedure_qualified(agg->aggfnoid),
		                column);
		Reject(counter, ERRCODE_FEATURE_NOT_SUPPORTED, what,
		       "Only count(*), count(expression) and sum() of integer or numeric expressions can be maintained "
		       "exactly from each row's old and new version.",
		       RecipeOf(agg->aggfnoid, false, ArgumentText(arg, source, varno)));
	}
	out->extreme_type = InvalidOid;
	out->collation = InvalidOid;
	out->sortop = InvalidOid;
	if (kind != nullptr && kind->contributes == Contribution::Extreme) {
		/* (the value itself, in the type and collation the aggregate compares it with) */
		out->extreme_type = agg->aggtype;
		out->collation = agg->inputcollid;
		out->sortop = ExtremeSortOperator(agg->aggfnoid);
	} else if (kind != nullptr && kind->contributes == Contribution::Distinct) {
		/* (the values, compared as its DISTINCT compares them: the ordering operator it sorts by) */
		const SortGroupClause *sgc = linitial_node(SortGroupClause, agg->aggdistinct);
		if (get_typtype(exprType(arg)) == TYPTYPE_PSEUDO)
			Reject(counter, ERRCODE_FEATURE_NOT_SUPPORTED,
			       psprintf("count(DISTINCT) of a row in column \"%s\" is not supported", column),
			       "Its values are read again through an index on the keys and the value, which a row of no "
			       "declared type cannot be.",
			       "Count the distinct values of one expression, or of a composite type's values.");
		out->extreme_type = exprType(arg);
		out->collation = agg->inputcollid;
		out->sortop = sgc->sortop;
		if (!OidIsValid(out->sortop))
			Reject(counter, ERRCODE_FEATURE_NOT_SUPPORTED,
			       psprintf("count(DISTINCT) in column \"%s\" of a type without a btree ordering", column),
			       "Whether a value is new to a key is read through a btree index on the keys and the value.");
	}
	if (out->aggregate->takes_arg) {
		out->arg_type = getBaseType(exprType(arg));
		what = psprintf("the argument of column \"%s\"", column);
		RequireImmutable(counter, what, arg, source, varno);
		out->arg = PlanSourceExpr(arg, varno);
	}
	out->filter = nullptr;
	if (agg->aggfilter) {
		what = psprintf("the FILTER of column \"%s\"", column);
		RequireImmutable(counter, what, (Node *)agg->aggfilter, source, varno);
		out->filter = PlanSourceExpr((Node *)agg->aggfilter, varno);
	}
}

} // namespace

namespace {

[[noreturn]] void
RejectJoin(const char *counter, const char *what)
{
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("counter \"%s\": %s", counter, what),
	                errdetail("A counter can read one parent row per row, and no other table."),
	                errhint("Join as FROM child JOIN parent ON child.column = parent.column, where the parent's column "
	                        "has a unique index of its own and both are integer columns of the same type.")));
	pg_unreachable();
}

/* A unique, immediately checked index whose one key column is the column `arg` (an AttrNumber) points at. */
bool
UniqueImmediateOn(HeapTuple tup, const void *arg)
{
	Form_pg_index index = (Form_pg_index)GETSTRUCT(tup);
	return index->indisunique && index->indimmediate && index->indnkeyatts == 1 &&
	       index->indkey.values[0] == *(const AttrNumber *)arg && heap_attisnull(tup, Anum_pg_index_indexprs, nullptr);
}

/*
 * FROM child JOIN parent ON child.key = parent.key: checked, and the query's Vars renumbered so that the child (the
 * source) is varno 1 and the parent varno 2. Sets the parent fields of `def`; returns the child's range table entry.
 */
RangeTblEntry *
AnalyzeJoin(const char *name, Query *query, JoinExpr *join, CounterDef *def, RangeTblEntry **parent_rte, Oid source)
{
	if (join->jointype != JOIN_INNER || join->usingClause != NIL || join->isNatural || !IsA(join->larg, RangeTblRef) ||
	    !IsA(join->rarg, RangeTblRef) || join->quals == nullptr || !IsA(join->quals, OpExpr))
		RejectJoin(name, "only an inner join of two tables ON one equality is supported");
	Var *a, *b;
	const char *problem = JoinColumns(join, &a, &b);
	if (problem != nullptr)
		RejectJoin(name, problem);
	RangeTblEntry *rte_a = rt_fetch(a->varno, query->rtable);
	RangeTblEntry *rte_b = rt_fetch(b->varno, query->rtable);
	if (rte_a->rtekind != RTE_RELATION || rte_b->rtekind != RTE_RELATION || rte_a->relid == rte_b->relid)
		RejectJoin(name, "the join must read two different tables");
	/* the parent: the side whose column is unique (the right one, when both are) */
	Var *child = a, *parent = b;
	if (OidIsValid(source) && (rte_a->relid == source || rte_b->relid == source)) {
		/*
		 * (a stored counter's, whose source is known: the other side, whatever indexes exist now -- a restore in
		 * parallel creates them in any order, and one side's alone would turn the join around)
		 */
		if (rte_b->relid == source) {
			child = b;
			parent = a;
		}
	} else if (!HasUniqueIndexOn(rte_b->relid, b->varattno)) {
		if (!HasUniqueIndexOn(rte_a->relid, a->varattno))
			RejectJoin(name, "neither joined column has a unique index of its own");
		child = b;
		parent = a;
	}
	Index child_varno = child->varno, parent_varno = parent->varno;
	RangeTblEntry *child_rte = rt_fetch(child_varno, query->rtable);
	*parent_rte = rt_fetch(parent_varno, query->rtable);
	def->parent = (*parent_rte)->relid;
	def->child_key = child->varattno;
	def->parent_key = parent->varattno;
	def->join_type = child->vartype;
	/* child -> 1, parent -> 2 (through a number no range table uses) */
	Node *nodes[2] = {(Node *)query->targetList, query->jointree->quals};
	for (int i = 0; i < 2; i++) {
		ChangeVarNodes(nodes[i], child_varno, 1000, 0);
		ChangeVarNodes(nodes[i], parent_varno, 1001, 0);
		ChangeVarNodes(nodes[i], 1000, 1, 0);
		ChangeVarNodes(nodes[i], 1001, 2, 0);
	}
	return child_rte;
}

} // namespace

bool
HasUniqueIndexOn(Oid relid, AttrNumber attnum)
{
	return AnyIndexOf(relid, UniqueImmediateOn, &attnum);
}

void
RequireAggregateQuery(const char *name, Query *query)
{
	if (query->commandType != CMD_SELECT || query->utilityStmt != nullptr)
		Reject(name, ERRCODE_WRONG_OBJECT_TYPE, "the definition must be a SELECT query", nullptr);
	/* Keys are read as expressions over the source row, also where the parser made them refer to the grouping step. */
	compat::ExpandGroupedColumns(query);
	if (query->cteList != NIL)
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "WITH is not supported", nullptr);
	if (query->setOperations != nullptr)
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "UNION, INTERSECT and EXCEPT are not supported", nullptr);
	if (query->hasSubLinks)
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "subqueries are not supported",
		       "A counter may read only the row being written; a subquery reads other rows or tables.");
	if (query->hasWindowFuncs)
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "window functions are not supported", nullptr);
	if (query->hasTargetSRFs)
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "set-returning functions are not supported", nullptr);
	if (query->distinctClause != NIL)
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "DISTINCT is not supported", nullptr);
	if (query->havingQual != nullptr)
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "HAVING is not supported",
		       "Filter rows with WHERE or an aggregate FILTER clause instead; the counter table keeps every group.");
	if (query->groupingSets != NIL)
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "GROUPING SETS, ROLLUP and CUBE are not supported", nullptr);
	if (query->sortClause != NIL)
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "ORDER BY is not supported", "Order when reading the counter.");
	if (query->limitCount != nullptr || query->limitOffset != nullptr)
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "LIMIT and OFFSET are not supported", nullptr);
	if (query->rowMarks != NIL)
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "FOR UPDATE/SHARE is not supported", nullptr);
}

CounterDef *
AnalyzeDefinition(const char *name, Query *query, TupleDesc column_names, Oid source)
{
	RequireAggregateQuery(name, query);

	FromExpr *from = query->jointree;
	if (from == nullptr || list_length(from->fromlist) != 1)
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "FROM must name exactly one table",
		       "Joins and references to other tables are not supported.");
	Node *item = (Node *)linitial(from->fromlist);
	CounterDef join_info = {};
	RangeTblEntry *parent_rte = nullptr;
	Index varno;
	RangeTblEntry *rte;
	if (IsA(item, JoinExpr)) {
		/* counted through a parent row: the source is varno 1, the parent varno 2 */
		rte = AnalyzeJoin(name, query, (JoinExpr *)item, &join_info, &parent_rte,
		                  column_names != nullptr ? source : InvalidOid);
		varno = 1;
	} else if (!IsA(item, RangeTblRef))
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "joins are not supported",
		       "A counter is fed by the rows of one table, or reads one parent row per row (JOIN ... ON).");
	else {
		varno = (Index)((RangeTblRef *)item)->rtindex;
		rte = rt_fetch(varno, query->rtable);
	}
	/* Some rules apply to new declarations only: compiling an existing counter must not start failing writes. */
	bool declaring = column_names == nullptr;
	CheckSource(name, rte, declaring);
	if (parent_rte != nullptr) {
		CheckSource(name, parent_rte, declaring);
		if (get_rel_relkind(rte->relid) != RELKIND_RELATION || get_rel_relkind(parent_rte->relid) != RELKIND_RELATION)
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			                errmsg("counter \"%s\": a counter through a parent row needs two plain tables", name),
			                errdetail("Partitioned tables cannot be joined by a counter yet.")));
		compat::ExpandVirtualColumns(query, 2, parent_rte->relid);
		if (declaring && (FindSystemColumn(query, 2) != 0 || ReadsWholeRow(query, 2)))
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			                errmsg("counter \"%s\": the definition reads a system column or the whole row of the "
			                       "parent",
			                       name),
			                errhint("Name the columns the definition needs.")));
	}
	/* Virtual generated columns are computed from the columns they are generated from, as a query reads them. */
	compat::ExpandVirtualColumns(query, varno, rte->relid);
	if (!query->hasAggs)
		Reject(name, ERRCODE_INVALID_OBJECT_DEFINITION, "the definition has no count() or sum() aggregate", nullptr);
	if (query->groupClause == NIL)
		Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED, "the definition has no GROUP BY",
		       "A counter table has one row per key; group by at least one expression.");

	AttrNumber system_column = declaring ? FindSystemColumn(query, varno) : 0;
	if (system_column != 0)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": system column \"%s\" cannot be used", name,
		                       NameStr(SystemAttributeDefinition(system_column)->attname)),
		                errdetail("System columns are not part of a row's contents: they change when the row is "
		                          "rewritten or moved, and are not set the same way in every trigger.")));

	if (declaring && ReadsWholeRow(query, varno))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": the definition reads the whole row", name),
		                errdetail("A whole row changes meaning when a column is added or dropped, without any row "
		                          "being written: the counter would silently drift."),
		                errhint("Name the columns the definition needs.")));

	CounterDef *def = (CounterDef *)palloc0(sizeof(CounterDef));
	def->name = pstrdup(name);
	def->source = rte->relid;
	def->parent = join_info.parent;
	def->child_key = join_info.child_key;
	def->parent_key = join_info.parent_key;
	def->join_type = join_info.join_type;
	int ntle = list_length(query->targetList);
	def->keys = (KeyDef *)palloc0(sizeof(KeyDef) * ntle);
	def->values = (ValueDef *)palloc0(sizeof(ValueDef) * ntle);
	def->columns = (ColumnDef *)palloc0(sizeof(ColumnDef) * ntle);
	def->derived = (DerivedDef *)palloc0(sizeof(DerivedDef) * ntle);
	Aggref **value_aggs = (Aggref **)palloc0(sizeof(Aggref *) * ntle);
	Aggref **derived_aggs = (Aggref **)palloc0(sizeof(Aggref *) * ntle);

	int resno = 0;
	ListCell *lc;
	foreach (lc, query->targetList) {
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		Node *expr = (Node *)tle->expr;
		if (tle->resjunk) {
			if (IsGroupKey(query, tle))
				ereport(ERROR, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				                errmsg("counter \"%s\": GROUP BY expression %s is not in the select list", name,
				                       DeparseSourceExpr(expr, def->source, varno)),
				                errhint("Every key must be a column of the counter table; select it with an alias.")));
			continue;
		}
		resno++;
		const char *column = tle->resname ? tle->resname : "?column?";
		if (column_names != nullptr && resno <= column_names->natts)
			column = pstrdup(NameStr(TupleDescAttr(column_names, resno - 1)->attname));
		const char *what;
		if (IsGroupKey(query, tle)) {
			KeyDef *key = &def->keys[def->nkeys];
			what = psprintf("key \"%s\"", column);
			RequireImmutable(name, what, expr, def->source, varno);
			key->column_name = column;
			key->type = exprType(expr);
			key->typmod = exprTypmod(expr);
			key->collation = exprCollation(expr);
			key->not_null = IsNotNullColumn(expr, def->source, varno);
			Oid rowtype_rel = get_typ_typrelid(key->type);
			if (declaring && (get_typtype(key->type) == TYPTYPE_PSEUDO ||
			                  (OidIsValid(rowtype_rel) && get_rel_relkind(rowtype_rel) != RELKIND_COMPOSITE_TYPE)))
				ereport(ERROR,
				        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				         errmsg("counter \"%s\": key \"%s\" has type %s, which cannot be a counter key", name, column,
				                format_type_be(key->type)),
				         errdetail("A key is a column of the counter table: anonymous records and table row types "
				                   "cannot be."),
				         errhint("Select the fields that make the key as separate keys.")));
			TypeCacheEntry *tc = lookup_type_cache(key->type, TYPECACHE_CMP_PROC | TYPECACHE_HASH_PROC);
			if (!OidIsValid(tc->cmp_proc) || !OidIsValid(tc->hash_proc))
				ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				                errmsg("counter \"%s\": key \"%s\" has type %s, which cannot be a counter key", name,
				                       column, format_type_be(key->type)),
				                errdetail("A key type needs a default btree and hash operator class.")));
			key->expr = PlanSourceExpr(expr, varno);
			def->columns[def->ncolumns++] = ColumnDef{true, def->nkeys};
			def->nkeys++;
		} else if (IsA(expr, Aggref) && DerivedKindOf(((Aggref *)expr)->aggfnoid) != nullptr) {
			/* (kept by its accumulators, matched below; the aggregate itself is checked as they are) */
			Aggref *agg = (Aggref *)expr;
			CheckAggregate(name, column, agg, def->source, varno);
			derived_aggs[def->nderived] = agg;
			def->derived[def->nderived++] = DerivedDef{column, DerivedKindOf(agg->aggfnoid), {-1, -1}, def->ncolumns};
		} else if (IsA(expr, Aggref)) {
			value_aggs[def->nvalues] = (Aggref *)expr;
			DecomposeAggregate(name, column, (Aggref *)expr, def->source, varno, &def->values[def->nvalues]);
			def->columns[def->ncolumns++] = ColumnDef{false, def->nvalues};
			def->nvalues++;
		} else {
			what = psprintf("column \"%s\" is neither a GROUP BY key nor a count() or sum()", column);
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("counter \"%s\": %s", name, what),
			                errdetail("Offending expression: %s", DeparseSourceExpr(expr, def->source, varno)),
			                errhint("Compute ratios and other expressions over counters when reading them, "
			                        "e.g. in a view over the counter table.")));
		}
	}
	if (def->nvalues == 0)
		Reject(name, ERRCODE_INVALID_OBJECT_DEFINITION, "the definition selects no count() or sum() column", nullptr);
	for (int v = 0; OidIsValid(def->parent) && v < def->nvalues; v++)
		if (ReadsSource(&def->values[v]))
			Reject(name, ERRCODE_FEATURE_NOT_SUPPORTED,
			       psprintf("%s in column \"%s\" through a parent row is not supported",
			                def->values[v].kind == ValueKind::Distinct ? "count(DISTINCT)"
			                : def->values[v].aggregate->direction > 0  ? "max()"
			                                                           : "min()",
			                def->values[v].column_name),
			       "Such a column reads the key's rows of one table again when they change.",
			       "Keep it over the child table by its join column in a counter of its own, and join the parent "
			       "when reading it.");
	MatchDerived(name, def, derived_aggs, value_aggs);
	if (declaring)
		CheckColumnNames(name, def);

	if (from->quals) {
		RequireImmutable(name, "the WHERE clause", from->quals, def->source, varno);
		def->quals = make_ands_implicit((Expr *)PlanSourceExpr(from->quals, varno));
	}
	return def;
}

CounterDef *
AnalyzeView(const char *name, Oid view_oid, const Authorization &auth, Oid source)
{
	/*
	 * Planning folds IMMUTABLE functions called on constants, so it runs the definition's code: as the counter's
	 * owner, restricted, with the extension's search_path, whoever reads the definition (a writer, maintenance, an
	 * event trigger, the background worker), once the reader was authorized.
	 */
	OwnerScope as;
	EnterOwner(&as, auth, PIN_SEARCH_PATH);
	Relation view = relation_open(view_oid, AccessShareLock);
	if (view->rd_rel->relkind != RELKIND_VIEW)
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE), errmsg("counter \"%s\": definition \"%s\" is not a view",
		                                                           name, RelationGetRelationName(view))));
	Query *query = (Query *)copyObject(get_view_query(view));
	CounterDef *def = AnalyzeDefinition(name, query, RelationGetDescr(view), source);
	relation_close(view, AccessShareLock);
	LeaveOwner(&as);
	return def;
}

CounterDef *
DefinitionOf(const Counter *e)
{
	if (e->definition == nullptr) {
		/* (where the Counter lives, so that what it keeps lives as long) */
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext((void *)e));
		e->definition = AnalyzeView(e->name, e->query, AuthorizedByCatalog(e), e->source);
		MemoryContextSwitchTo(old);
	}
	return e->definition;
}

namespace {

/* The relations a view's stored query reads, at any depth (its range tables, subqueries and sublinks included). */
bool
CollectRelations(Node *node, void *context)
{
	if (node == nullptr)
		return false;
	if (IsA(node, RangeTblEntry)) {
		RangeTblEntry *rte = (RangeTblEntry *)node;
		if (rte->rtekind == RTE_RELATION)
			*(List **)context = list_append_unique_oid(*(List **)context, rte->relid);
		return false;
	}
	if (IsA(node, Query))
		return compat::WalkQuery((Query *)node, CollectRelations, context, QTW_EXAMINE_RTES_BEFORE);
	return compat::WalkExpression(node, CollectRelations, context);
}

} // namespace

List *
ViewRelations(Oid view_oid)
{
	/* (the rule as stored: reading it runs nothing, neither do the view's own entries, OLD and NEW, add any) */
	Relation view = relation_open(view_oid, AccessShareLock);
	if (view->rd_rel->relkind != RELKIND_VIEW)
		ereport(ERROR,
		        (errcode(ERRCODE_WRONG_OBJECT_TYPE), errmsg("\"%s\" is not a view", RelationGetRelationName(view))));
	List *rels = NIL;
	(void)CollectRelations((Node *)get_view_query(view), &rels);
	relation_close(view, AccessShareLock);
	rels = list_delete_oid(rels, view_oid);
	return rels;
}

namespace {

char *
CollationName(Oid collation)
{
	HeapTuple tup = SearchSysCache1(COLLOID, ObjectIdGetDatum(collation));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for collation %u", collation);
	Form_pg_collation form = (Form_pg_collation)GETSTRUCT(tup);
	char *name = quote_qualified_identifier(get_namespace_name(form->collnamespace), NameStr(form->collname));
	ReleaseSysCache(tup);
	return name;
}

struct DefinitionContext {
	const char *name;
	const char *definition;
};

/* Syntax and name errors point into the definition text, not into the statement that declared it. */
void
DefinitionErrorContext(void *arg)
{
	DefinitionContext *dc = (DefinitionContext *)arg;
	int position = geterrposition();
	if (position > 0) {
		errposition(0);
		internalerrposition(position);
		internalerrquery(dc->definition);
	}
	errcontext("definition of counter \"%s\"", dc->name);
}

/* Errors while the definition is parsed say where in its text, naming the counter. */
void
PushDefinitionContext(ErrorContextCallback *context, DefinitionContext *dc)
{
	context->callback = DefinitionErrorContext;
	context->arg = dc;
	context->previous = error_context_stack;
	error_context_stack = context;
}

/* The first table of a FROM clause (the counted table: of a join, the first one's), or NULL. */
RangeVar *
FirstTable(Node *from)
{
	while (from != nullptr && IsA(from, JoinExpr))
		from = ((JoinExpr *)from)->larg;
	return from != nullptr && IsA(from, RangeVar) ? (RangeVar *)from : nullptr;
}

struct RawRelations {
	bool resolve; /* false: the first pass, collecting the names of WITH queries */
	List *ctes;   /* names of the WITH queries (a name a RangeVar may stand for) */
	List *rels;
};

/*
 * Every RangeVar of a raw parse tree, resolved, in a second pass (WITH queries' names, collected by the first, aside):
 * an error for one that resolves to no relation, which analysis would report anyway.
 */
bool
CollectRangeVars(Node *node, void *context)
{
	RawRelations *r = (RawRelations *)context;
	if (node == nullptr)
		return false;
	if (IsA(node, CommonTableExpr) && !r->resolve)
		r->ctes = lappend(r->ctes, ((CommonTableExpr *)node)->ctename);
	else if (IsA(node, RangeVar)) {
		if (!r->resolve)
			return false;
		RangeVar *rv = (RangeVar *)node;
		Oid relid = RangeVarGetRelid(rv, NoLock, true);
		bool cte = false;
		ListCell *lc;
		foreach (lc, r->ctes)
			cte |= rv->schemaname == nullptr && strcmp((const char *)lfirst(lc), rv->relname) == 0;
		if (OidIsValid(relid))
			r->rels = list_append_unique_oid(r->rels, relid);
		else if (!cte)
			/* (as parse analysis reports it, pointing into the definition: DefinitionErrorContext) */
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
			                errmsg("relation \"%s\" does not exist",
			                       rv->schemaname ? psprintf("%s.%s", rv->schemaname, rv->relname) : rv->relname),
			                errposition(rv->location + 1)));
		return false;
	}
	return compat::WalkRawTree(node, CollectRangeVars, context);
}

} // namespace

List *
DefinitionRelations(const char *name, const char *definition, bool pinned, Oid *source)
{
	DefinitionContext dc = {name, definition};
	ErrorContextCallback context;
	PushDefinitionContext(&context, &dc);
	/* (raw parsing runs no code; a wrong definition is reported by DescribeDefinition) */
	List *raw = raw_parser(definition, RAW_PARSE_DEFAULT);
	*source = InvalidOid;
	RawRelations r = {false, NIL, NIL};
	/* (names resolve exactly as the definition's analysis will resolve them: with the same search_path) */
	int level = NewGUCNestLevel();
	(void)set_config_option("search_path", pinned ? "pg_catalog, pg_temp" : CallerSearchPath(), PGC_USERSET,
	                        PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	/* (anything but one SELECT is refused by DescribeDefinition, before it is analysed) */
	if (list_length(raw) == 1 && IsA(linitial_node(RawStmt, raw)->stmt, SelectStmt)) {
		for (int pass = 0; pass < 2; pass++) {
			r.resolve = pass == 1;
			(void)CollectRangeVars(linitial_node(RawStmt, raw)->stmt, &r);
		}
		SelectStmt *select = (SelectStmt *)linitial_node(RawStmt, raw)->stmt;
		RangeVar *table = select->fromClause != NIL ? FirstTable((Node *)linitial(select->fromClause)) : nullptr;
		if (table != nullptr)
			*source = RangeVarGetRelid(table, NoLock, true);
	}
	AtEOXact_GUC(false, level);
	error_context_stack = context.previous;
	return r.rels;
}

CounterDef *
DescribeDefinition(const char *name, const char *definition, Oid owner, const char **stored)
{
	/* (parse analysis resolves the definition's names and coerces its constants: as the owner, restricted) */
	RequireOwnerScope(owner);
	DefinitionContext dc = {name, definition};
	ErrorContextCallback context;
	PushDefinitionContext(&context, &dc);
	List *raw = raw_parser(definition, RAW_PARSE_DEFAULT);
	if (list_length(raw) != 1)
		ereport(ERROR, (errcode(ERRCODE_SYNTAX_ERROR),
		                errmsg("counter \"%s\": the definition must be exactly one SELECT statement", name)));
	RawStmt *stmt = linitial_node(RawStmt, raw);
	if (!IsA(stmt->stmt, SelectStmt) || ((SelectStmt *)stmt->stmt)->intoClause != nullptr)
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
		                errmsg("counter \"%s\": the definition must be a SELECT statement", name)));
	Query *query = parse_analyze_fixedparams(stmt, definition, nullptr, 0, nullptr);
	if (stored != nullptr)
		*stored = definition;
	if (AddAccumulators(query)) {
		/* (refused before it is deparsed: a select list PostgreSQL would refuse is not worth the text) */
		if (list_length(query->targetList) > MaxHeapAttributeNumber - 1)
			ereport(ERROR, (errcode(ERRCODE_TOO_MANY_COLUMNS),
			                errmsg("counter \"%s\": %d columns is too many", name, list_length(query->targetList)),
			                errdetail("A counter table has at most %d columns, the accumulators of avg(), bool_or(), "
			                          "bool_and() and every() included.",
			                          MaxHeapAttributeNumber - 1)));
		/*
		 * Given accumulators: stored as its deparsed text, which names everything but pg_catalog's objects with their
		 * schema, and analysed again from it as the view will be (with the search_path pinned), so that what is
		 * declared is what is stored.
		 */
		int level = PinSettings(PIN_SEARCH_PATH);
		char *text = pg_get_querydef(query, false);
		dc.definition = text;
		raw = raw_parser(text, RAW_PARSE_DEFAULT);
		query = parse_analyze_fixedparams(linitial_node(RawStmt, raw), text, nullptr, 0, nullptr);
		UnpinSettings(level);
		if (stored != nullptr)
			*stored = text;
	}
	error_context_stack = context.previous;
	return AnalyzeDefinition(name, query, nullptr);
}

bool
JoinsThreeTables(const char *name, const char *definition)
{
	DefinitionContext dc = {name, definition};
	ErrorContextCallback context;
	PushDefinitionContext(&context, &dc);
	/* (raw parsing runs no code) */
	List *raw = raw_parser(definition, RAW_PARSE_DEFAULT);
	error_context_stack = context.previous;
	if (list_length(raw) != 1 || !IsA(linitial_node(RawStmt, raw)->stmt, SelectStmt))
		return false;
	SelectStmt *select = (SelectStmt *)linitial_node(RawStmt, raw)->stmt;
	if (list_length(select->fromClause) != 1 || !IsA(linitial(select->fromClause), JoinExpr))
		return false;
	JoinExpr *join = (JoinExpr *)linitial(select->fromClause);
	return IsA(join->larg, JoinExpr) || IsA(join->rarg, JoinExpr);
}

int
DescribeChain(const char *name, const char *definition, Oid owner, ChainPart **parts, const char **declared)
{
	RequireOwnerScope(owner);
	DefinitionContext dc = {name, definition};
	ErrorContextCallback context;
	PushDefinitionContext(&context, &dc);
	List *raw = raw_parser(definition, RAW_PARSE_DEFAULT);
	int n = 0;
	/* (anything else is DescribeDefinition's to refuse) */
	if (list_length(raw) == 1 && IsA(linitial_node(RawStmt, raw)->stmt, SelectStmt) &&
	    ((SelectStmt *)linitial_node(RawStmt, raw)->stmt)->intoClause == nullptr) {
		Query *query = parse_analyze_fixedparams(linitial_node(RawStmt, raw), definition, nullptr, 0, nullptr);
		if (query->commandType == CMD_SELECT && IsChainQuery(query))
			n = DecomposeChain(name, query, parts, declared);
	}
	error_context_stack = context.previous;
	return n;
}

char *
KeyColumnType(const KeyDef *key)
{
	/* The key column groups like the definition's GROUP BY: same type and collation. */
	StringInfoData type;
	initStringInfo(&type);
	appendStringInfoString(
	    &type, format_type_extended(key->type, key->typmod, FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
	if (OidIsValid(key->collation) && key->collation != get_typcollation(key->type))
		appendStringInfo(&type, " COLLATE %s", CollationName(key->collation));
	return type.data;
}

} // namespace counters
