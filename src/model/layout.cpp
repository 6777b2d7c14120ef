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
#include "utils/rel.h"
}

namespace counters {

Oid
ColumnType(const CounterDef *def, int i)
{
	const ColumnDef *cd = &def->columns[i];
	if (cd->is_key)
		return def->keys[cd->index].type;
	return def->values[cd->index].accum == AccumKind::Int64 ? INT8OID : NUMERICOID;
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
		if (att->attisdropped)
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

} // namespace counters
