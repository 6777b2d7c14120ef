/*
 * declare_statements.cpp: the statements that declare, switch and drop counters -- their tables, views, key
 * indexes, fills, log and slot tables, triggers, grants and window state tables. *
 * Every name is quoted and schema-qualified, every operator written OPERATOR(pg_catalog.x) or generated for its
 * types; values travel as parameters; the statements run with search_path pinned as well.
 */
#include "control/control.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/table.h"
#include "access/reloptions.h"
#include "commands/defrem.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "catalog/pg_type.h"
#include "utils/typcache.h"
}

namespace counters {

char *
CreateViewStatement(const char *schema, const char *view, const char *definition)
{
	return psprintf("CREATE VIEW %s AS %s", quote_qualified_identifier(schema, view), definition);
}

char *
DerivedColumnDefinition(const DerivedDef *d, const char *const accumulators[2])
{
	return psprintf("%s %s GENERATED ALWAYS AS (%s) STORED", quote_identifier(d->column_name), d->kind->type,
	                psprintf(d->kind->read, quote_identifier(accumulators[0]), quote_identifier(accumulators[1])));
}

char *
CreateCounterTableStatement(const CounterDef *def, const char *schema, const char *table)
{
	StringInfoData sql;
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE %s (", quote_qualified_identifier(schema, table));
	int d = 0;
	for (int i = 0; i <= def->ncolumns; i++) {
		/* (the generated columns of derived kinds where the definition selects them) */
		for (; d < def->nderived && def->derived[d].position == i; d++) {
			const DerivedDef *dd = &def->derived[d];
			const char *acc[2] = {def->values[dd->accumulators[0]].column_name,
			                      def->values[dd->accumulators[1]].column_name};
			appendStringInfo(&sql, "%s%s", i || d ? ", " : "", DerivedColumnDefinition(dd, acc));
		}
		if (i == def->ncolumns)
			break;
		const ColumnDef *cd = &def->columns[i];
		if (cd->is_key)
			appendStringInfo(&sql, "%s%s %s", i || d ? ", " : "", quote_identifier(ColumnName(def, i)),
			                 KeyColumnType(&def->keys[cd->index]));
		else
			appendStringInfo(&sql, "%s%s %s%s", i || d ? ", " : "", quote_identifier(ColumnName(def, i)),
			                 StoredTypeName(&def->values[cd->index]), ValueConstraints(&def->values[cd->index]));
	}
	appendStringInfo(&sql, ") WITH (%s)", StorageParameters(Storage::Counts));
	return sql.data;
}

/*
 * The storage parameters of each kind of table a counter keeps (docs/operations.md, "Vacuum and bloat"):
 * - counter rows (an exact counter's table, a log or sharded counter's totals) and slots are only ever updated in
 *   place: half of each page stays free, so that a statement updating every row of a page still finds room for the
 *   new versions on the page. Every such update is HOT: no index entry is added, and the heap grows no further than
 *   the first pass of updates would take a full table anyway (a table whose rows all change once is twice its filled
 *   size either way);
 * - a log is appended to and emptied by compaction: its pages are filled, and autovacuum takes the dead rows a
 *   compaction leaves as soon as there are a thousand (not a fifth of a table that is empty after each
 *   compaction), unthrottled: vacuuming dead pages is cheap, and a throttled vacuum fell behind a log taking 36,000
 *   rows a second.
 * A DBA's own settings (ALTER TABLE ... SET) are kept when a counter is declared again.
 */
const char *
StorageParameters(Storage kind)
{
	switch (kind) {
	case Storage::Counts:
	case Storage::Slots:
		return "fillfactor = 50";
	case Storage::Log:
		return "autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000, "
		       "autovacuum_vacuum_cost_delay = 0";
	}
	pg_unreachable();
}

char *
SetStorageStatement(Oid rel, const char *parameters)
{
	return psprintf("ALTER TABLE %s SET (%s)", QualifiedName(rel), parameters);
}

namespace {

/* A storage parameter's name: "name" or "namespace.name" (toast.), each part quoted. */
const char *
StorageName(const DefElem *def)
{
	if (def->defnamespace == nullptr)
		return quote_identifier(def->defname);
	return psprintf("%s.%s", quote_identifier(def->defnamespace), quote_identifier(def->defname));
}

} // namespace

List *
StorageOf(Oid rel)
{
	if (!OidIsValid(rel))
		return NIL;
	HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(rel));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", rel);
	bool isnull;
	Datum options = SysCacheGetAttr(RELOID, tup, Anum_pg_class_reloptions, &isnull);
	List *list = isnull ? NIL : untransformRelOptions(options);
	Oid toast = ((Form_pg_class)GETSTRUCT(tup))->reltoastrelid;
	ReleaseSysCache(tup);
	/* (the TOAST table's, which ALTER TABLE sets as toast.name) */
	ListCell *lc;
	foreach (lc, StorageOf(toast)) {
		DefElem *def = (DefElem *)lfirst(lc);
		def->defnamespace = pstrdup("toast");
		list = lappend(list, def);
	}
	return list;
}

List *
StorageStatements(Oid rel, List *options)
{
	StringInfoData names;
	initStringInfo(&names);
	List *statements = NIL;
	ListCell *lc;
	foreach (lc, StorageOf(rel))
		appendStringInfo(&names, "%s%s", names.len ? ", " : "", StorageName((DefElem *)lfirst(lc)));
	if (names.len > 0)
		statements = lappend(statements, psprintf("ALTER TABLE %s RESET (%s)", QualifiedName(rel), names.data));
	resetStringInfo(&names);
	foreach (lc, options) {
		DefElem *def = (DefElem *)lfirst(lc);
		appendStringInfo(&names, "%s%s = %s", names.len ? ", " : "", StorageName(def),
		                 quote_literal_cstr(defGetString(def)));
	}
	if (names.len > 0)
		statements = lappend(statements, SetStorageStatement(rel, names.data));
	return statements;
}

/*
 * The counter table's key constraint, added once the table is filled (building the index from the sorted rows is
 * faster than inserting each row's entry). Keys that may be NULL group like GROUP BY: one row for NULL.
 */
bool
DigestsKeys(const CounterDef *def)
{
	for (int k = 0; k < def->nkeys; k++)
		if (DigestedKeyType(def->keys[k].type, def->keys[k].typmod, def->keys[k].collation))
			return true;
	return false;
}

namespace {

/*
 * The columns of `table` that hold definition `def`'s keys and values, by position (renames followed), quoted: what
 * the statements below name, so that a table whose columns its owner renamed is written by their names.
 */
struct TableNames {
	const char **keys;   /* quoted, in key order */
	const char **values; /* quoted, in value order */
	char *key_list;      /* the keys, separated by ", " */
};

TableNames
NamesIn(const CounterDef *def, Oid table)
{
	const char **names;
	ColumnsByPosition(def, table, &names, nullptr);
	TableNames t = {(const char **)palloc0(sizeof(char *) * Max(def->nkeys, 1)),
	                (const char **)palloc0(sizeof(char *) * Max(def->nvalues, 1)), nullptr};
	for (int i = 0; i < def->ncolumns; i++)
		(def->columns[i].is_key ? t.keys : t.values)[def->columns[i].index] = quote_identifier(names[i]);
	StringInfoData list;
	initStringInfo(&list);
	for (int k = 0; k < def->nkeys; k++)
		appendStringInfo(&list, "%s%s", k ? ", " : "", t.keys[k]);
	t.key_list = list.data;
	return t;
}

} // namespace

char *
CounterKeyStatement(const CounterDef *def, Oid table, bool all_keys_not_null, bool digest)
{
	TableNames names = NamesIn(def, table);
	if (!digest || !DigestsKeys(def))
		return psprintf("ALTER TABLE %s ADD %s (%s)", QualifiedName(table),
		                all_keys_not_null ? "PRIMARY KEY" : "UNIQUE NULLS NOT DISTINCT", names.key_list);
	/*
	 * A key of an unbounded string type is indexed by its digest (no length limit), and found by its own hash index
	 * (for readers: WHERE url = ...); the keys stay NOT NULL where they are.
	 */
	StringInfoData sql, elements, lookups, not_null;
	initStringInfo(&sql);
	initStringInfo(&elements);
	initStringInfo(&lookups);
	initStringInfo(&not_null);
	const char *t = QualifiedName(table);
	for (int k = 0; k < def->nkeys; k++) {
		const KeyDef *key = &def->keys[k];
		const char *col = names.keys[k];
		bool digested = DigestedKeyType(key->type, key->typmod, key->collation);
		appendStringInfo(&elements, "%s%s", k ? ", " : "", KeyIndexElement(col, digested));
		if (digested)
			appendStringInfo(&lookups, "; CREATE INDEX ON %s USING hash (%s)", t, col);
		if (all_keys_not_null)
			appendStringInfo(&not_null, "%sALTER COLUMN %s SET NOT NULL", not_null.len ? ", " : "", col);
	}
	if (not_null.len > 0)
		appendStringInfo(&sql, "ALTER TABLE %s %s; ", t, not_null.data);
	appendStringInfo(&sql, "CREATE UNIQUE INDEX ON %s (%s)%s%s", t, elements.data,
	                 all_keys_not_null ? "" : " NULLS NOT DISTINCT", lookups.data);
	return sql.data;
}

namespace {

/* "COALESCE(q.v, 0) <> 0 OR ...": a row whose values are all zero is not stored. */
char *
NonzeroCondition(const CounterDef *def, const char *alias)
{
	StringInfoData cond;
	initStringInfo(&cond);
	for (int v = 0; v < def->nvalues; v++)
		appendStringInfo(
		    &cond, "%s%s", v ? " OR " : "",
		    NonzeroTest(&def->values[v], psprintf("%s.%s", alias, quote_identifier(def->values[v].column_name))));
	return cond.data;
}

} // namespace

/* INSERT INTO public.blog_posts (blog_id, posts) SELECT q.blog_id, COALESCE(q.posts, 0) FROM ..._definition q WHERE ...
 */
char *
FillStatement(const CounterDef *def, Oid table, Oid view)
{
	TableNames names = NamesIn(def, table);
	StringInfoData values, value_list;
	initStringInfo(&values);
	initStringInfo(&value_list);
	for (int v = 0; v < def->nvalues; v++) {
		appendStringInfo(&value_list, "%s%s", v ? ", " : "", names.values[v]);
		appendStringInfo(&values, "%s%s", v ? ", " : "",
		                 ValueOrZero(&def->values[v], psprintf("q.%s", quote_identifier(def->values[v].column_name))));
	}
	StringInfoData keys;
	initStringInfo(&keys);
	for (int k = 0; k < def->nkeys; k++)
		appendStringInfo(&keys, "%sq.%s", k ? ", " : "", quote_identifier(def->keys[k].column_name));
	return psprintf("INSERT INTO %s (%s, %s) SELECT %s, %s FROM %s q WHERE %s", QualifiedName(table), names.key_list,
	                value_list.data, keys.data, values.data, QualifiedName(view), NonzeroCondition(def, "q"));
}

char *
ZeroTargetStatement(const CounterDef *def, Oid target)
{
	StringInfoData sets;
	initStringInfo(&sets);
	for (int v = 0; v < def->nvalues; v++)
		appendStringInfo(&sets, "%s%s = %s", v ? ", " : "", quote_identifier(def->values[v].column_name),
		                 ZeroOf(&def->values[v]));
	return psprintf("UPDATE %s SET %s", QualifiedName(target), sets.data);
}

char *
FillTargetStatement(const CounterDef *def, Oid target, Oid view)
{
	StringInfoData sets, join;
	initStringInfo(&sets);
	initStringInfo(&join);
	for (int v = 0; v < def->nvalues; v++) {
		const char *col = quote_identifier(def->values[v].column_name);
		appendStringInfo(&sets, "%s%s = %s", v ? ", " : "", col, ValueOrZero(&def->values[v], psprintf("q.%s", col)));
	}
	/* keys compared as they are: the target's key columns have the definition's key types */
	for (int k = 0; k < def->nkeys; k++) {
		const char *col = quote_identifier(def->keys[k].column_name);
		appendStringInfo(&join, "%st.%s OPERATOR(pg_catalog.=) q.%s", k ? " AND " : "", col, col);
	}
	return psprintf("UPDATE %s t SET %s FROM %s q WHERE %s", QualifiedName(target), sets.data, QualifiedName(view),
	                join.data);
}

char *
AnchoredKeyStatement(const CounterDef *def, Oid table, bool all_keys_not_null)
{
	return psprintf("ALTER TABLE %s ADD %s (%s, %s)", QualifiedName(table),
	                all_keys_not_null ? "PRIMARY KEY" : "UNIQUE NULLS NOT DISTINCT", NamesIn(def, table).key_list,
	                ANCHOR_COLUMN);
}

char *
AnchoredLogIndexStatement(const CounterDef *def, Oid log)
{
	return psprintf("CREATE INDEX ON %s (%s)", QualifiedName(log), NamesIn(def, log).key_list);
}

char *
AnchoredViewStatement(const CounterDef *def, const char *schema, const char *name, Oid totals, Oid log)
{
	TableNames names = NamesIn(def, totals);
	StringInfoData select, partial, nonzero;
	initStringInfo(&select);
	initStringInfo(&partial);
	initStringInfo(&nonzero);
	for (int i = 0; i < def->ncolumns; i++) {
		const ColumnDef *cd = &def->columns[i];
		const char *col = (cd->is_key ? names.keys : names.values)[cd->index];
		appendStringInfo(&partial, "%s%s", i ? ", " : "",
		                 cd->is_key ? col : psprintf("pg_catalog.sum(%s) AS %s", col, col));
		if (cd->is_key) {
			appendStringInfo(&select, "%s%s", i ? ", " : "", col);
			continue;
		}
		appendStringInfo(&select, "%spg_catalog.sum(%s)::%s AS %s", i ? ", " : "", col,
		                 format_type_be(StoredType(&def->values[cd->index])), col);
		appendStringInfo(&nonzero, "%spg_catalog.sum(%s) OPERATOR(pg_catalog.<>) 0", nonzero.len ? " OR " : "", col);
	}
	for (int d = 0; d < def->nderived; d++) {
		const DerivedDef *dd = &def->derived[d];
		const char *acc[2];
		for (int j = 0; j < 2; j++)
			acc[j] = psprintf("(pg_catalog.sum(%s))", names.values[dd->accumulators[j]]);
		appendStringInfo(&select, ", %s AS %s", psprintf(dd->kind->read, acc[0], acc[1]),
		                 quote_identifier(dd->column_name));
	}
	/* (each side summed shard by shard first: Citus aggregates in two steps, the shards' partials then their sum) */
	return psprintf(
	    "CREATE VIEW %s AS SELECT %s FROM (SELECT %s FROM %s GROUP BY %s UNION ALL SELECT %s FROM %s GROUP BY "
	    "%s) u GROUP BY %s HAVING %s",
	    quote_qualified_identifier(schema, name), select.data, partial.data, QualifiedName(totals), names.key_list,
	    partial.data, QualifiedName(log), names.key_list, names.key_list, nonzero.data);
}

char *
ReplicaIdentityFullStatement(Oid rel)
{
	return ReplicaIdentityStatement(rel, true);
}

/* ALTER TABLE public.blog_posts REPLICA IDENTITY FULL (or DEFAULT: its primary key) */
char *
ReplicaIdentityStatement(Oid rel, bool full)
{
	return psprintf("ALTER TABLE %s REPLICA IDENTITY %s", QualifiedName(rel), full ? "FULL" : "DEFAULT");
}

char *
RenameStatement(Oid rel, const char *name)
{
	return psprintf("ALTER TABLE %s RENAME TO %s", QualifiedName(rel), quote_identifier(name));
}

char *
CreateLikeStatement(const char *schema, const char *name, Oid like)
{
	/* (without the generated columns of derived kinds: a log row or a slot is read through the view) */
	StringInfoData drop;
	initStringInfo(&drop);
	Relation rel = table_open(like, AccessShareLock);
	for (int a = 0; a < RelationGetDescr(rel)->natts; a++) {
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), a);
		if (!att->attisdropped && att->attgenerated != '\0')
			appendStringInfo(&drop, "%sDROP COLUMN %s", drop.len ? ", " : "", quote_identifier(NameStr(att->attname)));
	}
	table_close(rel, AccessShareLock);
	const char *table = quote_qualified_identifier(schema, name);
	return psprintf("CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS)%s%s%s", table, QualifiedName(like),
	                drop.len ? "; ALTER TABLE " : "", drop.len ? table : "",
	                drop.len ? psprintf(" %s", drop.data) : "");
}

