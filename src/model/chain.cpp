/*
 * chain.cpp: a counter through a chain of parent rows, decomposed into counters over counters.
 *
 *   SELECT f.id AS forum_id, count(*) AS reactions
 *     FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id
 *                      JOIN forums f ON t.forum_id = f.id
 *    GROUP BY f.id
 *
 * is kept as one counter per level, each over the one below and one parent row (the join every level of which is
 * exact: parent.cpp), the last one being the counter itself:
 *
 *   forum_reactions_by_reply_id   per reply:  SELECT r.reply_id, count(*) FROM reactions r GROUP BY 1
 *   forum_reactions_by_thread_id  per thread: SELECT p.thread_id, sum(c.reactions) FROM ..._by_reply_id c
 *                                               JOIN replies p ON c.reply_id = p.id GROUP BY 1
 *   forum_reactions_by_forum_id   per forum:  ... JOIN threads t ON c.thread_id = t.id ...
 *   forum_reactions                           ... JOIN forums f ON c.forum_id = f.id GROUP BY f.id
 *
 * A level's subtotals are its partial aggregates per join key (factorised maintenance): a reaction added moves one row
 * per level; a thread moved to another forum moves its one subtotal row, whatever the number of reactions below it.
 *
 * The decomposition is exact for count(*), count(x) and sum(x) with keys, values, WHERE and FILTER conditions on any
 * level: a condition or an argument of level j applies where level j is joined, a key of level j is carried up from
 * there, and a value whose argument is of a higher level is counted below as the number of join rows (its
 * multiplicity), multiplied by the argument where that level is joined. Each expression must read one level.
 */
#include "model/model.hpp"
#include "compat.hpp"

extern "C" {
#include "catalog/pg_aggregate.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
}

namespace counters {

namespace {

/* One table of the chain, from the leaf (level 0) up. */
struct Level {
	Index varno;
	Oid relid;
	AttrNumber up;  /* its column that points at the next level's key (0 at the top) */
	AttrNumber key; /* its unique column the level below points at (0 at the leaf) */
};

/* One join's equality: a.x = b.y */
struct Edge {
	Var *a;
	Var *b;
	Var *child;
	Var *parent;
};

[[noreturn]] void
RejectChain(const char *counter, const char *what, const char *hint = nullptr)
{
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("counter \"%s\": %s", counter, what),
	                errdetail("A counter through a chain of parent rows joins each table to its parent on one "
	                          "equality of integer columns, the parent's unique."),
	                hint ? errhint("%s", hint)
	                     : errhint("Join as FROM child JOIN parent ON child.parent_id = parent.id JOIN grandparent ON "
	                               "parent.grandparent_id = grandparent.id ...")));
	pg_unreachable();
}

/* The joins of a FROM item, each an inner join ON one equality between integer columns of two tables. */
void
CollectJoins(const char *name, Query *query, Node *node, List **tables, List **edges)
{
	if (IsA(node, RangeTblRef)) {
		Index varno = (Index)((RangeTblRef *)node)->rtindex;
		RangeTblEntry *rte = rt_fetch(varno, query->rtable);
		if (rte->rtekind != RTE_RELATION || get_rel_relkind(rte->relid) != RELKIND_RELATION)
			RejectChain(name, "every table of the chain must be a plain table",
			            "Partitioned tables, views and subqueries cannot be joined by a counter yet.");
		*tables = lappend_int(*tables, (int)varno);
		return;
	}
	if (!IsA(node, JoinExpr))
		RejectChain(name, "only joins of tables are supported");
	JoinExpr *join = (JoinExpr *)node;
	Var *a, *b;
	const char *problem = JoinColumns(join, &a, &b);
	if (problem != nullptr)
		RejectChain(name, problem);
	CollectJoins(name, query, join->larg, tables, edges);
	CollectJoins(name, query, join->rarg, tables, edges);
	Edge *e = (Edge *)palloc0(sizeof(Edge));
	e->a = a;
	e->b = b;
	*edges = lappend(*edges, e);
}

