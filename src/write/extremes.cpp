/*
 * extremes.cpp: min() and max() columns. A row adds its argument as a sum would add it: the key's row takes the more
 * extreme of its value and the one added (GREATEST or LEAST, in the row version the apply writes anyway). Removing a
 * row can take the extreme away, which no delta can undo: when the most extreme value a key's rows removed reaches
 * the value stored once the key's row is locked, the key's extreme is read again from the source (ReadExtreme),
 * with a snapshot taken after the lock was granted, through an index whose leading columns are the keys and then
 * the argument: one descent, whatever the key's row count. Without such an index (dropped after the declaration
 * required it, or on a partition that lacks it) the rows are scanned: slower, never wrong.
 *
 * Why the lock, then the snapshot, is exact: every transaction that changes a key's rows locks the key's counter row
 * (a removal too, even one that does not reach the extreme) before it commits, so once this transaction holds it, a
 * snapshot sees every earlier change of the key's rows committed, and a later one waits for the lock and then finds
 * the value this transaction stored (docs/aggregates.md, "min and max under concurrency").
 */
#include "write/write.hpp"

extern "C" {
#include "access/genam.h"
#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/partition.h"
#include "catalog/pg_inherits.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "nodes/nodeFuncs.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}
#include "compat.hpp"

namespace counters {

namespace {

/* Whether the key of the row in the econtext's scan slot is entry `e`'s (evaluated into r->row_key, free once the
 * statement's rows are counted). */
bool
RowHasKey(CounterRun *r, ExprContext *econtext, const DeltaEntry *e)
{
	RequireOwnerScope(r->c->auth.role());
	for (int k = 0; k < r->c->def->nkeys; k++)
		r->row_key.values[k] = ExecEvalExprSwitchContext(r->key_exprs[k], econtext, &r->row_key.nulls[k]);
	return RowKeyIs(r, e);
}

/*
 * What one relation's rows of the key say. An extreme (pair NULL): the extreme, into *best when it is more extreme
 * (*found). A distinct count's pair (its value *pair): its rows, added to *count until it reaches `limit`.
 */
struct Reading {
	const Datum *pair;
	int64 limit;
	int64 count;
	bool found;
	Datum best;
};

} // namespace

/*
 * The relations a value column reads again, found once per batch: the source, or its partitions (those counted in
 * by the running command too, not those counted away: Membership), each with the index that serves the column
 * (InvalidOid: a scan), its keys' order in that index and its direction. Their locks are kept to the transaction's end,
 * as the executor keeps them, so that what was found stays true.
 */
struct ReadPlan {
	int nrels;
	Oid *rels;
	Oid *index;
	int *key_of; /* nkeys per relation */
	bool *backward;
};

namespace {

const ReadPlan *
PlanOf(CounterRun *r, int v)
{
	const CounterDef *def = r->c->def;
	if (r->read_plans != nullptr && r->read_plans[v] != nullptr)
		return r->read_plans[v];
	MemoryContext old = MemoryContextSwitchTo(r->delta_cxt);
	if (r->read_plans == nullptr)
		r->read_plans = (ReadPlan **)palloc0(sizeof(ReadPlan *) * def->nvalues);
	Oid source = def->source;
	List *rels = get_rel_relkind(source) == RELKIND_PARTITIONED_TABLE
	                 ? find_all_inheritors(source, AccessShareLock, nullptr)
	                 : list_make1_oid(source);
	/* (the rows of relations counted away are still there, of those counted in not yet: the source as counted) */
	const Membership *m = CurrentMembership();
	if (m != nullptr)
		rels = list_concat_unique_oid(rels, m->in);
	ReadPlan *plan = (ReadPlan *)palloc0(sizeof(ReadPlan));
	int n = list_length(rels);
	plan->rels = (Oid *)palloc(sizeof(Oid) * n);
	plan->index = (Oid *)palloc(sizeof(Oid) * n);
	plan->key_of = (int *)palloc(sizeof(int) * n * Max(def->nkeys, 1));
	plan->backward = (bool *)palloc(sizeof(bool) * n);
	ListCell *lc;
	foreach (lc, rels) {
		Oid relid = lfirst_oid(lc);
		char kind = get_rel_relkind(relid);
		if ((kind != RELKIND_RELATION && kind != RELKIND_MATVIEW) || (m != nullptr && list_member_oid(m->away, relid)))
			continue;
		int i = plan->nrels++;
		Relation rel = table_open(relid, AccessShareLock);
		plan->rels[i] = relid;
		plan->index[i] = ExtremeIndexOf(def, v, rel, &plan->key_of[i * def->nkeys], &plan->backward[i]);
		if (OidIsValid(plan->index[i]))
			LockRelationOid(plan->index[i], AccessShareLock);
		table_close(rel, NoLock);
	}
	MemoryContextSwitchTo(old);
	r->read_plans[v] = plan;
	return plan;
}

void
ReadRelation(CounterRun *r, int v, const DeltaEntry *e, const ReadPlan *plan, int i, Snapshot snapshot,
             ExprContext *econtext, Reading *reading)
{
	CompiledCounter *c = r->c;
	RequireOwnerScope(c->auth.role());
	const CounterDef *def = c->def;
	const ExtremeColumn *x = &c->extremes[v];
	Relation rel = table_open(plan->rels[i], NoLock);
	RowReader rd;
	InitReader(&rd, rel, def->source, table_slot_callbacks(rel));
	const int *key_of = &plan->key_of[i * def->nkeys];
	bool backward = plan->backward[i];
	Oid indexoid = plan->index[i];
	Relation index = nullptr;
	IndexScanDesc iscan = nullptr;
	TableScanDesc tscan = nullptr;
	if (OidIsValid(indexoid)) {
		index = index_open(indexoid, NoLock);
		ScanKeyData keys[INDEX_MAX_KEYS];
		int nkeys = def->nkeys;
		for (int j = 0; j < nkeys; j++) {
			int k = key_of[j];
			if (e->KeyNulls(nkeys)[k]) {
				ScanKeyEntryInitialize(&keys[j], SK_ISNULL | SK_SEARCHNULL, j + 1, InvalidStrategy, InvalidOid,
				                       InvalidOid, InvalidOid, (Datum)0);
				continue;
			}
			Oid subtype;
			Oid eq = IndexEqualityOperator(index, j, def->keys[k].type, &subtype);
			ScanKeyEntryInitialize(&keys[j], 0, j + 1, BTEqualStrategyNumber, subtype, index->rd_indcollation[j],
			                       get_opcode(eq), e->key[k]);
		}
		if (reading->pair == nullptr)
			ScanKeyEntryInitialize(&keys[nkeys], SK_ISNULL | SK_SEARCHNOTNULL, nkeys + 1, InvalidStrategy, InvalidOid,
			                       InvalidOid, InvalidOid, (Datum)0);
		else {
			/* (the pair's value: equal in the index's operator family, which its DISTINCT compares with) */
			Oid subtype;
			Oid eq = IndexEqualityOperator(index, nkeys, def->values[v].extreme_type, &subtype);
			ScanKeyEntryInitialize(&keys[nkeys], 0, nkeys + 1, BTEqualStrategyNumber, subtype,
			                       index->rd_indcollation[nkeys], get_opcode(eq), *reading->pair);
		}
		iscan = compat::BeginIndexScan(rel, index, snapshot, nkeys + 1);
		index_rescan(iscan, keys, nkeys + 1, nullptr, 0);
	} else
		tscan = table_beginscan(rel, snapshot, 0, nullptr);
	for (;;) {
		bool more = iscan != nullptr
		                ? index_getnext_slot(iscan, backward ? BackwardScanDirection : ForwardScanDirection, rd.slot)
		                : table_scan_getnextslot(tscan, ForwardScanDirection, rd.slot);
		if (!more)
			break;
		CHECK_FOR_INTERRUPTS();
		ResetExprContext(econtext);
		econtext->ecxt_scantuple = rd.map ? execute_attr_map_slot(rd.map, rd.slot, rd.root_slot) : rd.slot;
		if (iscan == nullptr && !RowHasKey(r, econtext, e))
			continue;
		if ((r->quals && !ExecQual(r->quals, econtext)) ||
		    (r->filter_exprs[v] && !ExecQual(r->filter_exprs[v], econtext)))
			continue;
		bool isnull;
		Datum value = ExecEvalExprSwitchContext(r->arg_exprs[v], econtext, &isnull);
		if (isnull)
			continue;
		if (reading->pair != nullptr) {
			/* (the index found the pair's rows; a scan compares) */
			if (iscan == nullptr && ExtremeCompare(c, v, value, *reading->pair) != 0)
				continue;
			if (++reading->count >= reading->limit)
				break;
			continue;
		}
		if (!reading->found || ExtremeCompare(c, v, value, reading->best) > 0) {
			reading->best = datumCopy(value, x->byval, x->typlen);
			reading->found = true;
		}
		/* (in the index's order, the first row that counts holds the extreme) */
		if (iscan != nullptr)
			break;
	}
	if (iscan != nullptr) {
		index_endscan(iscan);
		index_close(index, NoLock);
	} else
		table_endscan(tscan);
	DropReader(&rd);
	table_close(rel, NoLock);
}

} // namespace

void
CompileExtremes(CompiledCounter *c)
{
	const CounterDef *def = c->def;
	c->extremes = nullptr;
	for (int v = 0; v < def->nvalues; v++) {
		const ValueDef *vd = &def->values[v];
		if (!ReadsSource(vd))
			continue;
		if (c->extremes == nullptr)
			c->extremes = (ExtremeColumn *)palloc0(sizeof(ExtremeColumn) * def->nvalues);
		ExtremeColumn *x = &c->extremes[v];
		Oid opfamily, opcintype;
		int direction;
		if (!compat::OrderingOperator(vd->sortop, &opfamily, &opcintype, &direction))
			elog(ERROR, "counters: operator %u is no btree ordering operator", vd->sortop);
		/* (the comparison of the operator class's input type: anyenum, anyarray for the polymorphic ones) */
		Oid proc = get_opfamily_proc(opfamily, opcintype, opcintype, BTORDER_PROC);
		if (!OidIsValid(proc))
			elog(ERROR, "counters: counter \"%s\": no btree comparison for type %s", def->name,
			     format_type_be(vd->extreme_type));
		x->kept = vd->kind == ValueKind::Extreme;
		x->distinct = vd->kind == ValueKind::Distinct;
		x->direction = direction;
		fmgr_info_cxt(proc, &x->cmp, CurrentMemoryContext);
		x->collation = vd->collation;
		get_typlenbyval(vd->extreme_type, &x->typlen, &x->byval);
	}
}

int
ExtremeCompare(const CompiledCounter *c, int v, Datum a, Datum b)
{
	RequireOwnerScope(c->auth.role());
	const ExtremeColumn *x = &c->extremes[v];
	int cmp = DatumGetInt32(FunctionCall2Coll(const_cast<FmgrInfo *>(&x->cmp), x->collation, a, b));
	cmp = cmp > 0 ? 1 : cmp < 0 ? -1 : 0;
	return x->direction > 0 ? cmp : -cmp;
}

namespace {

/* Read the key's rows of every relation of the source (each partition) into `reading`. */
void
ReadSource(CounterRun *r, int v, const DeltaEntry *e, Snapshot snapshot, Reading *reading)
{
	RequireOwnerScope(r->c->auth.role());
	const ReadPlan *plan = PlanOf(r, v);
	ExprContext *econtext = CreateStandaloneExprContext();
	for (int i = 0; i < plan->nrels; i++) {
		ReadRelation(r, v, e, plan, i, snapshot, econtext, reading);
		if (reading->pair != nullptr && reading->count >= reading->limit)
			break;
	}
	FreeExprContext(econtext, true);
}

} // namespace

Snapshot
SourceSnapshot()
{
	/* (this statement's writes and the counter rows written so far, then everything committed before the lock) */
	CommandCounterIncrement();
	return RegisterSnapshot(GetLatestSnapshot());
}

bool
ReadExtreme(CounterRun *r, int v, const DeltaEntry *e, Snapshot snapshot, Datum *value)
{
	Reading reading = {nullptr, 0, 0, false, (Datum)0};
	ReadSource(r, v, e, snapshot, &reading);
	*value = reading.best;
	return reading.found;
}

int
PairDelta(CounterRun *r, int v, const DeltaEntry *e, Datum x, int64 net, Snapshot snapshot)
{
	/*
	 * The pair's rows now (the statement's own among them): a pair that gained `net` rows is new to the key unless it
	 * has more than `net` now; one that lost rows is gone from the key unless one is left.
	 */
	Reading reading = {&x, net > 0 ? net + 1 : 1, 0, false, (Datum)0};
	ReadSource(r, v, e, snapshot, &reading);
	if (net > 0)
		return reading.count > net ? 0 : 1;
	return reading.count >= 1 ? 0 : -1;
}

} // namespace counters