namespace {

/* The key columns (index: as the totals' key index has them, a long key by its digest). */
char *
LayoutKeys(const Counter *e, bool index = false)
{
	const CounterLayout *l = LayoutOf(e);
	StringInfoData keys;
	initStringInfo(&keys);
	for (int i = 0; i < l->ncolumns; i++)
		if (l->is_key[i])
			appendStringInfo(&keys, "%s%s", keys.len ? ", " : "",
			                 KeyIndexElement(quote_identifier(l->in_table.names[i]),
			                                 index && l->digested != nullptr && l->digested[i]));
	return keys.data;
}

} // namespace

char *
LogIndexStatement(const Counter *e, Oid log)
{
	const CounterLayout *l = LayoutOf(e);
	/*
	 * One index, for readers of a key or a range (the log takes every write): the keys, or where the totals have a
	 * key by its digest, the others (a digest has no range, and the log is read by few), else a hash of the first.
	 */
	if (l->digested == nullptr)
		return psprintf("CREATE INDEX ON %s (%s)", QualifiedName(log), LayoutKeys(e));
	StringInfoData plain;
	initStringInfo(&plain);
	const char *first = nullptr;
	for (int i = 0; i < l->ncolumns; i++)
		if (l->is_key[i] && !l->digested[i])
			appendStringInfo(&plain, "%s%s", plain.len ? ", " : "", quote_identifier(l->in_table.names[i]));
		else if (l->is_key[i] && first == nullptr)
			first = quote_identifier(l->in_table.names[i]);
	if (plain.len > 0)
		return psprintf("CREATE INDEX ON %s (%s)", QualifiedName(log), plain.data);
	return psprintf("CREATE INDEX ON %s USING hash (%s)", QualifiedName(log), first);
}