/* The level of the table at `varno`, or -1. */
int
LevelOfVarno(const Level *levels, int n, int varno)
{
	for (int i = 0; i < n; i++)
		if ((int)levels[i].varno == varno)
			return i;
	return -1;
}

/* The one level an expression reads (-1: none, a constant); refused when it reads two. */
int
ExpressionLevel(const char *name, const Level *levels, int n, Node *expr, const char *what)
{
	Bitmapset *varnos = pull_varnos(nullptr, expr);
	if (bms_num_members(varnos) == 0)
		return -1;
	if (bms_num_members(varnos) > 1)
		RejectChain(name, psprintf("%s reads columns of two tables of the chain", what),
		            "Each key, argument and condition may read one table: write a condition over two tables as "
		            "conditions over each, or keep a column of the parent in the child.");
	int level = LevelOfVarno(levels, n, bms_singleton_member(varnos));
	if (level < 0)
		elog(ERROR, "counters: counter \"%s\": %s reads no table of the chain", name, what);
	return level;
}

/* A condition's conjuncts, by level (a constant one applies at the leaf). */
List **
ConjunctsByLevel(const char *name, const Level *levels, int n, Node *cond, const char *what)
{
	List **by_level = (List **)palloc0(sizeof(List *) * n);
	ListCell *lc;
	foreach (lc, make_ands_implicit((Expr *)cond)) {
		Node *c = (Node *)lfirst(lc);
		int level = ExpressionLevel(name, levels, n, c, what);
		by_level[level < 0 ? 0 : level] = lappend(by_level[level < 0 ? 0 : level], c);
	}
	return by_level;
}

/* An expression over one level's table, as SQL naming it `alias` (everything qualified: the search_path is pinned). */
char *
DeparseAt(Node *expr, const Level *level, const char *alias)
{
	Node *copy = (Node *)copyObject(expr);
	ChangeVarNodes(copy, level->varno, 1, 0);
	return deparse_expression(copy, deparse_context_for(alias, level->relid), true, false);
}

/* " FILTER (WHERE a AND b ...)" of conjuncts (and `extra`, SQL), or "" */
char *
FilterClause(List *conjuncts, const Level *level, const char *alias, const char *extra)
{
	StringInfoData s;
	initStringInfo(&s);
	ListCell *lc;
	foreach (lc, conjuncts)
		appendStringInfo(&s, "%s(%s)", s.len ? " AND " : "", DeparseAt((Node *)lfirst(lc), level, alias));
	if (extra != nullptr)
		appendStringInfo(&s, "%s%s", s.len ? " AND " : "", extra);
	return s.len == 0 ? pstrdup("") : psprintf(" FILTER (WHERE %s)", s.data);
}

/* One value column of the definition: count(*), count(x) or sum(x), FILTER conjuncts by level. */
struct Value {
	const char *column;
	bool sum;      /* sum(x); else a count */
	Node *arg;     /* NULL for count(*) */
	int arg_level; /* -1 for count(*) */
	List **filter; /* per level */
};

/* One key column: its expression and level (a constant one is the top's). */
struct Key {
	const char *column;
	Node *expr;
	int level;
};

/* A name not among `taken` (column names of one part): `base`, else base_2, base_3 ... */
const char *
FreeName(List *taken, const char *base)
{
	for (int i = 1;; i++) {
		const char *candidate = i == 1 ? base : psprintf("%s_%d", base, i);
		bool used = false;
		ListCell *lc;
		foreach (lc, taken)
			used |= strcmp((const char *)lfirst(lc), candidate) == 0;
		if (!used)
			return candidate;
	}
}

