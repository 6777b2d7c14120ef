/*
 * redefine.cpp: a counter declared again keeps its table, as the user left it.
 *
 * A new definition (alter_counter(definition => ...)) and a retyped counted column declare a counter again. A counter
 * with a table of its own keeps that table: its name, the names its owner gave its columns, its indexes, comments,
 * storage settings, triggers, policies, grants and publications stay, because the table does. The table is emptied,
 * reshaped by ALTER TABLE (columns the new definition drops are dropped, new ones added after the others, columns of
 * a new type retyped), and filled again. Its columns follow the definition's by position (ColumnsByPosition), so a
 * new definition keeps the order of the columns it keeps, matched by their names in the definitions, and lists new
 * ones last; and a change that would take something of the user's with it (a column their index, view or constraint
 * uses) is refused, naming it, before anything changes. The counter's own key index is built again when the keys
 * change.
 */
#include "control/control.hpp"

extern "C" {
#include "access/genam.h"
#include "access/relation.h"
#include "catalog/pg_class.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_am.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}

namespace counters {

KeptTable *
KeepTable(const Counter *e)
{
	const CounterLayout *l = LayoutOf(e);
	KeptTable *k = (KeptTable *)palloc0(sizeof(KeptTable));
	k->table = l->table;
	k->ncolumns = l->ncolumns;
	k->def_names = (const char **)palloc(sizeof(char *) * l->ncolumns);
	k->is_key = (bool *)palloc(sizeof(bool) * l->ncolumns);
	k->attnums = (AttrNumber *)palloc(sizeof(AttrNumber) * l->ncolumns);
	for (int i = 0; i < l->ncolumns; i++) {
		k->def_names[i] = pstrdup(l->def_names[i]);
		k->is_key[i] = l->is_key[i];
		k->attnums[i] = l->in_table.attnums[i];
	}
	/* (a derived kind's column by its name: a generated one; a column its owner renamed is theirs) */
	const CounterDef *def = DefinitionOf(e);
	k->nderived = def->nderived;
	DerivedDef *derived = (DerivedDef *)palloc(sizeof(DerivedDef) * Max(def->nderived, 1));
	for (int d = 0; d < def->nderived; d++) {
		derived[d] = def->derived[d];
		derived[d].column_name = pstrdup(def->derived[d].column_name);
	}
	k->derived = derived;
	k->derived_attnums = (AttrNumber *)palloc0(sizeof(AttrNumber) * Max(def->nderived, 1));
	for (int d = 0; d < def->nderived; d++) {
		HeapTuple tup = SearchSysCacheAttName(k->table, def->derived[d].column_name);
		if (HeapTupleIsValid(tup)) {
			Form_pg_attribute att = (Form_pg_attribute)GETSTRUCT(tup);
			if (att->attgenerated != '\0')
				k->derived_attnums[d] = att->attnum;
			ReleaseSysCache(tup);
		}
	}
	k->value_names = (const char **)palloc(sizeof(char *) * Max(def->nvalues, 1));
	for (int i = 0; i < l->ncolumns; i++)
		if (!l->is_key[i])
			k->value_names[def->columns[i].index] = k->def_names[i];
	return k;
}

namespace {

/* What a new definition does to a kept table: each new column's kept column (or -1: added), each kept one's fate. */
struct Reshape {
	int *kept_of;     /* per new column: the kept column it reuses, or -1 */
	bool *dropped;    /* per kept column */
	bool *retyped;    /* per kept column: its type changes */
	bool keys_change; /* the key columns, their types or nullability: the key index is built again */
};

/* The type a column of the counter table has for definition column `i`, as CREATE TABLE would write it. */
const char *
TypeOfColumn(const CounterDef *def, int i)
{
	const ColumnDef *cd = &def->columns[i];
	if (cd->is_key)
		return KeyColumnType(&def->keys[cd->index]);
	return StoredTypeName(&def->values[cd->index]);
}

bool
SameType(Oid table, AttrNumber attnum, const CounterDef *def, int i)
{
	Oid type;
	int32 typmod;
	Oid collation;
	get_atttypetypmodcoll(table, attnum, &type, &typmod, &collation);
	const ColumnDef *cd = &def->columns[i];
	if (!cd->is_key) {
		/* (an extreme compares in its collation) */
		const ValueDef *vd = &def->values[cd->index];
		return type == ColumnType(def, i) &&
		       (vd->accum != AccumKind::Extreme || !OidIsValid(vd->collation) || collation == vd->collation);
	}
	const KeyDef *key = &def->keys[cd->index];
	return type == key->type && typmod == key->typmod &&
	       collation == (OidIsValid(key->collation) ? key->collation : get_typcollation(key->type));
}

Reshape
PlanReshape(const char *name, const KeptTable *kept, const CounterDef *def)
{
	Reshape r = {(int *)palloc(sizeof(int) * def->ncolumns), (bool *)palloc0(sizeof(bool) * kept->ncolumns),
	             (bool *)palloc0(sizeof(bool) * kept->ncolumns), false};
	for (int i = 0; i < kept->ncolumns; i++)
		r.dropped[i] = true;
	int last = -1;
	bool added = false;
	StringInfoData order;
	initStringInfo(&order);
	for (int j = 0; j < def->ncolumns; j++) {
		r.kept_of[j] = -1;
		for (int i = 0; i < kept->ncolumns && r.kept_of[j] < 0; i++)
			if (kept->is_key[i] == def->columns[j].is_key && strcmp(kept->def_names[i], ColumnName(def, j)) == 0)
				r.kept_of[j] = i;
		int i = r.kept_of[j];
		if (i < 0) {
			added = true;
			continue;
		}
		/* (the table's order: a kept column after an added one, or before one it followed, cannot be) */
		if (i < last || added)
			appendStringInfo(&order, "%s%s", order.len ? ", " : "", quote_identifier(ColumnName(def, j)));
		last = Max(last, i);
		r.dropped[i] = false;
		r.retyped[i] =
		    !SameType(kept->table, kept->attnums[i], def, j) ||
		    (!def->columns[j].is_key && AttributeNotNull(kept->table, kept->attnums[i]) !=
		                                    (def->values[def->columns[j].index].accum != AccumKind::Extreme));
	}
	if (order.len > 0) {
		StringInfoData columns;
		initStringInfo(&columns);
		for (int i = 0; i < kept->ncolumns; i++)
			appendStringInfo(&columns, "%s%s", i ? ", " : "", quote_identifier(kept->def_names[i]));
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": the new definition moves column %s of table %s", name, order.data,
		                       QualifiedName(kept->table)),
		                errdetail("A counter declared again keeps its table and the order of its columns (%s); new "
		                          "columns come after them.",
		                          columns.data),
		                errhint("List the columns the definition keeps in that order, new ones last; or drop the "
		                        "counter and declare it again.")));
	}
	/* the keys: the same columns, in the same order, of the same types and nullability (else built again) */
	int nold = 0, nnew = 0;
	int *old_keys = (int *)palloc(sizeof(int) * kept->ncolumns);
	for (int i = 0; i < kept->ncolumns; i++)
		if (kept->is_key[i])
			old_keys[nold++] = i;
	for (int j = 0; j < def->ncolumns; j++) {
		if (!def->columns[j].is_key)
			continue;
		int i = r.kept_of[j];
		r.keys_change |= nnew >= nold || i != old_keys[nnew] || r.retyped[i] ||
		                 AttributeNotNull(kept->table, kept->attnums[i]) != def->keys[def->columns[j].index].not_null;
		nnew++;
	}
	r.keys_change |= nnew != nold;
	return r;
}

