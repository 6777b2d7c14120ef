/*
 * layout.cpp: a counter's layout -- where its values live and its columns in each of its relations, found by
 * position in the tables create_counter made (renames are followed), with the keys their key index has by digest.
 */
#include "model/model.hpp"

extern "C" {
#include "access/table.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "access/htup_details.h"
#include "catalog/pg_attribute.h"
#include "utils/memutils.h"
#include "utils/rel.h"
}

namespace counters {

bool
AttributeNotNull(Oid relid, AttrNumber attnum)
{
	HeapTuple tup = SearchSysCacheAttNum(relid, attnum);
	if (!HeapTupleIsValid(tup))
		return false;
	bool not_null = ((Form_pg_attribute)GETSTRUCT(tup))->attnotnull;
	ReleaseSysCache(tup);
	return not_null;
}

Oid
ColumnType(const CounterDef *def, int i)
{
	const ColumnDef *cd = &def->columns[i];
	if (cd->is_key)
		return def->keys[cd->index].type;
	return StoredType(&def->values[cd->index]);
}

void
ColumnsByPosition(const CounterDef *def, Oid rel, const char ***names, AttrNumber **attnums)
{
	int n = def->ncolumns;
	*names = (const char **)palloc0(sizeof(char *) * n);
	if (attnums != nullptr)
		*attnums = (AttrNumber *)palloc0(sizeof(AttrNumber) * n);
	Relation r = table_open(rel, AccessShareLock);
	TupleDesc desc = RelationGetDescr(r);
	int found = 0;
	for (int a = 0; a < desc->natts && found < n; a++) {
		Form_pg_attribute att = TupleDescAttr(desc, a);
		/* (a generated column is no counter column: derived kinds', or the user's) */
		if (att->attisdropped || att->attgenerated != '\0')
			continue;
		/* The trigger writes datums of the definition's types: a retyped column must not be written blindly. */
		Oid expected = ColumnType(def, found);
		if (getBaseType(att->atttypid) != getBaseType(expected))
			ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
			                errmsg("counter \"%s\": column \"%s\" of %s has type %s, the counter keeps %s there",
			                       def->name, NameStr(att->attname), QualifiedName(rel), format_type_be(att->atttypid),
			                       format_type_be(expected)),
			                errhint("Change the column back, or drop and declare the counter again.")));
		(*names)[found] = pstrdup(NameStr(att->attname));
		if (attnums != nullptr)
			(*attnums)[found] = att->attnum;
		found++;
	}
	table_close(r, AccessShareLock);
	if (found < n)
		ereport(ERROR, (errcode(ERRCODE_INVALID_TABLE_DEFINITION),
		                errmsg("counter \"%s\": counter table %s has fewer columns than the definition", def->name,
		                       QualifiedName(rel)),
		                errhint("Drop and declare the counter again.")));
}

RelationColumns
ColumnsIn(const CounterDef *def, Oid relid, bool keyed, bool slots)
{
	RelationColumns out = {nullptr, nullptr, nullptr, InvalidAttrNumber};
	ColumnsByPosition(def, relid, &out.names, &out.attnums);
	if (!keyed)
		return out;
	int nkeys = def->nkeys;
	AttrNumber *key_attnums = (AttrNumber *)palloc(sizeof(AttrNumber) * Max(nkeys, 1));
	AttrNumber last = InvalidAttrNumber;
	for (int i = 0; i < def->ncolumns; i++) {
		if (def->columns[i].is_key)
			key_attnums[def->columns[i].index] = out.attnums[i];
		last = Max(last, out.attnums[i]);
	}
	Relation rel = table_open(relid, AccessShareLock);
	TupleDesc desc = RelationGetDescr(rel);
	/* sharded mode's slots: the slot number is the integer column after the definition's */
	for (int a = 0; slots && a < desc->natts && out.slot == InvalidAttrNumber; a++) {
		Form_pg_attribute att = TupleDescAttr(desc, a);
		if (!att->attisdropped && att->attnum > last && att->atttypid == INT4OID)
			out.slot = att->attnum;
	}
	int *key_of_column = (int *)palloc(sizeof(int) * Max(nkeys, 1));
	bool *digested = (bool *)palloc0(sizeof(bool) * Max(nkeys, 1));
	bool any = false;
	if (OidIsValid(
	        FindKeyIndexOf(rel, nkeys, key_attnums, slots ? out.slot : InvalidAttrNumber, key_of_column, digested)))
		for (int k = 0; k < nkeys; k++)
			any |= digested[k];
	table_close(rel, AccessShareLock);
	out.digested = any ? digested : nullptr;
	return out;
}

Oid
ValuesTable(const Counter *e)
{
	return OidIsValid(e->totals) ? e->totals : e->target;
}

const CounterLayout *
LayoutOf(const Counter *e)
{
	if (e->layout != nullptr)
		return e->layout;
	/* (where the Counter lives, so that its layout lives as long; kept with it only once complete) */
	MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext((void *)e));
	const CounterDef *def = DefinitionOf(e);
	int n = def->ncolumns;
	CounterLayout *l = (CounterLayout *)palloc0(sizeof(CounterLayout));
	l->table = ValuesTable(e);
	l->ncolumns = n;
	l->is_key = (bool *)palloc(sizeof(bool) * Max(n, 1));
	l->def_names = (const char **)palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++) {
		l->is_key[i] = def->columns[i].is_key;
		l->def_names[i] = ColumnName(def, i);
	}
	if (e->owns_target) {
		/* (and the keys the values table's key index has by their digest: its ON CONFLICT targets, the log's, slots')
		 */
		l->in_table = ColumnsIn(def, l->table, true, false);
		l->in_read = e->target == l->table ? l->in_table : ColumnsIn(def, e->target, false, false);
		if (OidIsValid(e->log))
			l->in_pending = ColumnsIn(def, e->log, e->mode == Mode::Sharded, e->mode == Mode::Sharded);
		l->anchored = OidIsValid(e->totals) && get_attnum(l->table, ANCHOR_COLUMN) != InvalidAttrNumber;
		if (l->in_table.digested != nullptr) {
			l->digested = (bool *)palloc0(sizeof(bool) * n);
			for (int i = 0; i < n; i++)
				l->digested[i] = l->is_key[i] && l->in_table.digested[def->columns[i].index];
		}
	} else {
		/* An existing table's columns are named by the definition's aliases (renames of them are followed). */
		l->in_table = RelationColumns{l->def_names, nullptr, nullptr, InvalidAttrNumber};
		l->in_read = l->in_table;
	}
	l->retention_column = -1;
	const char *retention = e->options->retention_column;
	for (int i = 0; retention != nullptr && i < n; i++)
		if (l->is_key[i] && strcmp(l->def_names[i], retention) == 0) {
			l->retention_column = i;
			l->retention_type = def->keys[def->columns[i].index].type;
		}
	MemoryContextSwitchTo(old);
	e->layout = l;
	return l;
}

const RelationColumns *
LayoutColumnsIn(const Counter *e, Oid rel)
{
	if (!OidIsValid(rel) || (rel != e->target && rel != e->totals && rel != e->log))
		return nullptr;
	const CounterLayout *l = LayoutOf(e);
	if (rel == l->table)
		return &l->in_table;
	return rel == e->log ? &l->in_pending : &l->in_read;
}

} // namespace counters