char *
AddSlotColumnStatement(Oid log)
{
	return psprintf("ALTER TABLE %s ADD COLUMN counters_slot integer NOT NULL", QualifiedName(log));
}

char *
SlotKeyStatement(const Counter *e, Oid log)
{
	const CounterLayout *l = LayoutOf(e);
	bool nullable = false;
	for (int i = 0; i < l->ncolumns; i++)
		if (l->is_key[i]) {
			HeapTuple tup = SearchSysCacheAttName(l->table, l->in_table.names[i]);
			if (HeapTupleIsValid(tup)) {
				nullable |= !((Form_pg_attribute)GETSTRUCT(tup))->attnotnull;
				ReleaseSysCache(tup);
			}
		}
	/* (a key by its digest is an expression: a unique index, not a constraint) */
	if (l->digested != nullptr)
		return psprintf("CREATE UNIQUE INDEX ON %s (%s, counters_slot)%s", QualifiedName(log), LayoutKeys(e, true),
		                nullable ? " NULLS NOT DISTINCT" : "");
	return psprintf("ALTER TABLE %s ADD UNIQUE %s (%s, counters_slot)", QualifiedName(log),
	                nullable ? "NULLS NOT DISTINCT" : "", LayoutKeys(e));
}

char *
PendingViewStatement(const Counter *e, const char *schema, const char *name, Oid totals, Oid log)
{
	const CounterLayout *l = LayoutOf(e);
	StringInfoData select, cols, nonzero;
	initStringInfo(&select);
	initStringInfo(&cols);
	initStringInfo(&nonzero);
	for (int i = 0; i < l->ncolumns; i++) {
		const char *col = quote_identifier(l->in_table.names[i]);
		appendStringInfo(&cols, "%s%s", i ? ", " : "", col);
		/* the view's columns in the counter table's order (keys and values interleaved as declared) */
		if (l->is_key[i])
			appendStringInfo(&select, "%s%s", i ? ", " : "", col);
		else {
			Oid type;
			int32 typmod;
			Oid collation;
			get_atttypetypmodcoll(totals, get_attnum(totals, l->in_table.names[i]), &type, &typmod, &collation);
			appendStringInfo(&select, "%spg_catalog.sum(%s)::%s AS %s", i ? ", " : "", col,
			                 format_type_with_typemod(type, typmod), col);
			appendStringInfo(&nonzero, "%spg_catalog.sum(%s) OPERATOR(pg_catalog.<>) 0", nonzero.len ? " OR " : "",
			                 col);
		}
	}
	/* derived kinds, last (the view's first columns are the counter's): read from the sums of their accumulators */
	const CounterDef *def = DefinitionOf(e);
	for (int d = 0; d < def->nderived; d++) {
		const DerivedDef *dd = &def->derived[d];
		const char *acc[2];
		for (int j = 0; j < 2; j++)
			acc[j] = psprintf("(pg_catalog.sum(%s))",
			                  quote_identifier(l->in_table.names[ValueColumnIndex(def, dd->accumulators[j])]));
		appendStringInfo(&select, ", %s AS %s", psprintf(dd->kind->read, acc[0], acc[1]),
		                 quote_identifier(dd->column_name));
	}
	return psprintf("CREATE VIEW %s AS SELECT %s FROM (SELECT %s FROM %s UNION ALL SELECT %s FROM %s) u "
	                "GROUP BY %s HAVING %s",
	                quote_qualified_identifier(schema, name), select.data, cols.data, QualifiedName(totals), cols.data,
	                QualifiedName(log), LayoutKeys(e), nonzero.data);
}