/* The counter's own indexes of its table: its key index, and the hash indexes of digested keys (built again). */
List *
OwnIndexes(const KeptTable *kept)
{
	int nkeys = 0;
	AttrNumber *attnums = (AttrNumber *)palloc(sizeof(AttrNumber) * kept->ncolumns);
	for (int i = 0; i < kept->ncolumns; i++)
		if (kept->is_key[i])
			attnums[nkeys++] = kept->attnums[i];
	Relation rel = table_open(kept->table, AccessShareLock);
	int *key_of_column = (int *)palloc(sizeof(int) * Max(nkeys, 1));
	Oid key_index = FindKeyIndexOf(rel, nkeys, attnums, InvalidAttrNumber, key_of_column, nullptr);
	List *own = OidIsValid(key_index) ? list_make1_oid(key_index) : NIL;
	ListCell *lc;
	foreach (lc, RelationGetIndexList(rel)) {
		Relation index = index_open(lfirst_oid(lc), AccessShareLock);
		bool lookup = index->rd_rel->relam == HASH_AM_OID && index->rd_index->indnatts == 1 &&
		              heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, nullptr);
		for (int k = 0; lookup && k < nkeys; k++)
			if (index->rd_index->indkey.values[0] == attnums[k]) {
				Oid type;
				int32 typmod;
				Oid collation;
				get_atttypetypmodcoll(kept->table, attnums[k], &type, &typmod, &collation);
				if (DigestedKeyType(type, typmod, collation))
					own = lappend_oid(own, lfirst_oid(lc));
			}
		index_close(index, AccessShareLock);
	}
	table_close(rel, AccessShareLock);
	return own;
}