/* A value's partial at `level`, over the part below as `c` (none at the leaf) and the level's table as `p`. */
char *
Partial(const Value *v, int level, const Level *levels, const char *below)
{
	const char *alias = level == 0 ? "s" : "p";
	if (level == 0) {
		const char *filter = FilterClause(v->filter[0], &levels[0], alias, nullptr);
		if (v->arg_level == 0)
			return psprintf("pg_catalog.%s(%s)%s", v->sum ? "sum" : "count", DeparseAt(v->arg, &levels[0], alias),
			                filter);
		return psprintf("pg_catalog.count(*)%s", filter);
	}
	const char *sub = psprintf("c.%s", quote_identifier(below));
	if (v->arg_level == level && v->sum)
		return psprintf("pg_catalog.sum(%s OPERATOR(pg_catalog.*) (%s))%s", sub,
		                DeparseAt(v->arg, &levels[level], alias),
		                FilterClause(v->filter[level], &levels[level], alias, nullptr));
	if (v->arg_level == level)
		return psprintf("pg_catalog.sum(%s)%s", sub,
		                FilterClause(v->filter[level], &levels[level], alias,
		                             psprintf("(%s) IS NOT NULL", DeparseAt(v->arg, &levels[level], alias))));
	return psprintf("pg_catalog.sum(%s)%s", sub, FilterClause(v->filter[level], &levels[level], alias, nullptr));
}

} // namespace

bool
IsChainQuery(Query *query)
{
	FromExpr *from = query->jointree;
	if (from == nullptr || list_length(from->fromlist) != 1 || !IsA(linitial(from->fromlist), JoinExpr))
		return false;
	JoinExpr *join = (JoinExpr *)linitial(from->fromlist);
	return IsA(join->larg, JoinExpr) || IsA(join->rarg, JoinExpr);
}