char *
GrantSelectStatement(Oid rel, Oid grantee)
{
	return psprintf("GRANT SELECT ON %s TO %s", QualifiedName(rel),
	                grantee == ACL_ID_PUBLIC ? "PUBLIC" : quote_identifier(GetUserNameFromId(grantee, false)));
}

char *
DropStatement(const char *kind, Oid rel, bool if_exists)
{
	return psprintf("DROP %s %s%s", kind, if_exists ? "IF EXISTS " : "", QualifiedName(rel));
}

char *
RenameViewColumnStatement(Oid view, const char *from, const char *to)
{
	return psprintf("ALTER VIEW %s RENAME COLUMN %s TO %s", QualifiedName(view), quote_identifier(from),
	                quote_identifier(to));
}

/* ---- the capture triggers ---- */

char *
CreateTriggerStatement(int trigger, Oid rel, bool is_source)
{
	const char *on = QualifiedName(rel);
	const char *name = CaptureTriggerName(trigger);
	const char *call = "FOR EACH STATEMENT EXECUTE FUNCTION counters.capture()";
	switch (trigger) {
	case BEGIN_TRIGGER:
		return psprintf("CREATE TRIGGER %s BEFORE INSERT OR UPDATE OR DELETE ON %s %s", name, on, call);
	/* (the transition tables: old rows of updates and deletes, new rows of inserts and updates) */
	case INSERT_TRIGGER:
	case UPDATE_TRIGGER:
	case DELETE_TRIGGER:
		return psprintf("CREATE TRIGGER %s AFTER %s ON %s REFERENCING%s%s %s", name,
		                trigger == INSERT_TRIGGER   ? "INSERT"
		                : trigger == UPDATE_TRIGGER ? "UPDATE"
		                                            : "DELETE",
		                on, trigger != INSERT_TRIGGER ? " OLD TABLE AS counters_old" : "",
		                trigger != DELETE_TRIGGER ? " NEW TABLE AS counters_new" : "", call);
	/* (fires for every role: under the replica role, which fires no counters_sink_end, it counts each row at once) */
	case SINK_TRIGGER:
		return psprintf("CREATE TRIGGER %s BEFORE INSERT ON %s FOR EACH ROW EXECUTE FUNCTION counters.capture(); "
		                "ALTER TABLE %s ENABLE ALWAYS TRIGGER %s",
		                name, on, on, name);
	case SINK_GUARD_TRIGGER:
		return psprintf("CREATE TRIGGER %s BEFORE UPDATE OR DELETE ON %s %s", name, on, call);
	case SINK_END_TRIGGER:
		return psprintf("CREATE TRIGGER %s AFTER INSERT ON %s %s", name, on, call);
	/* CREATE TRIGGER counters_replica AFTER ... FOR EACH ROW ...; ALTER TABLE ... ENABLE REPLICA TRIGGER ... */
	case REPLICA_TRIGGER:
		return psprintf("CREATE TRIGGER %s AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION "
		                "counters.capture(); ALTER TABLE %s ENABLE REPLICA TRIGGER %s",
		                name, on, on, name);
	case REPLICA_TRUNCATE_TRIGGER:
		return psprintf("CREATE TRIGGER %s %s TRUNCATE ON %s %s; ALTER TABLE %s ENABLE REPLICA TRIGGER %s", name,
		                is_source ? "AFTER" : "BEFORE", on, call, on, name);
	default:
		/* TRUNCATE: the whole source is emptied in one go; a leaf partition's rows are subtracted before. */
		return psprintf("CREATE TRIGGER %s %s TRUNCATE ON %s %s", name, is_source ? "AFTER" : "BEFORE", on, call);
	}
}

