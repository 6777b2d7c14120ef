/*
 * cache.cpp: per-backend cache of compiled counters, keyed by the relation whose trigger fires.
 *
 * The catalog (counters.counter) and the definition views hold the truth; this cache holds what the trigger needs
 * to run fast: planned key/value expressions, comparison and hash support for the keys, and prepared statements
 * that apply deltas. An entry is dropped when PostgreSQL invalidates the relcache entry of the source, of the
 * counter table, of the definition view, or of the catalog (counters.create_counter/drop_counter send one for the
 * source), so renames, ALTERs and new counters are picked up by the next statement.
 */
#include "counters.hpp"

extern "C" {
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "utils/syscache.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "rewrite/rewriteHandler.h"
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

HTAB *source_cache = nullptr;
/* Bumped by every relcache invalidation: an entry built while one arrived is rebuilt at its next use. */
uint64 invalidation_count = 0;

/* Oids that, when invalidated, invalidate an entry: the source, targets and definition views. */
bool
EntryDependsOn(SourceCounters *entry, Oid relid)
{
	if (entry->relid == relid || entry->source == relid)
		return true;
	for (int i = 0; i < entry->ncounters; i++)
		if (entry->counters[i].target == relid || entry->counters[i].query == relid ||
		    entry->counters[i].write_rel == relid || entry->counters[i].totals == relid)
			return true;
	return false;
}

void
InvalidateCallback(Datum arg, Oid relid)
{
	invalidation_count++;
	if (source_cache == nullptr)
		return;
	HASH_SEQ_STATUS status;
	hash_seq_init(&status, source_cache);
	SourceCounters *entry;
	while ((entry = (SourceCounters *)hash_seq_search(&status)) != nullptr) {
		if (relid == InvalidOid || EntryDependsOn(entry, relid))
			entry->valid = false;
	}
}

void
FreePlans(CompiledCounter *counters, int n)
{
	for (int i = 0; i < n; i++) {
		CompiledCounter *c = &counters[i];
		if (c->apply_plan)
			SPI_freeplan(c->apply_plan);
		if (c->delete_plan)
			SPI_freeplan(c->delete_plan);
		if (c->truncate_plan)
			SPI_freeplan(c->truncate_plan);
		if (c->bulk_plan)
			SPI_freeplan(c->bulk_plan);
		if (c->bulk_delete_plan)
			SPI_freeplan(c->bulk_delete_plan);
		if (c->update_plan)
			SPI_freeplan(c->update_plan);
		c->apply_plan = c->delete_plan = c->truncate_plan = c->bulk_plan = c->bulk_delete_plan = c->update_plan =
		    nullptr;
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

const char *
OperatorSchema(Oid opno)
{
	HeapTuple tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	Oid nsp = ((Form_pg_operator)GETSTRUCT(tup))->oprnamespace;
	ReleaseSysCache(tup);
	return quote_identifier(get_namespace_name(nsp));
}

SPIPlanPtr
PrepareKept(const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr plan = SPI_prepare(sql, nargs, argtypes);
	if (plan == nullptr)
		elog(ERROR, "counters: SPI_prepare failed for \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "counters: SPI_keepplan failed");
	return plan;
}

/*
 * The select list of a bulk write: unnest($1), unnest($2), ... in the target list, which reads the arrays in step
 * and keeps a composite element one column (unnest() in FROM would expand it into its fields).
 */
void
AppendUnnests(StringInfo sql, int nparams)
{
	for (int i = 0; i < nparams; i++)
		appendStringInfo(sql, "%spg_catalog.unnest($%d)", i ? ", " : "", i + 1);
}

void
AppendColumnList(StringInfo sql, CompiledCounter *c, bool keys, bool values)
{
	bool first = true;
	for (int i = 0; keys && i < c->def->nkeys; i++, first = false)
		appendStringInfo(sql, "%s%s", first ? "" : ", ", quote_identifier(c->key_columns[i]));
	for (int i = 0; values && i < c->def->nvalues; i++, first = false)
		appendStringInfo(sql, "%s%s", first ? "" : ", ", quote_identifier(c->value_columns[i]));
}

/* RETURNING the row's ctid, whether every value is now zero, the new values and the keys (for bounds). */
void
AppendReturning(StringInfo sql, CompiledCounter *c)
{
	CounterDef *def = c->def;
	appendStringInfoString(sql, " RETURNING c.ctid, ");
	for (int i = 0; i < def->nvalues; i++)
		appendStringInfo(sql, "%sc.%s OPERATOR(pg_catalog.=) 0", i ? " AND " : "",
		                 quote_identifier(c->value_columns[i]));
	for (int i = 0; i < def->nvalues; i++)
		appendStringInfo(sql, ", c.%s", quote_identifier(c->value_columns[i]));
	for (int i = 0; i < def->nkeys; i++)
		appendStringInfo(sql, ", c.%s", quote_identifier(c->key_columns[i]));
}

/* ON CONFLICT (keys) DO UPDATE adding the deltas, RETURNING as above. */
void
AppendUpsertTail(StringInfo sql, CompiledCounter *c)
{
	CounterDef *def = c->def;
	appendStringInfoString(sql, " ON CONFLICT (");
	AppendColumnList(sql, c, true, false);
	appendStringInfoString(sql, ") DO UPDATE SET ");
	for (int i = 0; i < def->nvalues; i++) {
		const char *col = quote_identifier(c->value_columns[i]);
		appendStringInfo(sql, "%s%s = c.%s OPERATOR(pg_catalog.+) EXCLUDED.%s", i ? ", " : "", col, col, col);
	}
	AppendReturning(sql, c);
}

/*
 * The counter's columns in its table. A table created by create_counter has the definition's columns in order, so
 * they are found by position: renaming them (an ORM migration, say) keeps the counter working. Columns of an existing
 * target are the ones the definition's aliases name.
 */
void
ResolveColumns(CompiledCounter *c)
{
	CounterDef *def = c->def;
	c->key_columns = (const char **)palloc(sizeof(char *) * def->nkeys);
	c->value_columns = (const char **)palloc(sizeof(char *) * def->nvalues);
	for (int i = 0; i < def->nkeys; i++)
		c->key_columns[i] = def->keys[i].column_name;
	for (int i = 0; i < def->nvalues; i++)
		c->value_columns[i] = def->values[i].column_name;
	if (!c->owns_target)
		return;
	c->key_attnums = (AttrNumber *)palloc(sizeof(AttrNumber) * def->nkeys);
	c->value_attnums = (AttrNumber *)palloc(sizeof(AttrNumber) * def->nvalues);
	Relation rel = table_open(c->write_rel, AccessShareLock);
	TupleDesc desc = RelationGetDescr(rel);
	int col = 0;
	for (int a = 0; a < desc->natts && col < def->ncolumns; a++) {
		Form_pg_attribute att = TupleDescAttr(desc, a);
		if (att->attisdropped)
			continue;
		ColumnDef *cd = &def->columns[col++];
		char *name = pstrdup(NameStr(att->attname));
		/* The trigger writes datums of the definition's types: a retyped column must not be written blindly. */
		Oid expected = cd->is_key ? def->keys[cd->index].type
		                          : (def->values[cd->index].accum == AccumKind::Int64 ? INT8OID : NUMERICOID);
		if (getBaseType(att->atttypid) != getBaseType(expected))
			ereport(ERROR,
			        (errcode(ERRCODE_DATATYPE_MISMATCH),
			         errmsg("counter \"%s\": column \"%s\" of counter table %s has type %s, the counter writes %s",
			                def->name, name, get_rel_name(c->write_rel), format_type_be(att->atttypid),
			                format_type_be(expected)),
			         errhint("Change the column back, or drop and declare the counter again.")));
		if (cd->is_key) {
			c->key_columns[cd->index] = name;
			c->key_attnums[cd->index] = att->attnum;
		} else {
			c->value_columns[cd->index] = name;
			c->value_attnums[cd->index] = att->attnum;
		}
	}
	if (col < def->ncolumns)
		ereport(ERROR, (errcode(ERRCODE_INVALID_TABLE_DEFINITION),
		                errmsg("counter \"%s\": counter table %s has fewer columns than the definition", def->name,
		                       get_rel_name(c->write_rel)),
		                errhint("Drop and declare the counter again.")));
	/* sharded mode: the slot number is the integer column after the definition's */
	AttrNumber last = Max(c->key_attnums[def->nkeys - 1], c->value_attnums[def->nvalues - 1]);
	for (int a = 0; c->sharded && a < desc->natts && c->slot_attnum == InvalidAttrNumber; a++) {
		Form_pg_attribute att = TupleDescAttr(desc, a);
		if (!att->attisdropped && att->attnum > last && att->atttypid == INT4OID)
			c->slot_attnum = att->attnum;
	}
	table_close(rel, AccessShareLock);
}

/*
 * TRUNCATE of a log or sharded counter's source empties the log (or slots) and the totals. It first waits for a
 * compaction in progress (which holds the log's SHARE UPDATE EXCLUSIVE lock until it commits), so that the DELETEs,
 * each with a new snapshot, see the totals that compaction wrote; otherwise its folded sums would survive.
 */
void
AppendTruncatePlan(StringInfo sql, CompiledCounter *c, const char *log)
{
	resetStringInfo(sql);
	appendStringInfo(sql, "LOCK TABLE %s IN SHARE UPDATE EXCLUSIVE MODE; WITH l AS (DELETE FROM %s) DELETE FROM %s",
	                 log, log, QualifiedName(c->totals));
	c->truncate_plan = PrepareKept(sql->data, 0, nullptr);
}

/* The array types of the parameter types, or NULL if one has none. */
Oid *
ArrayTypes(Oid *types, int n)
{
	Oid *array_types = (Oid *)palloc(sizeof(Oid) * n);
	for (int i = 0; i < n; i++) {
		array_types[i] = get_array_type(types[i]);
		if (!OidIsValid(array_types[i]))
			return nullptr;
	}
	return array_types;
}

/* Build the statements that apply deltas to counter `c`. Column names are read from the target itself. */
void
PreparePlans(CompiledCounter *c)
{
	CounterDef *def = c->def;
	char *target = QualifiedName(c->write_rel);
	int nparams = def->nkeys + def->nvalues;
	Oid *argtypes = (Oid *)palloc(sizeof(Oid) * nparams);
	for (int i = 0; i < def->nkeys; i++)
		argtypes[i] = def->keys[i].type;
	for (int i = 0; i < def->nvalues; i++)
		argtypes[def->nkeys + i] = def->values[i].accum == AccumKind::Int64 ? INT8OID : NUMERICOID;

	StringInfoData sql;
	initStringInfo(&sql);
	if (c->append_only) {
		/* Log mode: append the statement's summed deltas; no counter row is locked, nothing can conflict. */
		appendStringInfo(&sql, "INSERT INTO %s (", target);
		AppendColumnList(&sql, c, true, true);
		appendStringInfoString(&sql, ") VALUES (");
		for (int i = 0; i < nparams; i++)
			appendStringInfo(&sql, "%s$%d", i ? ", " : "", i + 1);
		appendStringInfoString(&sql, ")");
		c->apply_plan = PrepareKept(sql.data, nparams, argtypes);

		Oid *array_types = ArrayTypes(argtypes, nparams);
		if (array_types != nullptr) {
			resetStringInfo(&sql);
			appendStringInfo(&sql, "INSERT INTO %s (", target);
			AppendColumnList(&sql, c, true, true);
			appendStringInfoString(&sql, ") SELECT ");
			AppendUnnests(&sql, nparams);
			c->bulk_plan = PrepareKept(sql.data, nparams, array_types);
		}

		AppendTruncatePlan(&sql, c, target);
	} else if (c->sharded) {
		/*
		 * Sharded mode: existing slot rows are updated directly (direct.cpp); this upsert creates a slot row, the
		 * slot number coming as the last parameter, or adds to an existing one, waiting for its lock, when every
		 * slot of the key is taken. Zero rows are deleted as in exact mode.
		 */
		Oid *slot_argtypes = (Oid *)palloc(sizeof(Oid) * (nparams + 1));
		memcpy(slot_argtypes, argtypes, sizeof(Oid) * nparams);
		slot_argtypes[nparams] = INT4OID;
		const char *slot_col = quote_identifier(get_attname(c->write_rel, c->slot_attnum, false));
		appendStringInfo(&sql, "INSERT INTO %s AS c (", target);
		AppendColumnList(&sql, c, true, true);
		appendStringInfo(&sql, ", %s) VALUES (", slot_col);
		for (int i = 0; i <= nparams; i++)
			appendStringInfo(&sql, "%s$%d", i ? ", " : "", i + 1);
		appendStringInfoString(&sql, ")");
		StringInfoData tail;
		initStringInfo(&tail);
		AppendUpsertTail(&tail, c);
		/* ON CONFLICT (keys) -> ON CONFLICT (keys, slot) */
		const char *paren = strchr(tail.data, ')');
		appendBinaryStringInfo(&sql, tail.data, paren - tail.data);
		appendStringInfo(&sql, ", %s%s", slot_col, paren);
		c->apply_plan = PrepareKept(sql.data, nparams + 1, slot_argtypes);

		resetStringInfo(&sql);
		appendStringInfo(&sql, "DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) $1", target);
		Oid tid_type = TIDOID;
		c->delete_plan = PrepareKept(sql.data, 1, &tid_type);

		AppendTruncatePlan(&sql, c, target);
	} else if (c->owns_target) {
		/*
		 * INSERT ... ON CONFLICT DO UPDATE adds the delta to an existing row or creates it; RETURNING tells whether
		 * every value came back to zero, in which case the row is deleted by ctid (we hold its lock).
		 */
		appendStringInfo(&sql, "INSERT INTO %s AS c (", target);
		AppendColumnList(&sql, c, true, true);
		appendStringInfoString(&sql, ") VALUES (");
		for (int i = 0; i < nparams; i++)
			appendStringInfo(&sql, "%s$%d", i ? ", " : "", i + 1);
		appendStringInfoString(&sql, ")");
		AppendUpsertTail(&sql, c);
		c->apply_plan = PrepareKept(sql.data, nparams, argtypes);

		/*
		 * Many keys at once: the same upsert fed by unnest() of one array per column. The arrays are read in step,
		 * in order, so rows are still locked in sorted key order.
		 */
		Oid *array_types = ArrayTypes(argtypes, nparams);
		if (array_types != nullptr) {
			resetStringInfo(&sql);
			appendStringInfo(&sql, "INSERT INTO %s AS c (", target);
			AppendColumnList(&sql, c, true, true);
			appendStringInfoString(&sql, ") SELECT ");
			AppendUnnests(&sql, nparams);
			AppendUpsertTail(&sql, c);
			c->bulk_plan = PrepareKept(sql.data, nparams, array_types);

			resetStringInfo(&sql);
			appendStringInfo(&sql, "DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) ANY ($1)", target);
			Oid tid_array_type = TIDARRAYOID;
			c->bulk_delete_plan = PrepareKept(sql.data, 1, &tid_array_type);
		}

		resetStringInfo(&sql);
		appendStringInfo(&sql, "DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) $1", target);
		Oid tid_type = TIDOID;
		c->delete_plan = PrepareKept(sql.data, 1, &tid_type);

		resetStringInfo(&sql);
		appendStringInfo(&sql, "DELETE FROM %s", target);
		c->truncate_plan = PrepareKept(sql.data, 0, nullptr);

		/*
		 * A CHECK constraint on the counter table holds for the row the upsert proposes (the delta alone) before
		 * it finds the existing row: a decrement would fail it. An existing row is updated first, then.
		 */
		if (c->has_check) {
			resetStringInfo(&sql);
			appendStringInfo(&sql, "UPDATE %s AS c SET ", target);
			for (int i = 0; i < def->nvalues; i++) {
				const char *col = quote_identifier(c->value_columns[i]);
				appendStringInfo(&sql, "%s%s = c.%s OPERATOR(pg_catalog.+) $%d", i ? ", " : "", col, col,
				                 def->nkeys + i + 1);
			}
			appendStringInfoString(&sql, " WHERE ");
			for (int i = 0; i < def->nkeys; i++)
				appendStringInfo(&sql, "%sc.%s IS NOT DISTINCT FROM $%d", i ? " AND " : "",
				                 quote_identifier(c->key_columns[i]), i + 1);
			AppendReturning(&sql, c);
			c->update_plan = PrepareKept(sql.data, nparams, argtypes);
		}
	} else {
		/* Counter-cache columns of an existing table: rows that do not exist are not created (documented). */
		Relation rel = table_open(c->target, AccessShareLock);
		TupleDesc desc = RelationGetDescr(rel);
		appendStringInfo(&sql, "UPDATE %s AS t SET ", target);
		for (int i = 0; i < def->nvalues; i++) {
			const char *col = quote_identifier(c->value_columns[i]);
			appendStringInfo(&sql, "%s%s = COALESCE(t.%s, 0) OPERATOR(pg_catalog.+) $%d", i ? ", " : "", col, col,
			                 def->nkeys + i + 1);
		}
		appendStringInfoString(&sql, " WHERE ");
		for (int i = 0; i < def->nkeys; i++) {
			const char *col = quote_identifier(c->key_columns[i]);
			AttrNumber attno = InvalidAttrNumber;
			for (int a = 0; a < desc->natts; a++)
				if (!TupleDescAttr(desc, a)->attisdropped &&
				    strcmp(NameStr(TupleDescAttr(desc, a)->attname), c->key_columns[i]) == 0)
					attno = a + 1;
			if (attno == InvalidAttrNumber)
				ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
				                errmsg("counter \"%s\": target table %s has no column %s", def->name, target, col)));
			/*
			 * The key is compared as it is, never cast to the column's type: a cast to a narrower type (varchar(3),
			 * integer) would fold different keys into one row. Declarations require the column to have the key's
			 * type; a counter declared before that rule compares across types as PostgreSQL's own operators do.
			 */
			Form_pg_attribute att = TupleDescAttr(desc, attno - 1);
			if (getBaseType(att->atttypid) == getBaseType(def->keys[i].type)) {
				TypeCacheEntry *tc = lookup_type_cache(getBaseType(att->atttypid), TYPECACHE_EQ_OPR);
				if (!OidIsValid(tc->eq_opr))
					ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
					                errmsg("counter \"%s\": key column %s of %s has no equality operator", def->name,
					                       col, target)));
				appendStringInfo(&sql, "%st.%s OPERATOR(%s.=) $%d", i ? " AND " : "", col, OperatorSchema(tc->eq_opr),
				                 i + 1);
			} else
				appendStringInfo(&sql, "%st.%s OPERATOR(pg_catalog.=) $%d", i ? " AND " : "", col, i + 1);
		}
		table_close(rel, AccessShareLock);
		appendStringInfoString(&sql, " RETURNING ");
		for (int i = 0; i < def->nvalues; i++)
			appendStringInfo(&sql, "%st.%s", i ? ", " : "", quote_identifier(c->value_columns[i]));
		c->apply_plan = PrepareKept(sql.data, nparams, argtypes);

		resetStringInfo(&sql);
		appendStringInfo(&sql, "UPDATE %s SET ", target);
		for (int i = 0; i < def->nvalues; i++)
			appendStringInfo(&sql, "%s%s = 0", i ? ", " : "", quote_identifier(c->value_columns[i]));
		appendStringInfoString(&sql, " WHERE ");
		for (int i = 0; i < def->nvalues; i++)
			appendStringInfo(&sql, "%s%s IS DISTINCT FROM 0", i ? " OR " : "", quote_identifier(c->value_columns[i]));
		c->truncate_plan = PrepareKept(sql.data, 0, nullptr);
	}
	pfree(sql.data);
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

/* The bounds set with counters.set_bounds, from arrays of column names, minimums and maximums (NULL = none). */
void
ReadBounds(CompiledCounter *c, Datum columns, Datum mins, Datum maxs)
{
	if (columns == (Datum)0)
		return;
	CounterDef *def = c->def;
	Datum *names, *lo, *hi;
	bool *names_null, *lo_null, *hi_null;
	int n, nlo, nhi;
	deconstruct_array(DatumGetArrayTypeP(columns), TEXTOID, -1, false, TYPALIGN_INT, &names, &names_null, &n);
	deconstruct_array(DatumGetArrayTypeP(mins), NUMERICOID, -1, false, TYPALIGN_INT, &lo, &lo_null, &nlo);
	deconstruct_array(DatumGetArrayTypeP(maxs), NUMERICOID, -1, false, TYPALIGN_INT, &hi, &hi_null, &nhi);
	c->has_min = (bool *)palloc0(sizeof(bool) * def->nvalues);
	c->has_max = (bool *)palloc0(sizeof(bool) * def->nvalues);
	c->min = (Datum *)palloc0(sizeof(Datum) * def->nvalues);
	c->max = (Datum *)palloc0(sizeof(Datum) * def->nvalues);
	for (int i = 0; i < n; i++) {
		char *name = TextDatumGetCString(names[i]);
		for (int v = 0; v < def->nvalues; v++) {
			if (strcmp(def->values[v].column_name, name) != 0)
				continue;
			if (!lo_null[i]) {
				c->has_min[v] = true;
				c->min[v] = datumCopy(lo[i], false, -1);
			}
			if (!hi_null[i]) {
				c->has_max[v] = true;
				c->max[v] = datumCopy(hi[i], false, -1);
			}
		}
	}
}

/*
 * The thresholds set with counters.set_thresholds: per value column, its thresholds in ascending order and the
 * callback.
 */
void
ReadThresholds(CompiledCounter *c)
{
	CounterDef *def = c->def;
	MemoryContext cxt = CurrentMemoryContext;
	c->has_thresholds = true;
	c->nthresholds = (int *)palloc0(sizeof(int) * def->nvalues);
	c->thresholds = (Datum **)palloc0(sizeof(Datum *) * def->nvalues);
	c->callbacks = (Oid *)palloc0(sizeof(Oid) * def->nvalues);
	c->callback_missing = (bool *)palloc0(sizeof(bool) * def->nvalues);
	Oid argtypes[1] = {TEXTOID};
	Datum args[1] = {CStringGetTextDatum(def->name)};
	(void)QueryLatest(
	    "SELECT e.key, e.value OPERATOR(pg_catalog.->>) 'callback', "
	    "pg_catalog.to_regprocedure(e.value OPERATOR(pg_catalog.->>) 'callback')::pg_catalog.oid, "
	    "pg_catalog.array_agg(t::pg_catalog.numeric ORDER BY t::pg_catalog.numeric) "
	    "FROM counters.counter c, pg_catalog.jsonb_each(c.options OPERATOR(pg_catalog.->) 'thresholds') e, "
	    "pg_catalog.jsonb_array_elements_text(e.value OPERATOR(pg_catalog.->) 'values') t "
	    "WHERE c.name OPERATOR(pg_catalog.=) $1 GROUP BY 1, 2, 3",
	    1, argtypes, args, nullptr);
	MemoryContextSwitchTo(cxt);
	for (uint64 r = 0; r < SPI_processed; r++) {
		HeapTuple tup = SPI_tuptable->vals[r];
		TupleDesc desc = SPI_tuptable->tupdesc;
		bool isnull, callback_null, oid_null;
		char *column = TextDatumGetCString(SPI_getbinval(tup, desc, 1, &isnull));
		Datum callback_text = SPI_getbinval(tup, desc, 2, &callback_null);
		Datum callback = SPI_getbinval(tup, desc, 3, &oid_null);
		/* A callback that no longer exists is reported when a crossing would call it (see AnnounceCrossings). */
		(void)callback_text;
		Datum *values;
		bool *nulls;
		int nvalues;
		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(tup, desc, 4, &isnull)), NUMERICOID, -1, false, TYPALIGN_INT,
		                  &values, &nulls, &nvalues);
		for (int v = 0; v < def->nvalues; v++) {
			if (strcmp(def->values[v].column_name, column) != 0)
				continue;
			c->nthresholds[v] = nvalues;
			c->thresholds[v] = (Datum *)palloc(sizeof(Datum) * nvalues);
			for (int t = 0; t < nvalues; t++)
				c->thresholds[v][t] = datumCopy(values[t], false, -1);
			c->callbacks[v] = oid_null ? InvalidOid : DatumGetObjectId(callback);
			c->callback_missing[v] = !callback_null && oid_null;
		}
	}
	SPI_freetuptable(SPI_tuptable);
}