int
DecomposeChain(const char *name, Query *query, ChainPart **out, const char **declared)
{
	RequireAggregateQuery(name, query);
	if (!query->hasAggs || query->groupClause == NIL)
		RejectChain(name, "the definition must group rows and count or sum them", "GROUP BY the keys.");

	/* the tables and joins, then the chain they make: leaf -> parent -> grandparent ... */
	List *tables = NIL;
	List *edges = NIL;
	CollectJoins(name, query, (Node *)linitial(query->jointree->fromlist), &tables, &edges);
	int n = list_length(tables);
	if (n > MAX_CHAIN_DEPTH)
		RejectChain(name, psprintf("the chain joins %d tables, more than %d", n, MAX_CHAIN_DEPTH));
	ListCell *lc;
	foreach (lc, edges) {
		Edge *e = (Edge *)lfirst(lc);
		Oid rel_a = rt_fetch(e->a->varno, query->rtable)->relid;
		Oid rel_b = rt_fetch(e->b->varno, query->rtable)->relid;
		bool unique_a = HasUniqueIndexOn(rel_a, e->a->varattno);
		bool unique_b = HasUniqueIndexOn(rel_b, e->b->varattno);
		if (!unique_a && !unique_b)
			RejectChain(name, psprintf("neither column of the join of %s and %s has a unique index of its own",
			                           get_rel_name(rel_a), get_rel_name(rel_b)));
		/* (the parent: the unique side; of two, the one written later, as the user writes child then parent) */
		bool b_parent = unique_b && (!unique_a || e->b->varno > e->a->varno);
		e->child = b_parent ? e->a : e->b;
		e->parent = b_parent ? e->b : e->a;
	}
	Level *levels = (Level *)palloc0(sizeof(Level) * n);
	/* the leaf: the table that is no table's parent */
	int leaf = -1;
	foreach (lc, tables) {
		int varno = lfirst_int(lc);
		bool is_parent = false;
		ListCell *le;
		foreach (le, edges)
			is_parent |= (int)((Edge *)lfirst(le))->parent->varno == varno;
		if (!is_parent) {
			if (leaf >= 0)
				RejectChain(name, "the joins do not make one chain of parent rows",
				            "Every table but the first must be the parent of the one before it; count a table "
				            "with two parents in two counters.");
			leaf = varno;
		}
	}
	if (leaf < 0)
		RejectChain(name, "the joins do not make one chain of parent rows");
	int depth = 0;
	for (int varno = leaf; varno > 0;) {
		if (depth >= n || LevelOfVarno(levels, depth, varno) >= 0)
			RejectChain(name, "the joins do not make one chain of parent rows");
		levels[depth].varno = (Index)varno;
		levels[depth].relid = rt_fetch(varno, query->rtable)->relid;
		Edge *up = nullptr;
		ListCell *le;
		foreach (le, edges) {
			Edge *e = (Edge *)lfirst(le);
			if ((int)e->child->varno == varno) {
				if (up != nullptr)
					RejectChain(name, psprintf("table %s is joined to two parents", get_rel_name(levels[depth].relid)),
					            "Count a table with two parents in two counters, one through each.");
				up = e;
			}
		}
		int next = 0;
		if (up != nullptr) {
			levels[depth].up = up->child->varattno;
			next = (int)up->parent->varno;
		}
		depth++;
		if (next > 0 && depth < n)
			levels[depth].key = up->parent->varattno;
		varno = next;
	}
	if (depth != n)
		RejectChain(name, "the joins do not make one chain of parent rows");
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			if (levels[i].relid == levels[j].relid)
				RejectChain(name, psprintf("table %s appears twice in the chain", get_rel_name(levels[i].relid)));
	int top = n - 1;

	/* keys and values, each read at one level */
	int ntle = list_length(query->targetList);
	Key *keys = (Key *)palloc0(sizeof(Key) * ntle);
	Value *values = (Value *)palloc0(sizeof(Value) * ntle);
	bool *is_key = (bool *)palloc0(sizeof(bool) * ntle);
	int nkeys = 0, nvalues = 0, ncolumns = 0;
	foreach (lc, query->targetList) {
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		const char *column = tle->resname != nullptr ? tle->resname : "?column?";
		if (tle->resjunk) {
			if (IsGroupKey(query, tle))
				ereport(ERROR, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				                errmsg("counter \"%s\": a GROUP BY expression is not in the select list", name),
				                errhint("Every key must be a column of the counter table; select it with an alias.")));
			continue;
		}
		Node *expr = (Node *)tle->expr;
		if (IsGroupKey(query, tle)) {
			int level = ExpressionLevel(name, levels, n, expr, psprintf("key \"%s\"", column));
			keys[nkeys++] = Key{column, expr, level < 0 ? top : level};
			is_key[ncolumns++] = true;
			continue;
		}
		if (!IsA(expr, Aggref))
			RejectChain(name, psprintf("column \"%s\" is neither a GROUP BY key nor a count() or sum()", column),
			            "Compute other expressions over the counter when reading it.");
		Aggref *agg = (Aggref *)expr;
		/* (the kinds a counter keeps as sums: count(*), count(x), sum(x); aggregates.cpp's table) */
		const AggregateKind *kind = AggregateOf(agg);
		bool count_star = kind != nullptr && kind->kind == ValueKind::CountStar;
		bool sum = kind != nullptr && kind->kind == ValueKind::Sum;
		if ((!count_star && !sum && (kind == nullptr || kind->kind != ValueKind::CountArg)) || agg->aggorder != NIL ||
		    agg->aggkind != AGGKIND_NORMAL)
			RejectChain(name,
			            psprintf("column \"%s\": only count(*), count(x) and sum(x) are kept through a chain of "
			                     "parent rows",
			                     column),
			            "Keep avg() as sum() and count() columns and divide when reading; keep min(), max() and "
			            "count(DISTINCT) in a counter over the table that has the column, or over one parent row.");
		Value *v = &values[nvalues++];
		v->column = column;
		v->sum = sum;
		v->arg = count_star ? nullptr : (Node *)((TargetEntry *)linitial(agg->args))->expr;
		v->arg_level =
		    v->arg == nullptr ? -1 : ExpressionLevel(name, levels, n, v->arg, psprintf("column \"%s\"", column));
		if (v->arg != nullptr && v->arg_level < 0)
			v->arg_level = 0;
		v->filter = agg->aggfilter != nullptr ? ConjunctsByLevel(name, levels, n, (Node *)agg->aggfilter,
		                                                         psprintf("the FILTER of column \"%s\"", column))
		                                      : (List **)palloc0(sizeof(List *) * n);
		is_key[ncolumns++] = false;
	}
	if (nvalues == 0)
		RejectChain(name, "the definition selects no count() or sum() column", "Select count(*) or sum(x).");
	List **where = query->jointree->quals != nullptr
	                   ? ConjunctsByLevel(name, levels, n, query->jointree->quals, "a WHERE condition")
	                   : (List **)palloc0(sizeof(List *) * n);

	/* the parts, bottom-up, all in the leaf's schema; the last one the counter itself */
	const char *schema = get_namespace_name(get_rel_namespace(levels[0].relid));
	ChainPart *parts = (ChainPart *)palloc0(sizeof(ChainPart) * n);
	const char *below_table = nullptr;
	const char *below_link = nullptr;
	List *part_names = NIL;
	/* (deparsed with the search_path pinned: every name but pg_catalog's qualified, parsed again so) */
	int pinned = PinSettings(PIN_SEARCH_PATH);
	*declared = pg_get_querydef(query, false);
	for (int level = 0; level < n; level++) {
		const Level *lv = &levels[level];
		const char *alias = level == 0 ? "s" : "p";
		StringInfoData select;
		initStringInfo(&select);
		StringInfoData group;
		initStringInfo(&group);
		int position = 0;
		List *taken = NIL;
		for (int k = 0; k < nkeys; k++)
			taken = lappend(taken, (void *)keys[k].column);
		for (int v = 0; v < nvalues; v++)
			taken = lappend(taken, (void *)values[v].column);
		const char *link = nullptr;
		const char *up_name = level < top ? get_attname(lv->relid, lv->up, false) : nullptr;
		if (level < top) {
			/* the column that points at the next level, first: its index is the part's key index */
			link = FreeName(taken, up_name);
			appendStringInfo(&select, "%s.%s AS %s", alias, quote_identifier(up_name), quote_identifier(link));
			appendStringInfo(&group, "%d", ++position);
			for (int k = 0; k < nkeys; k++)
				if (keys[k].level <= level) {
					const char *expr = keys[k].level == level ? DeparseAt(keys[k].expr, lv, alias)
					                                          : psprintf("c.%s", quote_identifier(keys[k].column));
					appendStringInfo(&select, ", %s AS %s", expr, quote_identifier(keys[k].column));
					appendStringInfo(&group, ", %d", ++position);
				}
			for (int v = 0; v < nvalues; v++)
				appendStringInfo(&select, ", %s AS %s", Partial(&values[v], level, levels, values[v].column),
				                 quote_identifier(values[v].column));
		} else {
			/* the counter itself: the definition's columns in its order */
			int k = 0, v = 0;
			for (int col = 0; col < ncolumns; col++) {
				if (col > 0)
					appendStringInfoString(&select, ", ");
				if (is_key[col]) {
					const Key *key = &keys[k++];
					const char *expr = key->level == level ? DeparseAt(key->expr, lv, alias)
					                                       : psprintf("c.%s", quote_identifier(key->column));
					appendStringInfo(&select, "%s AS %s", expr, quote_identifier(key->column));
					appendStringInfo(&group, "%s%d", group.len ? ", " : "", col + 1);
				} else {
					appendStringInfo(&select, "%s AS %s", Partial(&values[v], level, levels, values[v].column),
					                 quote_identifier(values[v].column));
					v++;
				}
			}
		}
		StringInfoData sql;
		initStringInfo(&sql);
		const char *table =
		    quote_qualified_identifier(get_namespace_name(get_rel_namespace(lv->relid)), get_rel_name(lv->relid));
		if (level == 0)
			appendStringInfo(&sql, "SELECT %s FROM %s s", select.data, table);
		else
			appendStringInfo(&sql, "SELECT %s FROM %s c JOIN %s p ON c.%s OPERATOR(pg_catalog.=) p.%s", select.data,
			                 below_table, table, quote_identifier(below_link),
			                 quote_identifier(get_attname(lv->relid, lv->key, false)));
		/* (a row whose pointer is NULL joins no parent: left out below, as the inner join leaves it out) */
		StringInfoData conditions;
		initStringInfo(&conditions);
		if (level < top)
			appendStringInfo(&conditions, "%s.%s IS NOT NULL", alias, quote_identifier(up_name));
		ListCell *lw;
		foreach (lw, where[level])
			appendStringInfo(&conditions, "%s(%s)", conditions.len ? " AND " : "",
			                 DeparseAt((Node *)lfirst(lw), lv, alias));
		if (conditions.len > 0)
			appendStringInfo(&sql, " WHERE %s", conditions.data);
		appendStringInfo(&sql, " GROUP BY %s", group.data);

		const char *part_name = name;
		if (level < top) {
			part_name = psprintf("%s_by_%s", name, up_name);
			for (int i = 2; list_member(part_names, makeString((char *)part_name)); i++)
				part_name = psprintf("%s_by_%s_%d", name, up_name, i);
			part_names = lappend(part_names, makeString((char *)part_name));
			if (strlen(part_name) >= NAMEDATALEN)
				ereport(ERROR, (errcode(ERRCODE_NAME_TOO_LONG),
				                errmsg("counter \"%s\": the name of its level %s is too long", name, part_name),
				                errdetail("A counter through a chain of parent rows keeps one counter per level, "
				                          "named after it and the column joined."),
				                errhint("Give the counter a shorter name.")));
		}
		parts[level].name = part_name;
		parts[level].definition = sql.data;
		below_table = quote_qualified_identifier(schema, part_name);
		below_link = link;
	}
	UnpinSettings(pinned);
	*out = parts;
	return n;
}