/*
 * What would go with column `attnum` of `table` (all that uses it; for a retype, only views and rules, which block
 * it: indexes and constraints follow a column's new type), but the counter's own indexes `own`, the column's
 * default and its NOT NULL (a constraint of its own from PostgreSQL 18 on): a list for a message, or NULL.
 */
char *
UsersOfColumn(Oid table, AttrNumber attnum, bool retype, List *own)
{
	MemoryContext caller = CurrentMemoryContext;
	SpiConnect();
	Oid argtypes[3] = {OIDOID, INT2OID, BOOLOID};
	Datum args[3] = {ObjectIdGetDatum(table), Int16GetDatum(attnum), BoolGetDatum(retype)};
	(void)QueryLatest("SELECT pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid), d.classid, d.objid "
	                  "  FROM pg_catalog.pg_depend d "
	                  " WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
	                  "   AND d.refobjid OPERATOR(pg_catalog.=) $1 AND d.refobjsubid OPERATOR(pg_catalog.=) $2 "
	                  "   AND d.deptype OPERATOR(pg_catalog.=) ANY ('{n,a}') "
	                  "   AND d.classid OPERATOR(pg_catalog.<>) 'pg_catalog.pg_attrdef'::pg_catalog.regclass "
	                  "   AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint c "
	                  "                    WHERE d.classid OPERATOR(pg_catalog.=) "
	                  "                          'pg_catalog.pg_constraint'::pg_catalog.regclass "
	                  "                      AND c.oid OPERATOR(pg_catalog.=) d.objid "
	                  "                      AND c.contype OPERATOR(pg_catalog.=) 'n') "
	                  "   AND (NOT $3 OR d.classid OPERATOR(pg_catalog.=) "
	                  "        'pg_catalog.pg_rewrite'::pg_catalog.regclass) "
	                  " ORDER BY 1",
	                  3, argtypes, args, nullptr);
	StringInfoData users;
	initStringInfo(&users);
	for (uint64 r = 0; r < SPI_processed; r++) {
		bool isnull;
		Oid classid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2, &isnull));
		Oid objid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 3, &isnull));
		if (classid == RelationRelationId && list_member_oid(own, objid))
			continue;
		appendStringInfo(&users, "%s%s", users.len ? ", " : "",
		                 SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1));
	}
	char *result = users.len > 0 ? MemoryContextStrdup(caller, users.data) : nullptr;
	SPI_finish();
	return result;
}

/* DROP INDEX, or the constraint the index makes: the query string built is ALTER TABLE t DROP CONSTRAINT c */
char *
DropIndexStatement(Oid table, Oid index)
{
	Oid constraint = get_index_constraint(index);
	if (OidIsValid(constraint))
		return psprintf("ALTER TABLE %s DROP CONSTRAINT %s", QualifiedName(table),
		                quote_identifier(get_constraint_name(constraint)));
	return DropStatement("INDEX", index);
}

/* The kept column that was value column `v` of the kept definition, or -1. */
int
KeptValueColumn(const KeptTable *kept, int v)
{
	for (int i = 0; i < kept->ncolumns; i++)
		if (!kept->is_key[i] && strcmp(kept->def_names[i], kept->value_names[v]) == 0)
			return i;
	return -1;
}

/*
 * The generated columns of derived kinds a reshape drops, as ALTER TABLE's DROP COLUMN list (NULL: none), and in
 * add[d] whether the new definition's derived column d is added. A column stays when the new definition names a
 * column of the same kind so, read from accumulators of the same names that neither go nor change type.
 */
