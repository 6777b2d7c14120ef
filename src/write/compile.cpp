/*
 * compile.cpp: per-backend cache of compiled counters, keyed by the relation whose trigger fires.
 *
 * The catalog (counters.counter) and the definition views hold the truth; this cache holds what the trigger needs
 * to run fast: planned key/value expressions, comparison and hash support for the keys, the mode and relation its
 * deltas go to (WriteRelation), and the prepared statements that apply them (written by write_statements.cpp). An entry
 * is dropped when PostgreSQL invalidates the relcache entry of the source, of the counter table, of the definition
 * view, or of the catalog (counters.create_counter/drop_counter send one for the source), so renames, ALTERs and new
 * counters are picked up by the next statement.
 */
#include "write/write.hpp"
#include "citus/citus.hpp"

extern "C" {
#include "access/genam.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_am.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "utils/syscache.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"
#include "rewrite/rewriteManip.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/typcache.h"
}

namespace counters {

namespace {

/*
 * What an entry's relation is to its counters: the relation their source's triggers fire on (the source, or one of its
 * partitions), the parent their rows join (counters through a parent row), or the existing table that keeps their
 * counter-cache columns. A cache each.
 */
enum class Kind { Source, Parent, Target };
HTAB *source_cache = nullptr;
HTAB *parent_cache = nullptr;
HTAB *target_cache = nullptr;
/* Bumped by every relcache invalidation: an entry built while one arrived is rebuilt at its next use. */
uint64 invalidation_count = 0;

/* Oids that, when invalidated, invalidate an entry: the source, targets and definition views. */
bool
EntryDependsOn(SourceCounters *entry, Oid relid)
{
	if (entry->relid == relid || entry->source == relid)
		return true;
	for (int i = 0; i < entry->ncounters; i++)
		if (entry->counters[i].counter->target == relid || entry->counters[i].counter->query == relid ||
		    entry->counters[i].write_rel == relid || entry->counters[i].totals == relid ||
		    entry->counters[i].def->source == relid || entry->counters[i].def->parent == relid)
			return true;
	return false;
}

void
InvalidateCallback(Datum arg, Oid relid)
{
	invalidation_count++;
	HTAB *caches[3] = {source_cache, parent_cache, target_cache};
	for (int i = 0; i < 3; i++) {
		if (caches[i] == nullptr)
			continue;
		HASH_SEQ_STATUS status;
		hash_seq_init(&status, caches[i]);
		SourceCounters *entry;
		while ((entry = (SourceCounters *)hash_seq_search(&status)) != nullptr) {
			if (relid == InvalidOid || EntryDependsOn(entry, relid))
				entry->valid = false;
		}
	}
}

void
FreePlans(CompiledCounter *counters, int n)
{
	for (int i = 0; i < n; i++)
		for (int p = 0; p < NUM_PLANS; p++) {
			if (counters[i].plans[p] != nullptr)
				SPI_freeplan(counters[i].plans[p]);
			counters[i].plans[p] = nullptr;
		}
}

/*
 * Compiled counters replaced during a transaction may still be in use further up the stack (a counter table that
 * is itself a source, a statement running while an invalidation arrives), so they are freed at transaction end.
 */
struct Retired {
	Retired *next;
	MemoryContext cxt;
	CompiledCounter *counters;
	int ncounters;
};
Retired *retired = nullptr;

void
RetireEntry(SourceCounters *entry)
{
	if (entry->cxt != nullptr) {
		Retired *r = (Retired *)MemoryContextAlloc(TopMemoryContext, sizeof(Retired));
		r->cxt = entry->cxt;
		r->counters = entry->counters;
		r->ncounters = entry->ncounters;
		r->next = retired;
		retired = r;
	}
	entry->cxt = nullptr;
	entry->ncounters = 0;
	entry->counters = nullptr;
}

void
FreeRetired(XactEvent event, void *arg)
{
	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_COMMIT &&
	    event != XACT_EVENT_PARALLEL_ABORT && event != XACT_EVENT_PREPARE)
		return;
	while (retired != nullptr) {
		Retired *r = retired;
		retired = r->next;
		FreePlans(r->counters, r->ncounters);
		MemoryContextDelete(r->cxt);
		pfree(r);
	}
}

bool
IsFastKeyType(Oid type)
{
	switch (type) {
	case INT2OID:
	case INT4OID:
	case INT8OID:
	case BOOLOID:
	case DATEOID:
	case TIMESTAMPOID:
	case TIMESTAMPTZOID:
	case OIDOID:
	case CHAROID:
		return true;
	default:
		return false;
	}
}

/*
 * The relation that receives a counter's deltas when its trigger fires on `fired` (the source, a partition or a
 * Citus shard of it), the one place that decides it: the log (log mode) or the slots (sharded mode), else the table
 * users read (the counter table, or an existing table's counter-cache columns); on a Citus shard, that table's
 * co-located shard on this node.
 */
Oid
WriteRelation(const Counter *e, Oid fired, Oid source)
{
	Oid rel = HasPending(e->mode) ? e->log : e->target;
	return citus::WriteShard(e->name, rel, fired, source);
}

SPIPlanPtr
PrepareKept(Oid owner, const char *sql, int nargs, Oid *argtypes)
{
	/* (planning runs the definition's code: constant folding, the owner's functions) */
	RequireOwnerScope(owner);
	SPIPlanPtr plan = SPI_prepare(sql, nargs, argtypes);
	if (plan == nullptr)
		elog(ERROR, "counters: SPI_prepare failed for \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "counters: SPI_keepplan failed");
	return plan;
}

/*
 * The counter's columns in the relation it writes, as its layout has them (LayoutOf): a table created by
 * create_counter has the definition's columns in order, found by position, so that renaming them (an ORM migration,
 * say) keeps the counter working; an existing target's are the ones the definition's aliases name. A Citus shard of
 * its table, on this node, is found by position as its table is, with its own attribute numbers.
 */
void
ResolveColumns(CompiledCounter *c)
{
	CounterDef *def = c->def;
	const Counter *e = c->counter;
	const RelationColumns *columns = !e->owns_target ? &LayoutOf(e)->in_table : LayoutColumnsIn(e, c->write_rel);
	RelationColumns shard;
	if (columns == nullptr) {
		/* (and the keys its key index has by their digest: ON CONFLICT of the counter table, the slots) */
		shard = ColumnsIn(def, c->write_rel, e->mode != Mode::Log, e->mode == Mode::Sharded);
		columns = &shard;
	}
	c->key_columns = (const char **)palloc(sizeof(char *) * def->nkeys);
	c->value_columns = (const char **)palloc(sizeof(char *) * def->nvalues);
	if (columns->attnums != nullptr) {
		c->key_attnums = (AttrNumber *)palloc(sizeof(AttrNumber) * def->nkeys);
		c->value_attnums = (AttrNumber *)palloc(sizeof(AttrNumber) * def->nvalues);
	}
	for (int col = 0; col < def->ncolumns; col++) {
		ColumnDef *cd = &def->columns[col];
		const char **names = cd->is_key ? c->key_columns : c->value_columns;
		AttrNumber *attnums = cd->is_key ? c->key_attnums : c->value_attnums;
		names[cd->index] = columns->names[col];
		if (attnums != nullptr)
			attnums[cd->index] = columns->attnums[col];
	}
	c->slot_attnum = columns->slot;
	c->key_digested = columns->digested;
}

} // namespace

SPIPlanPtr
FetchPlan(CompiledCounter *c, Plan plan, int nargs, Oid *argtypes)
{
	if (c->plans[plan] != nullptr)
		return c->plans[plan];
	RequireOwnerScope(c->auth.role());
	const char *sql;
	switch (plan) {
	case PLAN_WINDOW_SUMS:
		sql = WindowSumsStatement(c, true);
		break;
	case PLAN_WINDOW_STATE:
		sql = WindowStateStatement(c->counter->crossings);
		break;
	case PLAN_PARENT_ROWS:
		sql = ParentRowsStatement(c->def);
		break;
	case PLAN_CHILD_ROWS:
		sql = ChildRowsStatement(c->def);
		break;
	case PLAN_KEY_RECOUNT:
		sql = KeyRecountStatement(c->def, c->counter->query, c->counter->target);
		break;
	default:
		elog(ERROR, "counters: plan %d of counter \"%s\" is prepared when it is compiled", (int)plan, c->def->name);
	}
	/* (a generic plan: re-planned per statement, it would cost more than it runs; an index probe per key) */
	SPIPlanPtr prepared = SPI_prepare_cursor(sql, nargs, argtypes, CURSOR_OPT_GENERIC_PLAN);
	if (prepared == nullptr || SPI_keepplan(prepared) != 0)
		elog(ERROR, "counters: preparing a statement of counter \"%s\" failed: %s", c->def->name,
		     SPI_result_code_string(SPI_result));
	c->plans[plan] = prepared;
	return prepared;
}

/*
 * The key index of a counter's table, as the compiled counter keeps it: found once (see write.hpp), checked to still
 * be there at each use.
 */
Oid
KeyIndexOf(CompiledCounter *c, Relation rel)
{
	if (c->key_of_column == nullptr) {
		c->key_of_column =
		    (int *)MemoryContextAlloc(GetMemoryChunkContext(c->key_attnums), sizeof(int) * c->def->nkeys);
		c->key_index = FindKeyIndexOf(rel, c->def->nkeys, c->key_attnums,
		                              c->counter->mode == Mode::Sharded ? c->slot_attnum : InvalidAttrNumber,
		                              c->key_of_column, nullptr);
	}
	List *indexes = OidIsValid(c->key_index) ? RelationGetIndexList(rel) : NIL;
	bool exists = list_member_oid(indexes, c->key_index);
	list_free(indexes);
	return exists ? c->key_index : InvalidOid;
}

namespace {

/*
 * Whether a scan of `index` in order meets keys in the order SortDeltas sorts them: a btree whose columns are the
 * keys in definition order, as stored (no digest), ascending, NULLS LAST, each ordered by its type's default
 * comparison in the key's collation.
 */
bool
IndexSortedAsDeltas(Relation index, const CompiledCounter *c)
{
	const CounterDef *def = c->def;
	if (index->rd_rel->relam != BTREE_AM_OID || index->rd_index->indnkeyatts != def->nkeys)
		return false;
	for (int j = 0; j < def->nkeys; j++) {
		if (c->key_of_column[j] != j || (c->key_digested != nullptr && c->key_digested[j]) ||
		    index->rd_indoption[j] != 0 || index->rd_indcollation[j] != def->keys[j].collation ||
		    TupleDescAttr(RelationGetDescr(index), j)->atttypid != def->keys[j].type ||
		    index_getprocid(index, j + 1, BTORDER_PROC) != c->key_cmp[j].fn_oid)
			return false;
	}
	return true;
}

} // namespace

void
KeyIndexProcs(CompiledCounter *c, Relation index)
{
	Oid indexoid = RelationGetRelid(index);
	if (c->key_eq_procs != nullptr && c->key_eq_index == indexoid)
		return;
	RegProcedure *procs =
	    (RegProcedure *)MemoryContextAlloc(GetMemoryChunkContext(c->key_attnums), sizeof(RegProcedure) * c->def->nkeys);
	for (int j = 0; j < c->def->nkeys; j++) {
		procs[j] = IndexColumnOperator(index, j, BTEqualStrategyNumber);
		if (!OidIsValid(procs[j]))
			elog(ERROR, "counters: no equality operator in operator family %u", index->rd_opfamily[j]);
	}
	c->key_eq_procs = procs;
	c->key_eq_index = indexoid;
	c->key_index_sorted = IndexSortedAsDeltas(index, c);
}

namespace {

/* Prepare the statements that apply deltas to counter `c` (those its mode has). */
void
PreparePlans(CompiledCounter *c)
{
	for (int p = 0; p < NUM_APPLY_PLANS; p++) {
		PlanStatement st = ApplyStatement(c, (Plan)p);
		if (st.sql != nullptr)
			c->plans[p] = PrepareKept(c->auth.role(), st.sql, st.nargs, st.argtypes);
	}
}

void
CompileKeys(CompiledCounter *c)
{
	CounterDef *def = c->def;
	int n = def->nkeys;
	c->key_cmp = (FmgrInfo *)palloc0(sizeof(FmgrInfo) * n);
	c->key_hash = (FmgrInfo *)palloc0(sizeof(FmgrInfo) * n);
	c->key_eq = (FmgrInfo *)palloc0(sizeof(FmgrInfo) * n);
	c->key_fast = (bool *)palloc0(sizeof(bool) * n);
	c->key_typlen = (int16 *)palloc0(sizeof(int16) * n);
	c->key_byval = (bool *)palloc0(sizeof(bool) * n);
	c->key_typalign = (char *)palloc0(sizeof(char) * n);
	for (int i = 0; i < n; i++) {
		TypeCacheEntry *tc = lookup_type_cache(def->keys[i].type, TYPECACHE_CMP_PROC_FINFO | TYPECACHE_HASH_PROC_FINFO |
		                                                              TYPECACHE_EQ_OPR_FINFO);
		fmgr_info_copy(&c->key_cmp[i], &tc->cmp_proc_finfo, CurrentMemoryContext);
		fmgr_info_copy(&c->key_hash[i], &tc->hash_proc_finfo, CurrentMemoryContext);
		fmgr_info_copy(&c->key_eq[i], &tc->eq_opr_finfo, CurrentMemoryContext);
		c->key_fast[i] = IsFastKeyType(def->keys[i].type);
		get_typlenbyvalalign(def->keys[i].type, &c->key_typlen[i], &c->key_byval[i], &c->key_typalign[i]);
	}
}

/* An expression of a counter through a parent row reads the parent's columns (varno 2) from the inner slot. */
Expr *
ForRun(const CounterDef *def, Expr *expr)
{
	if (expr == nullptr || !OidIsValid(def->parent))
		return expr;
	Expr *copy = (Expr *)copyObject(expr);
	ChangeVarNodes((Node *)copy, 2, INNER_VAR, 0);
	return copy;
}

/*
 * The definition's expressions as a statement evaluates them, and (through a parent row) the parent's columns they
 * read: the same for every statement, found once.
 */
void
CompileExpressions(CompiledCounter *c)
{
	const CounterDef *def = c->def;
	c->quals = (List *)ForRun(def, (Expr *)def->quals);
	c->key_exprs = (Expr **)palloc(sizeof(Expr *) * def->nkeys);
	for (int k = 0; k < def->nkeys; k++)
		c->key_exprs[k] = ForRun(def, def->keys[k].expr);
	c->arg_exprs = (Expr **)palloc0(sizeof(Expr *) * def->nvalues);
	c->filters = (List **)palloc0(sizeof(List *) * def->nvalues);
	for (int v = 0; v < def->nvalues; v++) {
		c->arg_exprs[v] = ForRun(def, def->values[v].arg);
		if (def->values[v].filter != nullptr)
			c->filters[v] = make_ands_implicit(ForRun(def, def->values[v].filter));
	}
	if (!OidIsValid(def->parent))
		return;
	c->parent_attrs = bms_make_singleton(def->parent_key - FirstLowInvalidHeapAttributeNumber);
	for (int k = 0; k < def->nkeys; k++)
		pull_varattnos((Node *)def->keys[k].expr, 2, &c->parent_attrs);
	for (int v = 0; v < def->nvalues; v++) {
		pull_varattnos((Node *)def->values[v].arg, 2, &c->parent_attrs);
		pull_varattnos((Node *)def->values[v].filter, 2, &c->parent_attrs);
	}
	pull_varattnos((Node *)def->quals, 2, &c->parent_attrs);
}

/* The bounds set with counters.set_bounds, by value column. */
void
ReadBounds(CompiledCounter *c, const CounterOptions *o)
{
	if (o->nbounds == 0)
		return;
	CounterDef *def = c->def;
	c->has_min = (bool *)palloc0(sizeof(bool) * def->nvalues);
	c->has_max = (bool *)palloc0(sizeof(bool) * def->nvalues);
	c->min = (Datum *)palloc0(sizeof(Datum) * def->nvalues);
	c->max = (Datum *)palloc0(sizeof(Datum) * def->nvalues);
	for (int i = 0; i < o->nbounds; i++)
		for (int v = 0; v < def->nvalues; v++) {
			if (strcmp(def->values[v].column_name, o->bounds[i].column) != 0)
				continue;
			c->has_min[v] = o->bounds[i].has_min;
			c->min[v] = o->bounds[i].min;
			c->has_max[v] = o->bounds[i].has_max;
			c->max[v] = o->bounds[i].max;
		}
}

/*
 * The thresholds set with counters.set_thresholds: per value column, its thresholds in ascending order, the step of
 * its repeating thresholds and the callback.
 */
void
ReadThresholds(CompiledCounter *c, const CounterOptions *o)
{
	CounterDef *def = c->def;
	c->has_thresholds = true;
	c->nthresholds = (int *)palloc0(sizeof(int) * def->nvalues);
	c->thresholds = (Datum **)palloc0(sizeof(Datum *) * def->nvalues);
	c->every = (Datum *)palloc0(sizeof(Datum) * def->nvalues);
	c->callbacks = (Oid *)palloc0(sizeof(Oid) * def->nvalues);
	c->callback_missing = (bool *)palloc0(sizeof(bool) * def->nvalues);
	for (int i = 0; i < o->nthresholds; i++) {
		const ColumnThresholds *t = &o->thresholds[i];
		/* A callback that no longer exists is reported when a crossing would call it (see AnnounceCrossings). */
		Oid callback = ResolveCallback(t->callback);
		for (int v = 0; v < def->nvalues; v++) {
			if (strcmp(def->values[v].column_name, t->column) != 0)
				continue;
			/* (ascending, as the crossings are found; insertion: a column has a handful) */
			c->nthresholds[v] = t->nvalues;
			c->thresholds[v] = (Datum *)palloc(sizeof(Datum) * Max(t->nvalues, 1));
			for (int j = 0; j < t->nvalues; j++) {
				int at = j;
				for (; at > 0 &&
				       DatumGetInt32(DirectFunctionCall2(numeric_cmp, c->thresholds[v][at - 1], t->values[j])) > 0;
				     at--)
					c->thresholds[v][at] = c->thresholds[v][at - 1];
				c->thresholds[v][at] = t->values[j];
			}
			c->every[v] = t->every;
			c->callbacks[v] = callback;
			c->callback_missing[v] = t->callback != nullptr && !OidIsValid(callback);
		}
	}
}

/*
 * The window thresholds set with counters.set_window_thresholds, of an exact counter with a table of its own: the
 * window's bucket key, and per window column its thresholds as the statements take them and its callback. (The window
 * itself is read from the counter's options where it is checked: windows.cpp.)
 */
void
ReadWindowThresholds(CompiledCounter *c)
{
	const Counter *e = c->counter;
	const WindowOptions *w = e->options->window;
	c->window_bucket = -1;
	if (w == nullptr || w->bucket == nullptr || !e->owns_target || e->mode != Mode::Exact)
		return;
	for (int k = 0; k < c->def->nkeys; k++)
		if (strcmp(c->def->keys[k].column_name, w->bucket) == 0)
			c->window_bucket = k;
	if (c->window_bucket < 0 || w->ncolumns == 0)
		return;
	c->window_thresholds = (Datum *)palloc(sizeof(Datum) * w->ncolumns);
	c->window_callbacks = (Oid *)palloc(sizeof(Oid) * w->ncolumns);
	c->window_callback_missing = (bool *)palloc(sizeof(bool) * w->ncolumns);
	for (int i = 0; i < w->ncolumns; i++) {
		const ColumnThresholds *t = &w->columns[i];
		c->window_thresholds[i] =
		    PointerGetDatum(construct_array(t->values, t->nvalues, NUMERICOID, -1, false, TYPALIGN_INT));
		c->window_callbacks[i] = ResolveCallback(t->callback);
		c->window_callback_missing[i] = t->callback != nullptr && !OidIsValid(c->window_callbacks[i]);
	}
}

/* The counters kept in counter-cache columns of existing table `target`, in name order. */
List *
CountersKeptIn(Oid target)
{
	List *counters = ReadCatalogOfRelation(target);
	ListCell *lc;
	foreach (lc, counters) {
		const Counter *e = (const Counter *)lfirst(lc);
		if (e->owns_target || e->target != target)
			counters = foreach_delete_current(counters, lc);
	}
	return counters;
}

/* Build the entry's counters; on error the half-built context (child of the caller's) goes away with it. */
void
BuildEntry(SourceCounters *entry, Kind kind)
{
	const Oid source = kind == Kind::Source ? SourceOf(entry->relid) : entry->relid;

	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "counters source cache", ALLOCSET_SMALL_SIZES);
	MemoryContext oldcxt = CurrentMemoryContext;