char *
CreateParentTriggerStatement(int trigger, Oid rel)
{
	const char *on = QualifiedName(rel);
	const char *name = ParentTriggerName(trigger);
	switch (trigger) {
	case PARENT_BEGIN_TRIGGER:
		return psprintf("CREATE TRIGGER %s BEFORE INSERT OR UPDATE OR DELETE ON %s FOR EACH STATEMENT EXECUTE "
		                "FUNCTION counters.capture()",
		                name, on);
	case PARENT_ROW_TRIGGER:
		return psprintf("CREATE TRIGGER %s AFTER UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION "
		                "counters.capture()",
		                name, on);
	case PARENT_INSERT_TRIGGER:
		return psprintf("CREATE TRIGGER %s AFTER INSERT ON %s REFERENCING NEW TABLE AS counters_new FOR EACH "
		                "STATEMENT EXECUTE FUNCTION counters.capture()",
		                name, on);
	case PARENT_REPLICA_TRIGGER:
		return psprintf("CREATE TRIGGER %s AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION "
		                "counters.capture(); ALTER TABLE %s ENABLE REPLICA TRIGGER %s",
		                name, on, on, name);
	case PARENT_REPLICA_TRUNCATE_TRIGGER:
		return psprintf(
		    "CREATE TRIGGER %s AFTER TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION counters.capture(); "
		    "ALTER TABLE %s ENABLE REPLICA TRIGGER %s",
		    name, on, on, name);
	default:
		return psprintf("CREATE TRIGGER %s AFTER TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION counters.capture()",
		                name, on);
	}
}

