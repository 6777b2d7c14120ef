/*
 * compat.hpp: every difference between the PostgreSQL versions counters builds against (15 to 18), and the only
 * place that tests PG_VERSION_NUM. Each shim takes what every version needs and supplies what a version added (an
 * argument, a catalog class id) or renamed; the modules call the shims and never look at the version themselves.
 *
 * Versions and what changed (the PostgreSQL commit that changed it in parentheses):
 *   16  build_attrmap_by_name_if_req() takes missing_ok (ad86d159b6); pg_*_ownercheck() and pg_proc_aclcheck() are
 *       object_ownercheck() and object_aclcheck() with a class id (afbfc029, c727f511);
 *       stringToQualifiedNameList() takes an error context (soft input errors); table_tuple_update() tells whether
 *       only summarizing indexes need new entries, and ExecInsertIndexTuples() can insert into only those
 *       (19d8e2308b); the tree walkers' callbacks have a declared type, tree_walker_callback (1c27d16e6e).
 *   17  BackendId is gone: a backend's number is the 0-based ProcNumber (024c521117).
 *   18  index_beginscan() takes instrumentation (0fbceae841); GROUP BY expressions in the select list are Vars of a
 *       grouping range-table entry (RTE_GROUP, 247dea89f7); generated columns are virtual unless STORED (83ea6c540);
 *       get_ordering_op_properties() says a comparison type (CompareType), not a btree strategy.
 */
#pragma once

#include "counters.hpp"

extern "C" {
#include "access/genam.h"
#include "access/stratnum.h"
#include "access/tableam.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#else
#include "storage/backendid.h"
#endif
#if PG_VERSION_NUM >= 180000
#include "access/relation.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"
#endif
}

#if PG_VERSION_NUM < 150000
#error "counters needs PostgreSQL 15 or later"
#endif