	/* (the catalog rows, their options included, live as long as the compiled counters) */
	MemoryContextSwitchTo(cxt);
	List *entries = kind == Kind::Target ? CountersKeptIn(entry->relid) : ReadCountersOf(source, kind == Kind::Parent);
	int n = list_length(entries);
	SpiConnect();
	MemoryContextSwitchTo(cxt);
	CompiledCounter *compiled = (CompiledCounter *)palloc0(sizeof(CompiledCounter) * (n > 0 ? n : 1));
	entry->nfollowed = 0;
	/* Plans are kept under CacheMemoryContext by SPI_keepplan: release them if anything below fails. */
	volatile int nbuilt = 0;
	PG_TRY();
	{
		for (int i = 0; i < n; i++) {
			MemoryContextSwitchTo(cxt);
			const Counter *e = (const Counter *)list_nth(entries, i);
			const CounterOptions *o = e->options;
			const char *name = e->name;
			/* (a Citus worker resolves the names of counters.counter_replica: they must all be here) */
			if (!OidIsValid(e->target) || !OidIsValid(e->query))
				ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
				                errmsg("counter \"%s\": its %s is missing on this node", name,
				                       !OidIsValid(e->target) ? "table" : "definition view"),
				                errdetail("Or its row in counters.counter_replica names relations that no declaration "
				                          "could have: the definition view must be named after the counter, and its "
				                          "owner must have the privileges of the owners of the source and the table."),
				                errhint("The source's owner may delete the row; see docs/citus.md.")));
			CompiledCounter *c = &compiled[i];
			c->counter = e;
			c->followed = FollowedSubscription(e, &c->followed_table);
			if (c->followed != nullptr)
				entry->nfollowed++;
			c->write_rel = WriteRelation(e, entry->relid, source);
			c->totals = HasPending(e->mode) ? e->totals : InvalidOid;
			/* (a cross-shard key's log rows, written on a shard: under that shard's anchor) */
			const char *anchor = e->mode == Mode::Log && LayoutOf(e)->anchored && c->write_rel != e->log
			                         ? citus::ShardAnchor(name, c->write_rel)
			                         : nullptr;
			Oid anchor_type = InvalidOid;
			int32 anchor_typmod = -1;
			if (anchor != nullptr) {
				Oid collation;
				c->anchor_attnum = get_attnum(c->write_rel, ANCHOR_COLUMN);
				get_atttypetypmodcoll(c->write_rel, c->anchor_attnum, &anchor_type, &anchor_typmod, &collation);
				c->anchor = psprintf("%s::%s", quote_literal_cstr(anchor),
				                     format_type_with_typemod(anchor_type, anchor_typmod));
			}
			/* (its own code, as the catalog row says, runs for whoever writes its source) */
			c->auth = AuthorizedByCatalog(e);
			c->def = DefinitionOf(e);
			/* (its join oriented by the catalog's source: its parent's key must still be unique to count once) */
			RequireUniqueParentKey(name, c->def);
			/* (options are validated when set; a row written by hand stops this counter only) */
			RequireValidOptions(e);
			c->max_slots = o->max_slots;
			c->retention_key = -1;
			if (o->retention_column != nullptr && o->retention_keep != nullptr) {
				for (int k = 0; k < c->def->nkeys; k++)
					if (strcmp(c->def->keys[k].column_name, o->retention_column) == 0 &&
					    IsTimeBucketType(c->def->keys[k].type)) {
						c->retention_key = k;
						c->retention_keep = DirectFunctionCall3(interval_in, CStringGetDatum(o->retention_keep),
						                                        ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
					}
			}
			c->touch_column = !e->owns_target ? o->touch : nullptr;
			c->keep_zero = o->keep_zero;
			c->deferrable = !citus::IsCitusRelation(e->source);
			Relation trel = table_open(c->write_rel, AccessShareLock);
			c->has_check = RelationGetDescr(trel)->constr != nullptr && RelationGetDescr(trel)->constr->num_check > 0;
			c->has_rls = trel->rd_rel->relrowsecurity;
			table_close(trel, AccessShareLock);
			CompileKeys(c);
			CompileExtremes(c);
			CompileExpressions(c);
			ResolveColumns(c);
			ReadBounds(c, o);
			if (o->nthresholds > 0)
				ReadThresholds(c, o);
			ReadWindowThresholds(c);
			/* Statements are analysed with the owner's privileges, as they will run (e.g. USAGE on its schema). */
			OwnerScope as;
			EnterOwner(&as, c->auth, PIN_SEARCH_PATH);
			PreparePlans(c);
			/* (the anchor's type is a built-in one: citus::CheckDeclaration) */
			if (anchor != nullptr) {
				Oid input, ioparam;
				getTypeInputInfo(anchor_type, &input, &ioparam);
				/* (in the entry's context, not SPI's: the datum lives as long as the compiled counter) */
				MemoryContext spi = MemoryContextSwitchTo(cxt);
				c->anchor_value = OidInputFunctionCall(input, (char *)anchor, ioparam, anchor_typmod);
				MemoryContextSwitchTo(spi);
			}
			LeaveOwner(&as);
			/* SPI calls leave CurrentMemoryContext at SPI's procedure context: come back to ours. */
			MemoryContextSwitchTo(cxt);
			nbuilt = i + 1;
		}
	}
	PG_CATCH();
	{
		FreePlans(compiled, Min(nbuilt + 1, n));
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	SPI_finish();

	MemoryContextSetParent(cxt, CacheMemoryContext);
	entry->source = source;
	entry->cxt = cxt;
	entry->ncounters = n;
	entry->counters = compiled;
	entry->valid = true;
}

} // namespace