/* Build the entry's counters; on error the half-built context (child of the caller's) goes away with it. */
void
BuildEntry(SourceCounters *entry)
{
	const Oid source = SourceOf(entry->relid);

	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "counters source cache", ALLOCSET_SMALL_SIZES);
	MemoryContext oldcxt = CurrentMemoryContext;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "counters: SPI_connect failed");
	Oid argtypes[1] = {OIDOID};
	Datum args[1] = {ObjectIdGetDatum(source)};
	/*
	 * The latest snapshot, not the writer's: a REPEATABLE READ writer whose snapshot predates a declaration, a mode
	 * switch or new bounds must still apply them (its lock on the source was granted after they committed), and
	 * sees counters declared earlier in its own transaction.
	 */
	(void)QueryLatest("SELECT c.name, c.target::pg_catalog.oid, c.query::pg_catalog.oid, c.owns_target, "
	                  "c.log::pg_catalog.oid, c.totals::pg_catalog.oid, "
	                  "b.columns, b.mins, b.maxs, c.options OPERATOR(pg_catalog.?) 'thresholds', c.mode, "
	                  "COALESCE((c.options OPERATOR(pg_catalog.->>) 'max_slots')::pg_catalog.int4, 16), "
	                  "c.options OPERATOR(pg_catalog.->) 'retention' OPERATOR(pg_catalog.->>) 'column', "
	                  "(c.options OPERATOR(pg_catalog.->) 'retention' OPERATOR(pg_catalog.->>) "
	                  "'keep')::pg_catalog.interval "
	                  "FROM counters.counter c, LATERAL ("
	                  "SELECT pg_catalog.array_agg(e.key) AS columns, "
	                  "pg_catalog.array_agg((e.value OPERATOR(pg_catalog.->>) 'min')::pg_catalog.numeric)"
	                  " AS mins, "
	                  "pg_catalog.array_agg((e.value OPERATOR(pg_catalog.->>) 'max')::pg_catalog.numeric)"
	                  " AS maxs "
	                  "FROM pg_catalog.jsonb_each(c.options OPERATOR(pg_catalog.->) 'bounds') e) b "
	                  "WHERE c.source OPERATOR(pg_catalog.=) $1 "
	                  "ORDER BY c.name COLLATE \"C\"",
	                  1, argtypes, args, nullptr);

	int n = (int)SPI_processed;
	SPITupleTable *catalog = SPI_tuptable;
	MemoryContextSwitchTo(cxt);
	CompiledCounter *compiled = (CompiledCounter *)palloc0(sizeof(CompiledCounter) * (n > 0 ? n : 1));
	/* Plans are kept under CacheMemoryContext by SPI_keepplan: release them if anything below fails. */
	volatile int nbuilt = 0;
	PG_TRY();
	{
		for (int i = 0; i < n; i++) {
			MemoryContextSwitchTo(cxt);
			HeapTuple tup = catalog->vals[i];
			TupleDesc tupdesc = catalog->tupdesc;
			bool isnull;
			char *name = TextDatumGetCString(SPI_getbinval(tup, tupdesc, 1, &isnull));
			Oid target = DatumGetObjectId(SPI_getbinval(tup, tupdesc, 2, &isnull));
			Oid query_oid = DatumGetObjectId(SPI_getbinval(tup, tupdesc, 3, &isnull));
			bool owns = DatumGetBool(SPI_getbinval(tup, tupdesc, 4, &isnull));
			Datum log = SPI_getbinval(tup, tupdesc, 5, &isnull);
			bool log_mode = !isnull;
			bool totals_null;
			Datum totals = SPI_getbinval(tup, tupdesc, 6, &totals_null);

			Relation view = relation_open(query_oid, AccessShareLock);
			if (view->rd_rel->relkind != RELKIND_VIEW)
				ereport(ERROR,
				        (errcode(ERRCODE_WRONG_OBJECT_TYPE), errmsg("counter \"%s\": definition \"%s\" is not a view",
				                                                    name, RelationGetRelationName(view))));
			Query *query = (Query *)copyObject(get_view_query(view));
			CompiledCounter *c = &compiled[i];
			c->def = AnalyzeDefinition(name, query, RelationGetDescr(view));
			relation_close(view, AccessShareLock);
			c->target = target;
			c->query = query_oid;
			c->owns_target = owns;
			c->sharded = strcmp(TextDatumGetCString(SPI_getbinval(tup, tupdesc, 11, &isnull)), "sharded") == 0;
			c->max_slots = DatumGetInt32(SPI_getbinval(tup, tupdesc, 12, &isnull));
			c->retention_key = -1;
			Datum retention_column = SPI_getbinval(tup, tupdesc, 13, &isnull);
			if (!isnull) {
				char *column = TextDatumGetCString(retention_column);
				Datum keep = SPI_getbinval(tup, tupdesc, 14, &isnull);
				for (int k = 0; k < c->def->nkeys && !isnull; k++)
					if (strcmp(c->def->keys[k].column_name, column) == 0) {
						c->retention_key = k;
						c->retention_keep = datumCopy(keep, false, sizeof(Interval));
					}
			}
			c->append_only = log_mode && !c->sharded;
			c->write_rel = log_mode ? DatumGetObjectId(log) : target;
			c->totals = log_mode && !totals_null ? DatumGetObjectId(totals) : InvalidOid;
			Relation trel = table_open(c->write_rel, AccessShareLock);
			c->owner = trel->rd_rel->relowner;
			c->has_check = RelationGetDescr(trel)->constr != nullptr && RelationGetDescr(trel)->constr->num_check > 0;
			c->has_rls = trel->rd_rel->relrowsecurity;
			table_close(trel, AccessShareLock);
			CompileKeys(c);
			ResolveColumns(c);
			ReadBounds(c, SPI_getbinval(tup, tupdesc, 7, &isnull), SPI_getbinval(tup, tupdesc, 8, &isnull),
			           SPI_getbinval(tup, tupdesc, 9, &isnull));
			if (DatumGetBool(SPI_getbinval(tup, tupdesc, 10, &isnull)))
				ReadThresholds(c);
			/* Statements are analysed with the owner's privileges, as they will run (e.g. USAGE on its schema). */
			Oid saved_user;
			int saved_sec;
			GetUserIdAndSecContext(&saved_user, &saved_sec);
			SetUserIdAndSecContext(c->owner, saved_sec | SECURITY_LOCAL_USERID_CHANGE);
			PreparePlans(c);
			SetUserIdAndSecContext(saved_user, saved_sec);
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
	entry->fixed_output = false;
	for (int i = 0; i < n; i++)
		entry->fixed_output |= compiled[i].def->fixed_output;
	entry->cxt = cxt;
	entry->ncounters = n;
	entry->counters = compiled;
	entry->valid = true;
}

} // namespace