namespace counters {
namespace compat {

/*
 * The btree operator family of ordering operator `op` (a min() or max() aggregate's sort operator), the input type of
 * its operator class (anyenum, anyarray for a polymorphic one) and its direction: 1 for "greater than", -1 for "less
 * than"; false when `op` is no btree ordering operator.
 */
inline bool
OrderingOperator(Oid op, Oid *opfamily, Oid *opcintype, int *direction)
{
#if PG_VERSION_NUM >= 180000
	CompareType cmp;
	if (!get_ordering_op_properties(op, opfamily, opcintype, &cmp))
		return false;
	*direction = cmp == COMPARE_GT ? 1 : -1;
#else
	int16 strategy;
	if (!get_ordering_op_properties(op, opfamily, opcintype, &strategy))
		return false;
	*direction = strategy == BTGreaterStrategyNumber ? 1 : -1;
#endif
	return true;
}

/* A map from the columns of `in` to those of `out` by name, or nullptr when the row needs no conversion. */
inline AttrMap *
AttrMapByName(TupleDesc in, TupleDesc out)
{
#if PG_VERSION_NUM >= 160000
	return build_attrmap_by_name_if_req(in, out, false);
#else
	return build_attrmap_by_name_if_req(in, out);
#endif
}

inline bool
OwnsRelation(Oid relid, Oid role)
{
#if PG_VERSION_NUM >= 160000
	return object_ownercheck(RelationRelationId, relid, role);
#else
	return pg_class_ownercheck(relid, role);
#endif
}

inline bool
OwnsNamespace(Oid nsp, Oid role)
{
#if PG_VERSION_NUM >= 160000
	return object_ownercheck(NamespaceRelationId, nsp, role);
#else
	return pg_namespace_ownercheck(nsp, role);
#endif
}

inline AclResult
FunctionAclCheck(Oid function, Oid role, AclMode mode)
{
#if PG_VERSION_NUM >= 160000
	return object_aclcheck(ProcedureRelationId, function, role, mode);
#else
	return pg_proc_aclcheck(function, role, mode);
#endif
}

/* A possibly qualified name split into its parts; a syntax error is raised. */
inline List *
QualifiedNameList(const char *name)
{
#if PG_VERSION_NUM >= 160000
	return stringToQualifiedNameList(name, nullptr);
#else
	return stringToQualifiedNameList(name);
#endif
}

/* This backend's number (small, distinct among live backends; 0- or 1-based depending on the version). */
inline int
BackendNumber()
{
#if PG_VERSION_NUM >= 170000
	return (int)MyProcNumber;
#else
	return (int)MyBackendId;
#endif
}

inline IndexScanDesc
BeginIndexScan(Relation heap, Relation index, Snapshot snapshot, int nkeys)
{
#if PG_VERSION_NUM >= 180000
	return index_beginscan(heap, index, snapshot, nullptr, nkeys, 0);
#else
	return index_beginscan(heap, index, snapshot, nkeys, 0);
#endif
}

/* Which indexes need entries for the new version of an updated row. */
enum class IndexUpdate {
	None,       /* a HOT update: none */
	All,        /* every index */
	Summarizing /* a HOT update that changed a column of a summarizing (BRIN) index: those only (16 and later) */
};

/* table_tuple_update() without a crosscheck snapshot, waiting for concurrent updates. */
inline TM_Result
UpdateTuple(Relation rel, ItemPointer tid, TupleTableSlot *slot, CommandId cid, Snapshot snapshot, TM_FailureData *tmfd,
            LockTupleMode *lockmode, IndexUpdate *indexes)
{
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes = TU_None;
	TM_Result res =
	    table_tuple_update(rel, tid, slot, cid, snapshot, InvalidSnapshot, true, tmfd, lockmode, &update_indexes);
	*indexes = update_indexes == TU_All           ? IndexUpdate::All
	           : update_indexes == TU_Summarizing ? IndexUpdate::Summarizing
	                                              : IndexUpdate::None;
#else
	bool update_indexes = false;
	TM_Result res =
	    table_tuple_update(rel, tid, slot, cid, snapshot, InvalidSnapshot, true, tmfd, lockmode, &update_indexes);
	*indexes = update_indexes ? IndexUpdate::All : IndexUpdate::None;
#endif
	return res;
}

/*
 * Insert the index entries of an updated row's new version (in `slot`) into the indexes `indexes` says (not None),
 * checking unique constraints as an UPDATE does. Returns what ExecInsertIndexTuples() returns.
 */
inline List *
InsertIndexTuples(ResultRelInfo *rri, TupleTableSlot *slot, EState *estate, IndexUpdate indexes)
{
#if PG_VERSION_NUM >= 160000
	return ExecInsertIndexTuples(rri, slot, estate, true, false, nullptr, NIL, indexes == IndexUpdate::Summarizing);
#else
	/* (15 has no summarizing HOT updates: a change to any indexed column makes the update non-HOT) */
	return ExecInsertIndexTuples(rri, slot, estate, true, false, nullptr, NIL);
#endif
}

/* Index entries for a newly inserted row (in `slot`), checking unique constraints as an INSERT does. */
inline List *
InsertIndexTuplesOfNewRow(ResultRelInfo *rri, TupleTableSlot *slot, EState *estate)
{
#if PG_VERSION_NUM >= 160000
	return ExecInsertIndexTuples(rri, slot, estate, false, false, nullptr, NIL, false);
#else
	return ExecInsertIndexTuples(rri, slot, estate, false, false, nullptr, NIL);
#endif
}

/*
 * Index entries for a row inserted speculatively (INSERT ... ON CONFLICT's protocol): *conflict says whether one of
 * `arbiters` already holds the key.
 */
inline List *
InsertIndexTuplesSpeculative(ResultRelInfo *rri, TupleTableSlot *slot, EState *estate, bool *conflict, List *arbiters)
{
#if PG_VERSION_NUM >= 160000
	return ExecInsertIndexTuples(rri, slot, estate, false, true, conflict, arbiters, false);
#else
	return ExecInsertIndexTuples(rri, slot, estate, false, true, conflict, arbiters);
#endif
}

/*
 * An analysed query's select list with GROUP BY expressions written out. From 18 on, a select-list expression that
 * matches a GROUP BY item is a Var of the grouping step's range-table entry (varattno = the item's position), not an
 * expression over the source table; this replaces such Vars by the grouped expressions, as the planner and ruleutils
 * do. Modifies `query` (pass a copy of one that must not change).
 */
inline void
ExpandGroupedColumns(Query *query)
{
#if PG_VERSION_NUM >= 180000
	if (query->hasGroupRTE) {
		query->targetList = (List *)flatten_group_exprs(nullptr, query, (Node *)query->targetList);
		query->havingQual = flatten_group_exprs(nullptr, query, query->havingQual);
	}
#endif
}

/*
 * A definition's references to virtual generated columns of its source (`varno` in `query`) replaced by their
 * generation expressions, in the select list and the WHERE clause. From 18 on, a generated column not declared STORED
 * is virtual: computed when read, never stored, so the rows the triggers see hold nothing for it, and the executor
 * evaluates no reference to it (the rewriter expands them in queries, as this does). Modifies `query`.
 */
inline void
ExpandVirtualColumns(Query *query, Index varno, Oid source)
{
#if PG_VERSION_NUM >= 180000
	Relation rel = relation_open(source, AccessShareLock);
	query->targetList = (List *)expand_generated_columns_in_expr((Node *)query->targetList, rel, (int)varno);
	query->jointree->quals = expand_generated_columns_in_expr(query->jointree->quals, rel, (int)varno);
	relation_close(rel, AccessShareLock);
#endif
}

/*
 * The walkers of raw parse trees and of analysed queries, with a callback of one signature: before 16 they take a
 * `bool (*)()` (an old-style C declaration, which C++ reads as taking no arguments); 16 declared the callback's type.
 */
typedef bool (*TreeWalker)(Node *node, void *context);

inline bool
WalkRawTree(Node *node, TreeWalker walker, void *context)
{
#if PG_VERSION_NUM >= 160000
	return raw_expression_tree_walker(node, walker, context);
#else
	return raw_expression_tree_walker(node, (bool (*)())(void (*)())walker, context);
#endif
}

inline bool
WalkQuery(Query *query, TreeWalker walker, void *context, int flags)
{
#if PG_VERSION_NUM >= 160000
	return query_tree_walker(query, walker, context, flags);
#else
	return query_tree_walker(query, (bool (*)())(void (*)())walker, context, flags);
#endif
}

inline bool
WalkExpression(Node *node, TreeWalker walker, void *context)
{
#if PG_VERSION_NUM >= 160000
	return expression_tree_walker(node, walker, context);
#else
	return expression_tree_walker(node, (bool (*)())(void (*)())walker, context);
#endif
}

} // namespace compat
} // namespace counters