List *
ChainParts(const Counter *e)
{
	List *parts = NIL;
	const Counter *upper = e;
	for (int depth = 0; depth < MAX_CHAIN_DEPTH; depth++) {
		const char *what;
		Counter *part = OwnerCounterOf(upper->source, &what);
		if (part == nullptr || part->target != upper->source || part->options->part_of == nullptr ||
		    strcmp(part->options->part_of, e->name) != 0)
			break;
		parts = lcons(part, parts);
		upper = part;
	}
	return parts;
}

List *
CountersFeeding(const Counter *e)
{
	List *out = NIL;
	ListCell *lc;
	foreach (lc, ReadCatalogOfRelation(e->source)) {
		Counter *c = (Counter *)lfirst(lc);
		if (c->target == e->source && c->mode == Mode::Exact && strcmp(c->name, e->name) != 0)
			out = lappend(out, c);
	}
	return out;
}

namespace {

bool
Listed(List *counters, const Counter *e)
{
	ListCell *lc;
	foreach (lc, counters)
		if (strcmp(((const Counter *)lfirst(lc))->name, e->name) == 0)
			return true;
	return false;
}

/* `e` after the counters that write its source (those in `among`, or all of them: NIL), each once. */
List *
AppendBottomUp(List *out, const Counter *e, List *among, int depth)
{
	if (Listed(out, e))
		return out;
	if (depth < MAX_CHAIN_DEPTH) {
		ListCell *lc;
		foreach (lc, CountersFeeding(e))
			if (among == NIL || Listed(among, (const Counter *)lfirst(lc)))
				out = AppendBottomUp(out, (const Counter *)lfirst(lc), among, depth + 1);
	}
	return Listed(out, e) ? out : lappend(out, (void *)e);
}

} // namespace

List *
BottomUp(List *counters, bool below)
{
	List *out = NIL;
	ListCell *lc;
	foreach (lc, counters)
		out = AppendBottomUp(out, (const Counter *)lfirst(lc), below ? NIL : counters, 0);
	return out;
}

void
RequireWhole(const Counter *e, const char *change)
{
	if (e->options->part_of != nullptr)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\" is a level of counter \"%s\": it cannot be %s", e->name,
		                       e->options->part_of, change),
		                errdetail("Counter \"%s\" counts through a chain of parent rows, one exact counter per level, "
		                          "each over the one below.",
		                          e->options->part_of),
		                errhint("Change counter \"%s\" instead.", e->options->part_of)));
}

} // namespace counters