/* ALTER TABLE public.posts ENABLE REPLICA TRIGGER counters_replica */
char *
EnableReplicaTriggerStatement(int trigger, Oid rel)
{
	return psprintf("ALTER TABLE %s ENABLE REPLICA TRIGGER %s", QualifiedName(rel),
	                quote_identifier(CaptureTriggerName(trigger)));
}

/* ALTER TABLE public.posts ENABLE REPLICA TRIGGER counters_parent_replica (or ENABLE ALWAYS: always) */
char *
EnableTriggerStatement(const char *trigger, Oid rel, bool always)
{
	return psprintf("ALTER TABLE %s ENABLE %s TRIGGER %s", QualifiedName(rel), always ? "ALWAYS" : "REPLICA",
	                quote_identifier(trigger));
}

char *
DropTriggerStatement(int trigger, Oid rel)
{
	return psprintf("DROP TRIGGER %s ON %s", CaptureTriggerName(trigger), QualifiedName(rel));
}

/* CREATE TRIGGER counters_guard BEFORE TRUNCATE ON public.blog_posts FOR EACH STATEMENT EXECUTE ... */
char *
CreateGuardTriggerStatement(Oid rel)
{
	return psprintf("CREATE TRIGGER %s BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION counters.capture()",
	                guard_trigger, QualifiedName(rel));
}