char *
QualifiedName(Oid relid)
{
	char *name = get_rel_name(relid);
	if (name == nullptr)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("relation with OID %u does not exist", relid)));
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), name);
}

Oid
SourceOf(Oid relid)
{
	return get_rel_relispartition(relid) ? llast_oid(get_partition_ancestors(relid)) : relid;
}

/* A renamed schema changes the qualified names the prepared statements were built from: rebuild everything. */
void
NamespaceCallback(Datum arg, int cacheid, uint32 hashvalue)
{
	InvalidateCallback(arg, InvalidOid);
}

void
InitCache()
{
	CacheRegisterRelcacheCallback(InvalidateCallback, (Datum)0);
	CacheRegisterSyscacheCallback(NAMESPACEOID, NamespaceCallback, (Datum)0);
	RegisterXactCallback(FreeRetired, nullptr);
}

SourceCounters *
GetSourceCounters(Oid relid)
{
	if (source_cache == nullptr) {
		HASHCTL ctl;
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(SourceCounters);
		ctl.hcxt = CacheMemoryContext;
		source_cache = hash_create("counters source cache", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	bool found;
	SourceCounters *entry = (SourceCounters *)hash_search(source_cache, &relid, HASH_ENTER, &found);
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
		BuildEntry(entry);
		if (invalidation_count != before)
			entry->valid = false;
	}
	return entry;
}

} // namespace counters