char *
DerivedColumnsGoing(const KeptTable *kept, const CounterDef *def, const Reshape *r, bool *add)
{
	bool *stays = (bool *)palloc0(sizeof(bool) * Max(kept->nderived, 1));
	for (int d = 0; d < def->nderived; d++) {
		const DerivedDef *nd = &def->derived[d];
		add[d] = true;
		for (int o = 0; o < kept->nderived && add[d]; o++) {
			const DerivedDef *od = &kept->derived[o];
			bool same = kept->derived_attnums[o] != 0 && strcmp(od->column_name, nd->column_name) == 0 &&
			            strcmp(od->kind->read, nd->kind->read) == 0;
			for (int a = 0; a < 2 && same; a++) {
				int i = KeptValueColumn(kept, od->accumulators[a]);
				same =
				    i >= 0 && !r->dropped[i] && !r->retyped[i] &&
				    strcmp(kept->value_names[od->accumulators[a]], def->values[nd->accumulators[a]].column_name) == 0;
			}
			if (same)
				add[d] = !(stays[o] = true);
		}
	}
	StringInfoData drop;
	initStringInfo(&drop);
	for (int o = 0; o < kept->nderived; o++)
		if (kept->derived_attnums[o] != 0 && !stays[o])
			appendStringInfo(&drop, "%sDROP COLUMN %s", drop.len ? ", " : "",
			                 quote_identifier(get_attname(kept->table, kept->derived_attnums[o], false)));
	return drop.len > 0 ? drop.data : nullptr;
}

} // namespace

bool
ReshapeTable(const char *name, const KeptTable *kept, const CounterDef *def)
{
	Reshape r = PlanReshape(name, kept, def);
	/* Nothing of the user's goes with a column: checked for every column before anything changes. */
	List *own = r.keys_change ? OwnIndexes(kept) : NIL;
	for (int i = 0; i < kept->ncolumns; i++) {
		if (!r.dropped[i] && !r.retyped[i])
			continue;
		char *users = UsersOfColumn(kept->table, kept->attnums[i], !r.dropped[i], own);
		if (users != nullptr)
			ereport(ERROR,
			        (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			         errmsg("counter \"%s\": the new definition %s column \"%s\" of table %s, which %s uses", name,
			                r.dropped[i] ? "drops" : "changes the type of",
			                get_attname(kept->table, kept->attnums[i], false), QualifiedName(kept->table), users),
			         errdetail("A counter declared again keeps its table as its owner left it."),
			         errhint("Drop what uses the column first (and create it again after), or keep the column in "
			                 "the definition.")));
	}
	const char *table = QualifiedName(kept->table);
	ListCell *lc;
	foreach (lc, own)
		Execute(DropIndexStatement(kept->table, lfirst_oid(lc)), SPI_OK_UTILITY);
	/* (emptied first: the columns change on no rows, and the fill starts from nothing) */
	Execute(psprintf("TRUNCATE %s", table), SPI_OK_UTILITY);
	/* derived kinds' columns that do not stay go first (their accumulators may go or change type) */
	bool *add_derived = (bool *)palloc(sizeof(bool) * Max(def->nderived, 1));
	char *drop_derived = DerivedColumnsGoing(kept, def, &r, add_derived);
	if (drop_derived != nullptr)
		Execute(psprintf("ALTER TABLE %s %s", table, drop_derived), SPI_OK_UTILITY);
	StringInfoData alter;
	initStringInfo(&alter);
	bool first = true;
	for (int i = 0; i < kept->ncolumns; i++)
		if (r.dropped[i]) {
			Sep(&alter, &first);
			appendStringInfo(&alter, "DROP COLUMN %s",
			                 quote_identifier(get_attname(kept->table, kept->attnums[i], false)));
		}
	for (int j = 0; j < def->ncolumns; j++) {
		int i = r.kept_of[j];
		const char *type = TypeOfColumn(def, j);
		if (i < 0) {
			Sep(&alter, &first);
			appendStringInfo(&alter, "ADD COLUMN %s %s%s", quote_identifier(ColumnName(def, j)), type,
			                 def->columns[j].is_key ? "" : ValueConstraints(&def->values[def->columns[j].index]));
			continue;
		}
		const char *column = quote_identifier(get_attname(kept->table, kept->attnums[i], false));
		/* (an empty table converts nothing: its new type from NULL) */
		if (r.retyped[i]) {
			Sep(&alter, &first);
			appendStringInfo(&alter, "ALTER COLUMN %s TYPE %s USING NULL::%s", column, type, type);
			/* (a count or a sum is never NULL, an extreme of no row is) */
			if (!def->columns[j].is_key)
				appendStringInfo(&alter,
				                 def->values[def->columns[j].index].accum == AccumKind::Extreme
				                     ? ", ALTER COLUMN %s DROP DEFAULT, ALTER COLUMN %s DROP NOT NULL"
				                     : ", ALTER COLUMN %s SET DEFAULT 0, ALTER COLUMN %s SET NOT NULL",
				                 column, column);
		}
		if (r.keys_change && def->columns[j].is_key) {
			Sep(&alter, &first);
			appendStringInfo(&alter, "ALTER COLUMN %s %s NOT NULL", column,
			                 def->keys[def->columns[j].index].not_null ? "SET" : "DROP");
		}
	}
	if (alter.len > 0)
		Execute(psprintf("ALTER TABLE %s %s", table, alter.data), SPI_OK_UTILITY);
	/* new ones last, over their accumulators' columns as the table names them */
	for (int d = 0; d < def->nderived; d++) {
		if (!add_derived[d])
			continue;
		const char *acc[2];
		for (int a = 0; a < 2; a++) {
			int j = ValueColumnIndex(def, def->derived[d].accumulators[a]);
			acc[a] =
			    r.kept_of[j] < 0 ? ColumnName(def, j) : get_attname(kept->table, kept->attnums[r.kept_of[j]], false);
		}
		Execute(psprintf("ALTER TABLE %s ADD COLUMN %s", table, DerivedColumnDefinition(&def->derived[d], acc)),
		        SPI_OK_UTILITY);
	}
	return r.keys_change;
}