/*
 * CREATE TRIGGER counters_target_key BEFORE UPDATE OF id ON public.blogs FOR EACH ROW
 *     EXECUTE FUNCTION counters.capture()
 */
char *
CreateTargetKeyTriggerStatement(Oid target, List *columns)
{
	StringInfoData cols;
	initStringInfo(&cols);
	ListCell *lc;
	foreach (lc, columns)
		appendStringInfo(&cols, "%s%s", cols.len ? ", " : "", quote_identifier((const char *)lfirst(lc)));
	return psprintf("CREATE TRIGGER %s BEFORE UPDATE OF %s ON %s FOR EACH ROW EXECUTE FUNCTION counters.capture()",
	                target_key_trigger, cols.data, QualifiedName(target));
}

char *
DropTargetKeyTriggerStatement(Oid target)
{
	return psprintf("DROP TRIGGER %s ON %s", target_key_trigger, QualifiedName(target));
}

/*
 * A counter-cache counter's values for one key, recounted from its definition, in the types of the target's columns
 * (one row, zeros when the key has none):
 *     SELECT COALESCE(pg_catalog.sum(d.post_count), 0)::integer FROM public.blog_posts_definition d
 *      WHERE d.id IS NOT DISTINCT FROM $1
 */
char *

CreateCrossingsStatement(const char *schema, const char *table)
{
	/* (a prefix of any length: unique by its text's digest, found by its hash) */
	const char *t = quote_qualified_identifier(schema, table);
	return psprintf("CREATE TABLE %s (column_name pg_catalog.text NOT NULL, prefix pg_catalog.jsonb NOT NULL, "
	                "threshold pg_catalog.numeric NOT NULL, "
	                "crossed_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now()); "
	                "CREATE UNIQUE INDEX ON %s (column_name, (counters.%s(prefix::pg_catalog.text)), threshold); "
	                "ALTER TABLE %s REPLICA IDENTITY FULL",
	                t, t, KEY_DIGEST_NAME, t);
}

char *
DeleteCrossingsStatement(Oid crossings)
{
	/* $1 the column; $2 its thresholds (NULL: none left) */
	return psprintf("DELETE FROM %s x WHERE x.column_name OPERATOR(pg_catalog.=) $1 "
	                "AND ($2::pg_catalog.numeric[] IS NULL OR NOT x.threshold OPERATOR(pg_catalog.=) ANY ($2))",
	                QualifiedName(crossings));
}

char *
StalePrefixesStatement(Oid crossings)
{
	/* $1 the prefix's key names in byte order (NULL: none) */
	return psprintf("DELETE FROM %s x WHERE (SELECT pg_catalog.array_agg(k.k ORDER BY k.k COLLATE \"C\") "
	                "FROM pg_catalog.jsonb_object_keys(x.prefix) k(k)) IS DISTINCT FROM $1::pg_catalog.text[]",
	                QualifiedName(crossings));
}

char *
CrossingsStatement(Oid crossings)
{
	return psprintf("SELECT x.column_name, x.prefix, x.threshold, x.crossed_at FROM %s x "
	                "ORDER BY x.column_name COLLATE \"C\", x.prefix, x.threshold",
	                QualifiedName(crossings));
}

} // namespace counters