/*
 * A renamed schema changes the qualified names the prepared statements were built from, a table subscribed or no longer
 * whether counters follow their publisher: rebuild everything.
 */
void
RebuildAllCallback(Datum arg, int cacheid, uint32 hashvalue)
{
	InvalidateCallback(arg, InvalidOid);
}

void
InitCache()
{
	CacheRegisterRelcacheCallback(InvalidateCallback, (Datum)0);
	CacheRegisterSyscacheCallback(NAMESPACEOID, RebuildAllCallback, (Datum)0);
	/* (a table subscribed or no longer: whether counters follow their publisher) */
	CacheRegisterSyscacheCallback(SUBSCRIPTIONRELMAP, RebuildAllCallback, (Datum)0);
	RegisterXactCallback(FreeRetired, nullptr);
}

namespace {

SourceCounters *
GetEntry(HTAB **cache, Oid relid, Kind kind)
{
	if (*cache == nullptr) {
		HASHCTL ctl;
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(SourceCounters);
		ctl.hcxt = CacheMemoryContext;
		*cache = hash_create(kind == Kind::Source   ? "counters source cache"
		                     : kind == Kind::Parent ? "counters parent cache"
		                                            : "counters target cache",
		                     64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	bool found;
	SourceCounters *entry = (SourceCounters *)hash_search(*cache, &relid, HASH_ENTER, &found);
	if (!found) {
		entry->relid = relid;
		entry->source = InvalidOid;
		entry->valid = false;
		entry->cxt = nullptr;
		entry->ncounters = 0;
		entry->counters = nullptr;
	}
	if (!entry->valid) {
		RetireEntry(entry);
		uint64 before = invalidation_count;
		BuildEntry(entry, kind);
		if (invalidation_count != before)
			entry->valid = false;
	}
	return entry;
}

} // namespace

SourceCounters *
GetSourceCounters(Oid relid)
{
	return GetEntry(&source_cache, relid, Kind::Source);
}

SourceCounters *
GetParentCounters(Oid relid)
{
	return GetEntry(&parent_cache, relid, Kind::Parent);
}

SourceCounters *
GetTargetCounters(Oid relid)
{
	return GetEntry(&target_cache, relid, Kind::Target);
}

CompiledCounter *
CompiledOf(const Counter *e)
{
	SourceCounters *sc = GetSourceCounters(e->source);
	for (int i = 0; i < sc->ncounters; i++)
		if (strcmp(sc->counters[i].def->name, e->name) == 0)
			return &sc->counters[i];
	elog(ERROR, "counters: counter \"%s\" is not compiled for its source", e->name);
	pg_unreachable();
}

} // namespace counters