char *
UserMadeProperties(const Counter *e)
{
	KeptTable *kept = KeepTable(e);
	List *own = OwnIndexes(kept);
	MemoryContext caller = CurrentMemoryContext;
	StringInfoData found;
	initStringInfo(&found);
	/* (the counter's relations: the table of counts, and in log and sharded mode the view users read) */
	Oid rels[2] = {kept->table, e->target};
	for (int r = 0; r < (kept->table == e->target ? 1 : 2); r++) {
		Relation rel = relation_open(rels[r], AccessShareLock);
		ListCell *lc;
		foreach (lc, rel->rd_rel->relkind == RELKIND_RELATION ? RelationGetIndexList(rel) : NIL)
			if (!list_member_oid(own, lfirst_oid(lc)))
				appendStringInfo(&found, "%sindex %s", found.len ? ", " : "", QualifiedName(lfirst_oid(lc)));
		relation_close(rel, AccessShareLock);
		SpiConnect();
		Oid argtypes[2] = {OIDOID, TEXTOID};
		Datum args[2] = {ObjectIdGetDatum(rels[r]), CStringGetTextDatum(guard_trigger)};
		/* (triggers but the counters', policies, rules and views over it, publications naming it, renamed columns) */
		(void)QueryLatest(
		    "SELECT 'trigger ' OPERATOR(pg_catalog.||) t.tgname FROM pg_catalog.pg_trigger t "
		    " WHERE t.tgrelid OPERATOR(pg_catalog.=) $1 AND NOT t.tgisinternal AND t.tgname OPERATOR(pg_catalog.<>) $2 "
		    "UNION ALL SELECT 'policy ' OPERATOR(pg_catalog.||) p.polname FROM pg_catalog.pg_policy p "
		    " WHERE p.polrelid OPERATOR(pg_catalog.=) $1 "
		    "UNION ALL SELECT DISTINCT 'view ' OPERATOR(pg_catalog.||) "
		    "w.ev_class::pg_catalog.regclass::pg_catalog.text "
		    "  FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_rewrite w ON w.oid OPERATOR(pg_catalog.=) d.objid "
		    " WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass "
		    "   AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
		    "   AND d.refobjid OPERATOR(pg_catalog.=) $1 AND w.ev_class OPERATOR(pg_catalog.<>) $1 "
		    "   AND w.ev_class OPERATOR(pg_catalog.<>) ALL (SELECT c.target FROM counters.counter c) "
		    "UNION ALL SELECT 'publication ' OPERATOR(pg_catalog.||) p.pubname FROM pg_catalog.pg_publication_rel r "
		    "  JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) r.prpubid "
		    " WHERE r.prrelid OPERATOR(pg_catalog.=) $1 "
		    "ORDER BY 1",
		    2, argtypes, args, nullptr);
		for (uint64 i = 0; i < SPI_processed; i++)
			appendStringInfo(&found, "%s%s", found.len ? ", " : "",
			                 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		SPI_finish();
	}
	for (int i = 0; i < kept->ncolumns; i++) {
		const char *column = get_attname(kept->table, kept->attnums[i], false);
		if (strcmp(column, kept->def_names[i]) != 0)
			appendStringInfo(&found, "%scolumn %s (renamed from %s)", found.len ? ", " : "", quote_identifier(column),
			                 quote_identifier(kept->def_names[i]));
	}
	return found.len > 0 ? MemoryContextStrdup(caller, found.data) : nullptr;
}

} // namespace counters
