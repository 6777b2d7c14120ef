/*
 * statements.cpp: every SQL statement the extension runs over a counter's relations, and every name it derives:
 * declaring and switching counters (tables, views, triggers, fills), applying deltas (the statements cache.cpp
 * prepares for apply.cpp), maintenance (verify, rebuild, compact, retention), bounds and top(). (catalog.cpp holds
 * the fixed queries of the extension's own catalog, ddl.cpp those of event-trigger functions.)
 *
 * Every name is quoted and schema-qualified, every operator written OPERATOR(pg_catalog.x) or generated for its
 * types; values travel as parameters; the statements run with search_path pinned as well. Inside a maintenance
 * statement the counter's columns travel under positional aliases (k<n> for keys, s<n>/e<n>/v<n> for values, n = the
 * column's position in the definition), so that no column name of a counter can collide with another once prefixed,
 * nor with a name the statement uses itself.
 */
#include "counters.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_attribute.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "catalog/pg_type.h"
#include "utils/typcache.h"
}

namespace counters {

namespace {

const char *
Quoted(const char *name)
{
	return quote_identifier(name);
}

/* ", " between items */
void
Sep(StringInfo buf, bool *first, const char *sep = ", ")
{
	if (!*first)
		appendStringInfoString(buf, sep);
	*first = false;
}

/* The retention condition over the bucket column `column` (a qualified reference), or "true". */
char *
LiveCondition(const CounterShape *s, const char *column)
{
	if (s->retention_column < 0)
		return pstrdup("true");
	return psprintf("%s OPERATOR(pg_catalog.>=) (pg_catalog.now() OPERATOR(pg_catalog.-) %s::pg_catalog.interval)::%s",
	                column, quote_literal_cstr(s->retention_keep),
	                format_type_extended(s->retention_type, -1, FORMAT_TYPE_FORCE_QUALIFY));
}

} // namespace

char *
VerifyStatement(const CounterShape *s)
{
	StringInfoData keys, view_keys, read_keys, json, stored, expected, sums, differs, unpivot;
	initStringInfo(&keys);
	initStringInfo(&view_keys);
	initStringInfo(&read_keys);
	initStringInfo(&json);
	initStringInfo(&stored);
	initStringInfo(&expected);
	initStringInfo(&sums);
	initStringInfo(&differs);
	initStringInfo(&unpivot);
	bool fk = true, fv = true;
	for (int i = 0; i < s->ncolumns; i++) {
		int n = i + 1;
		if (s->is_key[i]) {
			Sep(&keys, &fk);
			appendStringInfo(&keys, "u.k%d", n);
			appendStringInfo(&view_keys, "v.%s AS k%d, ", Quoted(s->def_names[i]), n);
			appendStringInfo(&read_keys, "t.%s AS k%d, ", Quoted(s->read_names[i]), n);
			appendStringInfo(&json, "%s%s, d.k%d", json.len ? ", " : "", quote_literal_cstr(s->def_names[i]), n);
		} else {
			Sep(&sums, &fv);
			appendStringInfo(&stored, ", COALESCE(t.%s, 0)::pg_catalog.numeric AS s%d, 0::pg_catalog.numeric AS e%d",
			                 Quoted(s->read_names[i]), n, n);
			appendStringInfo(&expected, ", 0::pg_catalog.numeric, COALESCE(v.%s, 0)::pg_catalog.numeric",
			                 Quoted(s->def_names[i]));
			appendStringInfo(&sums, "pg_catalog.sum(u.s%d) AS s%d, pg_catalog.sum(u.e%d) AS e%d", n, n, n, n);
			appendStringInfo(&differs, "%spg_catalog.sum(u.s%d) IS DISTINCT FROM pg_catalog.sum(u.e%d)",
			                 differs.len ? " OR " : "", n, n);
			appendStringInfo(&unpivot, "%s(%s, d.s%d, d.e%d)", unpivot.len ? ", " : "",
			                 quote_literal_cstr(s->def_names[i]), n, n);
		}
	}
	int rk = s->retention_column + 1;
	/* (the keys that differ in a CTE of their own: Citus pushes it down to the shards, the keys first in both sides) */
	return psprintf(
	    "WITH d AS MATERIALIZED (SELECT %2$s, %3$s, pg_catalog.bool_or(u.in_target) AS in_target "
	    "        FROM (SELECT %4$strue AS in_target%5$s FROM %6$s t WHERE %7$s "
	    "              UNION ALL "
	    "              SELECT %8$sfalse%9$s FROM %10$s v WHERE %11$s) u "
	    "       GROUP BY %12$s HAVING %13$s) "
	    "SELECT $1::pg_catalog.text, pg_catalog.jsonb_build_object(%1$s), x.column_name::pg_catalog.text, x.stored, "
	    "x.expected "
	    "FROM d CROSS JOIN LATERAL (VALUES %14$s) x(column_name, stored, expected) "
	    "WHERE x.stored IS DISTINCT FROM x.expected AND (%15$s OR d.in_target) "
	    "ORDER BY 2, 3",
	    json.data, keys.data, sums.data, read_keys.data, stored.data, QualifiedName(s->e->target),
	    LiveCondition(s, rk > 0 ? psprintf("t.%s", Quoted(s->read_names[rk - 1])) : nullptr), view_keys.data,
	    expected.data, QualifiedName(s->e->query),
	    LiveCondition(s, rk > 0 ? psprintf("v.%s", Quoted(s->def_names[rk - 1])) : nullptr), keys.data, differs.data,
	    unpivot.data, s->e->owns_target ? "true" : "false");
}

char *
ConditionProbe(const char *condition)
{
	return psprintf("SELECT 1 WHERE (%s)", condition);
}

char *
RebuildConditionCheck(const CounterShape *s, const char *condition)
{
	StringInfoData keys;
	initStringInfo(&keys);
	bool first = true;
	for (int i = 0; i < s->ncolumns; i++)
		if (s->is_key[i]) {
			Sep(&keys, &first);
			appendStringInfoString(&keys, Quoted(s->table_names[i]));
		}
	return psprintf("SELECT 1 FROM (SELECT %s FROM %s LIMIT 0) k WHERE (%s)", keys.data, QualifiedName(s->table),
	                condition);
}

char *
KeyColumnList(const CounterShape *s)
{
	StringInfoData keys;
	initStringInfo(&keys);
	bool first = true;
	for (int i = 0; i < s->ncolumns; i++)
		if (s->is_key[i]) {
			Sep(&keys, &first);
			appendStringInfoString(&keys, Quoted(s->table_names[i]));
		}
	return keys.data;
}

char *
RebuildStatement(const CounterShape *s, const char *condition, bool distributed)
{
	StringInfoData keys, table_side, view_side, as_table, sums, differs, nonzero, insert_cols, insert_vals, conflict,
	    sets;
	initStringInfo(&keys);
	initStringInfo(&table_side);
	initStringInfo(&view_side);
	initStringInfo(&as_table);
	initStringInfo(&sums);
	initStringInfo(&differs);
	initStringInfo(&nonzero);
	initStringInfo(&insert_cols);
	initStringInfo(&insert_vals);
	initStringInfo(&conflict);
	initStringInfo(&sets);
	StringInfoData stored_nonzero;
	initStringInfo(&stored_nonzero);
	bool fk = true, fs = true, fc = true, fi = true, fset = true;
	for (int i = 0; i < s->ncolumns; i++) {
		int n = i + 1;
		const char *col = Quoted(s->table_names[i]);
		Sep(&table_side, &fs);
		Sep(&view_side, &fc);
		Sep(&insert_cols, &fi);
		appendStringInfoString(&insert_cols, col);
		appendStringInfo(&insert_vals, "%sd.%s%d", insert_vals.len ? ", " : "", s->is_key[i] ? "k" : "e", n);
		if (s->is_key[i]) {
			appendStringInfo(&table_side, "t.%s AS k%d", col, n);
			appendStringInfo(&view_side, "v.%s", Quoted(s->def_names[i]));
			Sep(&keys, &fk);
			appendStringInfo(&keys, "u.k%d", n);
			appendStringInfo(&as_table, "%su.k%d AS %s", as_table.len ? ", " : "", n, col);
			appendStringInfo(&conflict, "%s%s", conflict.len ? ", " : "",
			                 KeyIndexElement(col, s->digested != nullptr && s->digested[i]));
		} else {
			appendStringInfo(&table_side,
			                 "COALESCE(t.%s, 0)::pg_catalog.numeric AS s%d, NULL::pg_catalog.numeric AS e%d", col, n,
			                 n);
			appendStringInfo(&view_side, "NULL::pg_catalog.numeric, COALESCE(v.%s, 0)::pg_catalog.numeric",
			                 Quoted(s->def_names[i]));
			appendStringInfo(&sums,
			                 ", COALESCE(pg_catalog.sum(u.s%d), 0) AS s%d, COALESCE(pg_catalog.sum(u.e%d), 0) AS e%d",
			                 n, n, n, n);
			appendStringInfo(&differs, "%sx.s%d IS DISTINCT FROM x.e%d", differs.len ? " OR " : "", n, n);
			appendStringInfo(&stored_nonzero, "%sx.s%d OPERATOR(pg_catalog.<>) 0", stored_nonzero.len ? " OR " : "", n);
			appendStringInfo(&nonzero, "%sd.e%d OPERATOR(pg_catalog.<>) 0", nonzero.len ? " OR " : "", n);
			Sep(&sets, &fset);
			appendStringInfo(&sets, "%s = d.e%d", col, n);
		}
	}
	int rk = s->retention_column + 1;
	/* The condition sees exactly the key columns, named as in the counter table. */
	char *keep = condition != nullptr
	                 ? psprintf("EXISTS (SELECT FROM (SELECT %s) c WHERE (%s))", as_table.data, condition)
	                 : pstrdup("true");
	/* (Citus: no ctid; whether the key has a row, and the keys first on both sides, for the shards to compute it) */
	char *diff =
	    psprintf("SELECT x.* FROM ("
	             " SELECT %s%s, %s AS row_id "
	             "   FROM (SELECT %s, %s AS row_id FROM %s t "
	             "         UNION ALL "
	             "         SELECT %s, %s FROM %s v) u "
	             "  WHERE %s AND %s "
	             "  GROUP BY %s) x "
	             "WHERE %s",
	             keys.data, sums.data, distributed ? "pg_catalog.bool_or(u.row_id)" : "pg_catalog.max(u.row_id)",
	             table_side.data, distributed ? "true" : "t.ctid", QualifiedName(s->table), view_side.data,
	             distributed ? "NULL::pg_catalog.bool" : "NULL::pg_catalog.tid", QualifiedName(s->e->query),
	             LiveCondition(s, rk > 0 ? psprintf("u.k%d", rk) : nullptr), keep, keys.data,
	             /* (a stored row of zeros differs too, unless the counter keeps them: it should not exist) */
	             s->e->owns_target && !s->keep_zero
	                 ? psprintf("%s OR (x.row_id IS NOT NULL AND NOT (%s))", differs.data, stored_nonzero.data)
	                 : differs.data);
	const char *table = QualifiedName(s->table);
	StringInfoData match;
	initStringInfo(&match);
	for (int i = 0; i < s->ncolumns; i++)
		if (s->is_key[i])
			appendStringInfo(&match, " AND t.%s OPERATOR(pg_catalog.=) d.k%d", Quoted(s->table_names[i]), i + 1);
	if (!s->e->owns_target)
		/* Columns of an existing table: rows are updated, none created or deleted. */
		return psprintf("WITH d AS MATERIALIZED (%s), "
		                "     updated AS (UPDATE %s AS t SET %s FROM d "
		                "                  WHERE %s RETURNING 1) "
		                "SELECT (SELECT pg_catalog.count(*) FROM d), 0::pg_catalog.int8, 0::pg_catalog.int8, "
		                "       (SELECT pg_catalog.count(*) FROM updated)",
		                diff, table, sets.data,
		                distributed ? psprintf("d.row_id%s", match.data) : "t.ctid OPERATOR(pg_catalog.=) d.row_id");
	StringInfoData excluded;
	initStringInfo(&excluded);
	for (int i = 0; i < s->ncolumns; i++)
		if (!s->is_key[i])
			appendStringInfo(&excluded, "%s%s = EXCLUDED.%s", excluded.len ? ", " : "", Quoted(s->table_names[i]),
			                 Quoted(s->table_names[i]));
	StringInfoData order;
	initStringInfo(&order);
	for (int i = 0; i < s->ncolumns; i++)
		if (s->is_key[i])
			appendStringInfo(&order, "%sd.k%d", order.len ? ", " : "", i + 1);
	if (distributed)
		/*
		 * Citus: every key that differs is upserted (zeros too), by statements the shards run; the rows of zeros
		 * are deleted next (ZeroRowsStatement). (xmax tells no insert from an update across nodes.)
		 */
		return psprintf("WITH d AS MATERIALIZED (%s), "
		                "     upserted AS (INSERT INTO %s AS t (%s) SELECT %s FROM d ORDER BY %s "
		                "                  ON CONFLICT (%s) DO UPDATE SET %s RETURNING 1) "
		                "SELECT (SELECT pg_catalog.count(*) FROM d), 0::pg_catalog.int8, "
		                "       (SELECT pg_catalog.count(*) FROM d WHERE d.row_id IS NULL AND (%s)), "
		                "       (SELECT pg_catalog.count(*) FROM d WHERE d.row_id IS NOT NULL) "
		                "  FROM (SELECT pg_catalog.count(*) FROM upserted) u",
		                diff, table, insert_cols.data, insert_vals.data, order.data, conflict.data, excluded.data,
		                nonzero.data);
	/* Rows that should not exist (all zeros) go (with keep_zero: they are set to zeros); the others are upserted in key
	 * order. */
	return psprintf(
	    "WITH d AS MATERIALIZED (%s), "
	    "     deleted AS (DELETE FROM %s t WHERE t.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
	    "                   SELECT d.row_id FROM d WHERE d.row_id IS NOT NULL AND NOT (%s))) RETURNING 1), "
	    "     upserted AS (INSERT INTO %s AS t (%s) SELECT %s FROM d WHERE %s ORDER BY %s "
	    "                  ON CONFLICT (%s) DO UPDATE SET %s "
	    "                  RETURNING (t.xmax OPERATOR(pg_catalog.=) 0) AS inserted) "
	    "SELECT (SELECT pg_catalog.count(*) FROM d), (SELECT pg_catalog.count(*) FROM deleted), "
	    "       pg_catalog.count(*) FILTER (WHERE u.inserted), pg_catalog.count(*) FILTER (WHERE NOT u.inserted) "
	    "  FROM upserted u",
	    diff, table, s->keep_zero ? "true" : nonzero.data, table, insert_cols.data, insert_vals.data,
	    s->keep_zero ? psprintf("(%s) OR d.row_id IS NOT NULL", nonzero.data) : nonzero.data, order.data, conflict.data,
	    excluded.data);
}

char *
CompactStatement(const CounterShape *s, bool with_rows)
{
	StringInfoData moved, keys, cols, sums, nonzero, updates, zero, conflict;
	initStringInfo(&moved);
	initStringInfo(&keys);
	initStringInfo(&cols);
	initStringInfo(&sums);
	initStringInfo(&nonzero);
	initStringInfo(&updates);
	initStringInfo(&zero);
	initStringInfo(&conflict);
	for (int i = 0; i < s->ncolumns; i++) {
		int n = i + 1;
		const char *col = Quoted(s->table_names[i]);
		appendStringInfo(&moved, "%sl.%s AS c%d", moved.len ? ", " : "", Quoted(s->log_names[i]), n);
		appendStringInfo(&cols, "%s%s", cols.len ? ", " : "", col);
		if (s->is_key[i]) {
			appendStringInfo(&keys, "%sm.c%d", keys.len ? ", " : "", n);
			appendStringInfo(&conflict, "%s%s", conflict.len ? ", " : "",
			                 KeyIndexElement(col, s->digested != nullptr && s->digested[i]));
		} else {
			appendStringInfo(&sums, ", pg_catalog.sum(m.c%d)", n);
			appendStringInfo(&nonzero, "%spg_catalog.sum(m.c%d) OPERATOR(pg_catalog.<>) 0", nonzero.len ? " OR " : "",
			                 n);
			appendStringInfo(&updates, "%s%s = t.%s OPERATOR(pg_catalog.+) EXCLUDED.%s", updates.len ? ", " : "", col,
			                 col, col);
			appendStringInfo(&zero, "%st.%s OPERATOR(pg_catalog.=) 0", zero.len ? " AND " : "", col);
		}
	}
	/* insert the keys first, then the sums: reorder the column list accordingly */
	StringInfoData insert_cols;
	initStringInfo(&insert_cols);
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < s->ncolumns; i++)
			if (s->is_key[i] == (pass == 0))
				appendStringInfo(&insert_cols, "%s%s", insert_cols.len ? ", " : "", Quoted(s->table_names[i]));
	const char *log = QualifiedName(s->e->log);
	/* Sharded mode: only the slot rows no transaction holds (busy ones wait for the next compaction). */
	char *pending =
	    s->e->mode == Mode::Sharded
	        ? psprintf("l.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT x.ctid FROM %s x FOR UPDATE SKIP LOCKED))", log)
	        : pstrdup("true");
	if (!with_rows)
		return psprintf(
		    "WITH moved AS (DELETE FROM %s l WHERE %s RETURNING %s), "
		    "     folded AS (INSERT INTO %s AS t (%s) SELECT %s%s FROM moved m GROUP BY %s HAVING %s "
		    "                ORDER BY %s ON CONFLICT (%s) DO UPDATE SET %s RETURNING t.ctid, (%s) AS zero) "
		    "SELECT (SELECT pg_catalog.count(*) FROM moved), ARRAY(SELECT f.ctid FROM folded f WHERE f.zero)",
		    log, pending, moved.data, QualifiedName(s->table), insert_cols.data, keys.data, sums.data, keys.data,
		    nonzero.data, keys.data, conflict.data, updates.data, zero.data);
	/*
	 * With the folded rows (for thresholds): the same, then one row per folded key with its new values (f1 ... fn,
	 * definition order) and the sums folded into them (s<i> for value column i), after the two counts.
	 */
	StringInfoData sum_cols, returning, join, out;
	initStringInfo(&sum_cols);
	initStringInfo(&returning);
	initStringInfo(&join);
	initStringInfo(&out);
	for (int i = 0; i < s->ncolumns; i++) {
		int n = i + 1;
		appendStringInfo(&returning, ", t.%s AS f%d", Quoted(s->table_names[i]), n);
		appendStringInfo(&out, ", f.f%d", n);
		if (s->is_key[i]) {
			appendStringInfo(&sum_cols, "%sm.c%d", sum_cols.len ? ", " : "", n);
			appendStringInfo(&join, "%sf.f%d IS NOT DISTINCT FROM g.c%d", join.len ? " AND " : "", n, n);
		} else
			appendStringInfo(&sum_cols, "%spg_catalog.sum(m.c%d) AS c%d", sum_cols.len ? ", " : "", n, n);
	}
	for (int i = 0; i < s->ncolumns; i++)
		if (!s->is_key[i])
			appendStringInfo(&out, ", g.c%d", i + 1);
	StringInfoData folded_cols;
	initStringInfo(&folded_cols);
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < s->ncolumns; i++)
			if (s->is_key[i] == (pass == 0))
				appendStringInfo(&folded_cols, "%sg.c%d", folded_cols.len ? ", " : "", i + 1);
	StringInfoData group_keys;
	initStringInfo(&group_keys);
	for (int i = 0; i < s->ncolumns; i++)
		if (s->is_key[i])
			appendStringInfo(&group_keys, "%sg.c%d", group_keys.len ? ", " : "", i + 1);
	return psprintf("WITH moved AS (DELETE FROM %s l WHERE %s RETURNING %s), "
	                "     grouped AS (SELECT %s FROM moved m GROUP BY %s HAVING %s), "
	                "     folded AS (INSERT INTO %s AS t (%s) SELECT %s FROM grouped g ORDER BY %s "
	                "                ON CONFLICT (%s) DO UPDATE SET %s RETURNING t.ctid, (%s) AS zero%s) "
	                "SELECT (SELECT pg_catalog.count(*) FROM moved), ARRAY(SELECT f.ctid FROM folded f WHERE f.zero)%s "
	                "  FROM (SELECT) one LEFT JOIN (folded f JOIN grouped g ON %s) ON true",
	                log, pending, moved.data, sum_cols.data, keys.data, nonzero.data, QualifiedName(s->table),
	                insert_cols.data, folded_cols.data, group_keys.data, conflict.data, updates.data, zero.data,
	                returning.data, out.data, join.data);
}

char *
ParentRowsStatement(const CounterDef *def)
{
	const char *key = Quoted(get_attname(def->parent, def->parent_key, false));
	return psprintf(
	    "SELECT p.%s::pg_catalog.int8, p FROM %s p WHERE p.%s OPERATOR(pg_catalog.=) ANY ($1) FOR SHARE OF p", key,
	    QualifiedName(def->parent), key);
}

char *
ChildRowsStatement(const CounterDef *def)
{
	const char *key = Quoted(get_attname(def->source, def->child_key, false));
	return psprintf("SELECT c.%s::pg_catalog.int8, c FROM %s c WHERE c.%s OPERATOR(pg_catalog.=) ANY ($1)", key,
	                QualifiedName(def->source), key);
}

char *
DeleteAllStatement(Oid rel)
{
	return psprintf("DELETE FROM %s", QualifiedName(rel));
}

char *
ZeroRowsStatement(const CounterShape *s)
{
	StringInfoData nonzero;
	initStringInfo(&nonzero);
	for (int i = 0; i < s->ncolumns; i++)
		if (!s->is_key[i])
			appendStringInfo(&nonzero, "%st.%s OPERATOR(pg_catalog.<>) 0", nonzero.len ? " OR " : "",
			                 Quoted(s->table_names[i]));
	return psprintf("DELETE FROM %s t WHERE NOT (%s)", QualifiedName(s->table), nonzero.data);
}

char *
DeleteRowsStatement(Oid rel)
{
	return psprintf("DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) ANY ($1)", QualifiedName(rel));
}

char *
RetentionStatement(const CounterShape *s, Oid rel, const char **names)
{
	return psprintf("DELETE FROM %s t WHERE NOT (%s)", QualifiedName(rel),
	                LiveCondition(s, psprintf("t.%s", Quoted(names[s->retention_column]))));
}

/* ---- declaring and switching counters ---- */

char *
DerivedName(const char *base, const char *suffix)
{
	int room = NAMEDATALEN - 1 - (int)strlen(suffix);
	int len = pg_mbcliplen(base, (int)strlen(base), room);
	return psprintf("%.*s%s", len, base, suffix);
}

const char *
ColumnName(const CounterDef *def, int i)
{
	const ColumnDef *cd = &def->columns[i];
	return cd->is_key ? def->keys[cd->index].column_name : def->values[cd->index].column_name;
}

char *
KeyNames(const CounterDef *def)
{
	StringInfoData keys;
	initStringInfo(&keys);
	for (int k = 0; k < def->nkeys; k++)
		appendStringInfo(&keys, "%s%s", k ? ", " : "", Quoted(def->keys[k].column_name));
	return keys.data;
}

char *
CreateViewStatement(const char *schema, const char *view, const char *definition)
{
	return psprintf("CREATE VIEW %s AS %s", quote_qualified_identifier(schema, view), definition);
}

char *
CreateCounterTableStatement(const CounterDef *def, const char *schema, const char *table)
{
	StringInfoData sql;
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE %s (", quote_qualified_identifier(schema, table));
	for (int i = 0; i < def->ncolumns; i++) {
		const ColumnDef *cd = &def->columns[i];
		if (cd->is_key)
			appendStringInfo(&sql, "%s%s %s", i ? ", " : "", Quoted(ColumnName(def, i)),
			                 KeyColumnType(&def->keys[cd->index]));
		else
			appendStringInfo(&sql, "%s%s %s NOT NULL DEFAULT 0", i ? ", " : "", Quoted(ColumnName(def, i)),
			                 def->values[cd->index].accum == AccumKind::Int64 ? "bigint" : "numeric");
	}
	appendStringInfoChar(&sql, ')');
	return sql.data;
}

/*
 * The counter table's key constraint, added once the table is filled (building the index from the sorted rows is
 * faster than inserting each row's entry). Keys that may be NULL group like GROUP BY: one row for NULL.
 */
char *
KeyIndexElement(const char *quoted_column, bool digested)
{
	return digested ? psprintf("(counters.%s(%s))", KEY_DIGEST_NAME, quoted_column) : pstrdup(quoted_column);
}

bool
DigestsKeys(const CounterDef *def)
{
	for (int k = 0; k < def->nkeys; k++)
		if (DigestedKeyType(def->keys[k].type, def->keys[k].typmod, def->keys[k].collation))
			return true;
	return false;
}

char *
CounterKeyStatement(const CounterDef *def, Oid table, bool all_keys_not_null, bool digest)
{
	if (!digest || !DigestsKeys(def))
		return psprintf("ALTER TABLE %s ADD %s (%s)", QualifiedName(table),
		                all_keys_not_null ? "PRIMARY KEY" : "UNIQUE NULLS NOT DISTINCT", KeyNames(def));
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
		const char *col = Quoted(key->column_name);
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
		appendStringInfo(&cond, "%sCOALESCE(%s.%s, 0) OPERATOR(pg_catalog.<>) 0", v ? " OR " : "", alias,
		                 Quoted(def->values[v].column_name));
	return cond.data;
}

} // namespace

char *
FillStatement(const CounterDef *def, Oid table, Oid view)
{
	StringInfoData values, value_list;
	initStringInfo(&values);
	initStringInfo(&value_list);
	for (int v = 0; v < def->nvalues; v++) {
		const char *col = Quoted(def->values[v].column_name);
		appendStringInfo(&value_list, "%s%s", v ? ", " : "", col);
		appendStringInfo(&values, "%sCOALESCE(q.%s, 0)", v ? ", " : "", col);
	}
	StringInfoData keys;
	initStringInfo(&keys);
	for (int k = 0; k < def->nkeys; k++)
		appendStringInfo(&keys, "%sq.%s", k ? ", " : "", Quoted(def->keys[k].column_name));
	return psprintf("INSERT INTO %s (%s, %s) SELECT %s, %s FROM %s q WHERE %s", QualifiedName(table), KeyNames(def),
	                value_list.data, keys.data, values.data, QualifiedName(view), NonzeroCondition(def, "q"));
}

char *
ZeroTargetStatement(const CounterDef *def, Oid target)
{
	StringInfoData sets;
	initStringInfo(&sets);
	for (int v = 0; v < def->nvalues; v++)
		appendStringInfo(&sets, "%s%s = 0", v ? ", " : "", Quoted(def->values[v].column_name));
	return psprintf("UPDATE %s SET %s", QualifiedName(target), sets.data);
}

char *
FillTargetStatement(const CounterDef *def, Oid target, Oid view)
{
	StringInfoData sets, join;
	initStringInfo(&sets);
	initStringInfo(&join);
	for (int v = 0; v < def->nvalues; v++) {
		const char *col = Quoted(def->values[v].column_name);
		appendStringInfo(&sets, "%s%s = COALESCE(q.%s, 0)", v ? ", " : "", col, col);
	}
	/* keys compared as they are: the target's key columns have the definition's key types */
	for (int k = 0; k < def->nkeys; k++) {
		const char *col = Quoted(def->keys[k].column_name);
		appendStringInfo(&join, "%st.%s OPERATOR(pg_catalog.=) q.%s", k ? " AND " : "", col, col);
	}
	return psprintf("UPDATE %s t SET %s FROM %s q WHERE %s", QualifiedName(target), sets.data, QualifiedName(view),
	                join.data);
}

char *
ReplicaIdentityFullStatement(Oid rel)
{
	return psprintf("ALTER TABLE %s REPLICA IDENTITY FULL", QualifiedName(rel));
}

char *
RenameStatement(Oid rel, const char *name)
{
	return psprintf("ALTER TABLE %s RENAME TO %s", QualifiedName(rel), Quoted(name));
}

char *
CreateLikeStatement(const char *schema, const char *name, Oid like)
{
	return psprintf("CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS)", quote_qualified_identifier(schema, name),
	                QualifiedName(like));
}

namespace {

/* The key columns (index: as the totals' key index has them, a long key by its digest). */
char *
ShapeKeys(const CounterShape *s, bool index = false)
{
	StringInfoData keys;
	initStringInfo(&keys);
	for (int i = 0; i < s->ncolumns; i++)
		if (s->is_key[i])
			appendStringInfo(
			    &keys, "%s%s", keys.len ? ", " : "",
			    KeyIndexElement(Quoted(s->table_names[i]), index && s->digested != nullptr && s->digested[i]));
	return keys.data;
}

} // namespace

char *
LogIndexStatement(const CounterShape *s, Oid log)
{
	/*
	 * One index, for readers of a key or a range (the log takes every write): the keys, or where the totals have a
	 * key by its digest, the others (a digest has no range, and the log is read by few), else a hash of the first.
	 */
	if (s->digested == nullptr)
		return psprintf("CREATE INDEX ON %s (%s)", QualifiedName(log), ShapeKeys(s));
	StringInfoData plain;
	initStringInfo(&plain);
	const char *first = nullptr;
	for (int i = 0; i < s->ncolumns; i++)
		if (s->is_key[i] && !s->digested[i])
			appendStringInfo(&plain, "%s%s", plain.len ? ", " : "", Quoted(s->table_names[i]));
		else if (s->is_key[i] && first == nullptr)
			first = Quoted(s->table_names[i]);
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
SlotKeyStatement(const CounterShape *s, Oid log)
{
	bool nullable = false;
	for (int i = 0; i < s->ncolumns; i++)
		if (s->is_key[i]) {
			HeapTuple tup = SearchSysCacheAttName(s->table, s->table_names[i]);
			if (HeapTupleIsValid(tup)) {
				nullable |= !((Form_pg_attribute)GETSTRUCT(tup))->attnotnull;
				ReleaseSysCache(tup);
			}
		}
	/* (a key by its digest is an expression: a unique index, not a constraint) */
	if (s->digested != nullptr)
		return psprintf("CREATE UNIQUE INDEX ON %s (%s, counters_slot)%s", QualifiedName(log), ShapeKeys(s, true),
		                nullable ? " NULLS NOT DISTINCT" : "");
	return psprintf("ALTER TABLE %s ADD UNIQUE %s (%s, counters_slot)", QualifiedName(log),
	                nullable ? "NULLS NOT DISTINCT" : "", ShapeKeys(s));
}

char *
PendingViewStatement(const CounterShape *s, const char *schema, const char *name, Oid totals, Oid log)
{
	StringInfoData select, cols, nonzero;
	initStringInfo(&select);
	initStringInfo(&cols);
	initStringInfo(&nonzero);
	for (int i = 0; i < s->ncolumns; i++) {
		const char *col = Quoted(s->table_names[i]);
		appendStringInfo(&cols, "%s%s", i ? ", " : "", col);
		/* the view's columns in the counter table's order (keys and values interleaved as declared) */
		if (s->is_key[i])
			appendStringInfo(&select, "%s%s", i ? ", " : "", col);
		else {
			Oid type;
			int32 typmod;
			Oid collation;
			get_atttypetypmodcoll(totals, get_attnum(totals, s->table_names[i]), &type, &typmod, &collation);
			appendStringInfo(&select, "%spg_catalog.sum(%s)::%s AS %s", i ? ", " : "", col,
			                 format_type_with_typemod(type, typmod), col);
			appendStringInfo(&nonzero, "%spg_catalog.sum(%s) OPERATOR(pg_catalog.<>) 0", nonzero.len ? " OR " : "",
			                 col);
		}
	}
	return psprintf("CREATE VIEW %s AS SELECT %s FROM (SELECT %s FROM %s UNION ALL SELECT %s FROM %s) u "
	                "GROUP BY %s HAVING %s",
	                quote_qualified_identifier(schema, name), select.data, cols.data, QualifiedName(totals), cols.data,
	                QualifiedName(log), ShapeKeys(s), nonzero.data);
}

char *
GrantSelectStatement(Oid rel, Oid grantee)
{
	return psprintf("GRANT SELECT ON %s TO %s", QualifiedName(rel),
	                grantee == ACL_ID_PUBLIC ? "PUBLIC" : Quoted(GetUserNameFromId(grantee, false)));
}

char *
DropStatement(const char *kind, Oid rel, bool if_exists)
{
	return psprintf("DROP %s %s%s", kind, if_exists ? "IF EXISTS " : "", QualifiedName(rel));
}

char *
RenameViewColumnStatement(Oid view, const char *from, const char *to)
{
	return psprintf("ALTER VIEW %s RENAME COLUMN %s TO %s", QualifiedName(view), Quoted(from), Quoted(to));
}

/* ---- the capture triggers ---- */

const char *
CaptureTriggerName(int trigger)
{
	/*
	 * (The sink trigger returns NULL: the BEFORE INSERT row triggers named after it do not fire. "zz_" puts it after
	 * any other trigger whose name starts with a letter before z, a digit, an upper case letter or "_".)
	 */
	static const char *const names[] = {"counters_begin",      "counters_insert",   "counters_update",
	                                    "counters_delete",     "counters_truncate", "zz_counters_sink",
	                                    "counters_sink_guard", "counters_sink_end"};
	static_assert(lengthof(names) == CAPTURE_TRIGGERS, "a name for every capture trigger");
	return names[trigger];
}

char *
CreateTriggerStatement(int trigger, Oid rel, bool is_source)
{
	const char *on = QualifiedName(rel);
	const char *name = CaptureTriggerName(trigger);
	const char *call = "FOR EACH STATEMENT EXECUTE FUNCTION counters.capture()";
	switch (trigger) {
	case BEGIN_TRIGGER:
		return psprintf("CREATE TRIGGER %s BEFORE INSERT OR UPDATE OR DELETE ON %s %s", name, on, call);
	case INSERT_TRIGGER:
		return psprintf("CREATE TRIGGER %s AFTER INSERT ON %s REFERENCING NEW TABLE AS counters_new %s", name, on,
		                call);
	case UPDATE_TRIGGER:
		return psprintf("CREATE TRIGGER %s AFTER UPDATE ON %s REFERENCING OLD TABLE AS counters_old "
		                "NEW TABLE AS counters_new %s",
		                name, on, call);
	case DELETE_TRIGGER:
		return psprintf("CREATE TRIGGER %s AFTER DELETE ON %s REFERENCING OLD TABLE AS counters_old %s", name, on,
		                call);
	case SINK_TRIGGER:
		return psprintf("CREATE TRIGGER %s BEFORE INSERT ON %s FOR EACH ROW EXECUTE FUNCTION counters.capture()", name,
		                on);
	case SINK_GUARD_TRIGGER:
		return psprintf("CREATE TRIGGER %s BEFORE UPDATE OR DELETE ON %s %s", name, on, call);
	case SINK_END_TRIGGER:
		return psprintf("CREATE TRIGGER %s AFTER INSERT ON %s %s", name, on, call);
	default:
		/* TRUNCATE: the whole source is emptied in one go; a leaf partition's rows are subtracted before. */
		return psprintf("CREATE TRIGGER %s %s TRUNCATE ON %s %s", name, is_source ? "AFTER" : "BEFORE", on, call);
	}
}

const char *
ParentTriggerName(int trigger)
{
	static const char *const names[] = {"counters_parent_begin", "counters_parent_row", "counters_parent_insert",
	                                    "counters_parent_truncate"};
	static_assert(lengthof(names) == PARENT_TRIGGERS, "a name for every parent trigger");
	return names[trigger];
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
	default:
		return psprintf("CREATE TRIGGER %s AFTER TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION counters.capture()",
		                name, on);
	}
}

char *
DropTriggerStatement(int trigger, Oid rel)
{
	return psprintf("DROP TRIGGER %s ON %s", CaptureTriggerName(trigger), QualifiedName(rel));
}

/* The trigger on a counter's own tables that refuses their TRUNCATE (GuardCounterRelation). */
const char *const guard_trigger = "counters_guard";

/* CREATE TRIGGER counters_guard BEFORE TRUNCATE ON public.blog_posts FOR EACH STATEMENT EXECUTE ... */
char *
CreateGuardTriggerStatement(Oid rel)
{
	return psprintf("CREATE TRIGGER %s BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION counters.capture()",
	                guard_trigger, QualifiedName(rel));
}

/* The trigger on an existing table that keeps counter-cache columns: its rows' keys changing (see TargetKeyRow). */
const char *const target_key_trigger = "counters_target_key";

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
		appendStringInfo(&cols, "%s%s", cols.len ? ", " : "", Quoted((const char *)lfirst(lc)));
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
KeyRecountStatement(const CounterDef *def, Oid view, Oid target)
{
	StringInfoData values, match;
	initStringInfo(&values);
	initStringInfo(&match);
	for (int v = 0; v < def->nvalues; v++) {
		const char *column = def->values[v].column_name;
		AttrNumber attnum = get_attnum(target, column);
		appendStringInfo(&values, "%sCOALESCE(pg_catalog.sum(d.%s), 0)::%s", v ? ", " : "", Quoted(column),
		                 format_type_extended(get_atttype(target, attnum), -1, FORMAT_TYPE_FORCE_QUALIFY));
	}
	for (int k = 0; k < def->nkeys; k++)
		appendStringInfo(&match, "%sd.%s IS NOT DISTINCT FROM $%d", k ? " AND " : "", Quoted(def->keys[k].column_name),
		                 k + 1);
	return psprintf("SELECT %s FROM %s d WHERE %s", values.data, QualifiedName(view), match.data);
}

/* ---- bounds and top() ---- */

char *
BoundsViolation(const char *column, Datum min, bool min_null, Datum max, bool max_null)
{
	StringInfoData cond;
	initStringInfo(&cond);
	if (!min_null)
		appendStringInfo(&cond, "%s < %s", Quoted(column),
		                 quote_literal_cstr(DatumGetCString(DirectFunctionCall1(numeric_out, min))));
	if (!max_null)
		appendStringInfo(&cond, "%s%s > %s", cond.len ? " OR " : "", Quoted(column),
		                 quote_literal_cstr(DatumGetCString(DirectFunctionCall1(numeric_out, max))));
	return cond.data;
}

char *
CountWhereStatement(Oid rel, const char *condition)
{
	return psprintf("SELECT pg_catalog.count(*) FROM %s WHERE %s", QualifiedName(rel), condition);
}

char *
KeyFilterCheckStatement(const CounterShape *s, const char *filter)
{
	return psprintf("SELECT 1 FROM (SELECT %s FROM %s LIMIT 0) x WHERE (%s)", KeyColumnList(s), QualifiedName(s->table),
	                filter);
}

namespace {

/*
 * The select list of a typed top() in log or sharded mode: the columns of `rowtype` (the counter's view) in order,
 * each key as grouped and each value summed over the totals and pending rows, in the type the view gives it.
 */
char *
TopRowColumns(const CounterShape *s, TupleDesc rowtype)
{
	StringInfoData cols;
	initStringInfo(&cols);
	bool first = true;
	for (int a = 0; a < rowtype->natts; a++) {
		Form_pg_attribute att = TupleDescAttr(rowtype, a);
		if (att->attisdropped)
			continue;
		Sep(&cols, &first);
		const char *type =
		    format_type_extended(att->atttypid, att->atttypmod, FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY);
		int i = 0;
		while (i < s->ncolumns && strcmp(s->read_names[i], NameStr(att->attname)) != 0)
			i++;
		if (i == s->ncolumns)
			appendStringInfo(&cols, "NULL::%s", type);
		else if (s->is_key[i])
			appendStringInfoString(&cols, Quoted(s->table_names[i]));
		else
			appendStringInfo(&cols, "pg_catalog.sum(%s)::%s", Quoted(s->table_names[i]), type);
	}
	return cols.data;
}

} // namespace

char *
TopStatement(const CounterShape *s, int col, const char *limit, const char *filter, TupleDesc rowtype)
{
	const char *cond = filter ? psprintf("(%s)", filter) : "true";
	const char *value = Quoted(s->table_names[col]);
	StringInfoData keys, match, null_match, any_null, nonzero, xcols;
	initStringInfo(&keys);
	initStringInfo(&match);
	initStringInfo(&null_match);
	initStringInfo(&any_null);
	initStringInfo(&nonzero);
	initStringInfo(&xcols);
	for (int i = 0; i < s->ncolumns; i++) {
		const char *c = Quoted(s->table_names[i]);
		appendStringInfo(&xcols, "%sx.%s", i ? ", " : "", c);
		if (s->is_key[i]) {
			bool first = keys.len == 0;
			appendStringInfo(&keys, "%s%s", first ? "" : ", ", c);
			appendStringInfo(&match, "%sx.%s OPERATOR(pg_catalog.=) p.%s", first ? "" : " AND ", c, c);
			appendStringInfo(&null_match, "%sx.%s IS NOT DISTINCT FROM p.%s", first ? "" : " AND ", c, c);
			appendStringInfo(&any_null, "%sx.%s IS NULL", first ? "" : " OR ", c);
		} else
			/* a key is present when some value is nonzero, as in the counter's view */
			appendStringInfo(&nonzero, "%spg_catalog.sum(%s) OPERATOR(pg_catalog.<>) 0", nonzero.len ? " OR " : "", c);
	}
	if (s->e->mode == Mode::Exact) {
		const char *target = QualifiedName(s->e->target);
		/*
		 * typed: the whole rows of the table, in its type (dropped columns left out: the caller skips them); else the
		 * key columns and the value (the caller renders the key as the counter's owner)
		 */
		const char *select =
		    rowtype ? psprintf("%s.*", target) : psprintf("%s, %s::pg_catalog.numeric", keys.data, value);
		return psprintf("SELECT %s FROM %s WHERE %s ORDER BY %s DESC, %s LIMIT %s", select, target, cond, value,
		                keys.data, limit);
	}
	/*
	 * The top k + m keys of the totals (an index on the column makes that an index scan) plus the m keys that have
	 * pending deltas: any key without pending deltas is exact in the totals, so these contain the true top k.
	 */
	const char *totals = QualifiedName(s->e->totals);
	const char *log = QualifiedName(s->e->log);
	return psprintf("WITH pending AS MATERIALIZED (SELECT DISTINCT %s FROM %s WHERE %s), "
	                "     candidates AS MATERIALIZED ( "
	                "         (SELECT %s FROM %s WHERE %s ORDER BY %s DESC, %s LIMIT %s + (SELECT pg_catalog.count(*) "
	                "FROM pending)) "
	                "         UNION SELECT * FROM pending) "
	                "SELECT %s "
	                "  FROM (SELECT %s FROM %s x JOIN candidates p ON %s "
	                "        UNION ALL SELECT %s FROM %s x JOIN candidates p ON %s "
	                "        UNION ALL SELECT %s FROM %s x JOIN candidates p ON %s WHERE %s "
	                "        UNION ALL SELECT %s FROM %s x JOIN candidates p ON %s WHERE %s) u "
	                " GROUP BY %s HAVING %s ORDER BY %s DESC, %s LIMIT %s",
	                keys.data, log, cond, keys.data, totals, cond, value, keys.data, limit,
	                rowtype ? TopRowColumns(s, rowtype) : psprintf("%s, pg_catalog.sum(%s)", keys.data, value),
	                xcols.data, totals, match.data, xcols.data, log, match.data, xcols.data, totals, null_match.data,
	                any_null.data, xcols.data, log, null_match.data, any_null.data, keys.data, nonzero.data,
	                rowtype ? psprintf("pg_catalog.sum(%s)", value) : psprintf("%d", s->def->nkeys + 1), keys.data,
	                limit);
}

/* ---- applying deltas (prepared once per counter by cache.cpp) ---- */

namespace {

void
AppendColumns(StringInfo sql, const CompiledCounter *c, bool keys, bool values, const char *prefix = "")
{
	bool first = true;
	for (int i = 0; keys && i < c->def->nkeys; i++) {
		Sep(sql, &first);
		appendStringInfo(sql, "%s%s", prefix, Quoted(c->key_columns[i]));
	}
	for (int i = 0; values && i < c->def->nvalues; i++) {
		Sep(sql, &first);
		appendStringInfo(sql, "%s%s", prefix, Quoted(c->value_columns[i]));
	}
}

/* $1, $2, ... $n, or (bulk) the arrays read in step: unnest() in the target list keeps a composite element whole. */
void
AppendParams(StringInfo sql, int n, bool bulk)
{
	for (int i = 1; i <= n; i++)
		appendStringInfo(sql, bulk ? "%spg_catalog.unnest($%d)" : "%s$%d", i > 1 ? ", " : "", i);
}

/* RETURNING the row's ctid, whether every value is now zero, the new values, then the keys (for bounds). */
void
AppendReturning(StringInfo sql, const CompiledCounter *c)
{
	appendStringInfoString(sql, " RETURNING c.ctid, ");
	for (int i = 0; i < c->def->nvalues; i++)
		appendStringInfo(sql, "%sc.%s OPERATOR(pg_catalog.=) 0", i ? " AND " : "", Quoted(c->value_columns[i]));
	appendStringInfoString(sql, ", ");
	AppendColumns(sql, c, false, true, "c.");
	appendStringInfoString(sql, ", ");
	AppendColumns(sql, c, true, false, "c.");
}

/* SET v = <row>.v + $n for every value column */
void
AppendAdditions(StringInfo sql, const CompiledCounter *c, const char *row, bool coalesce, bool excluded)
{
	for (int i = 0; i < c->def->nvalues; i++) {
		const char *col = Quoted(c->value_columns[i]);
		appendStringInfo(sql, "%s%s = %s%s.%s%s OPERATOR(pg_catalog.+) ", i ? ", " : "", col,
		                 coalesce ? "COALESCE(" : "", row, col, coalesce ? ", 0)" : "");
		if (excluded)
			appendStringInfo(sql, "EXCLUDED.%s", col);
		else
			appendStringInfo(sql, "$%d", c->def->nkeys + i + 1);
	}
}

/*
 * INSERT ... ON CONFLICT DO UPDATE adds the deltas to an existing row or creates it; RETURNING tells whether every
 * value came back to zero, so that the row is deleted by ctid (its lock is held). Sharded mode inserts the slot
 * number too (the last parameter) and conflicts on (keys, slot).
 */
char *
UpsertStatement(const CompiledCounter *c, bool bulk, const char *slot)
{
	StringInfoData sql;
	initStringInfo(&sql);
	int nparams = c->def->nkeys + c->def->nvalues + (slot ? 1 : 0);
	appendStringInfo(&sql, "INSERT INTO %s AS c (", QualifiedName(c->write_rel));
	AppendColumns(&sql, c, true, true);
	if (slot)
		appendStringInfo(&sql, ", %s", slot);
	appendStringInfoString(&sql, bulk ? ") SELECT " : ") VALUES (");
	AppendParams(&sql, nparams, bulk);
	appendStringInfoString(&sql, bulk ? " ON CONFLICT (" : ") ON CONFLICT (");
	StringInfoData exact;
	initStringInfo(&exact);
	for (int i = 0; i < c->def->nkeys; i++) {
		bool digested = c->key_digested != nullptr && c->key_digested[i];
		const char *col = Quoted(c->key_columns[i]);
		appendStringInfo(&sql, "%s%s", i ? ", " : "", KeyIndexElement(col, digested));
		/* (a row found by a key's digest is that key's: compared exactly, or no row is written and the caller fails) */
		if (digested)
			appendStringInfo(&exact, "%sc.%s IS NOT DISTINCT FROM EXCLUDED.%s", exact.len ? " AND " : " WHERE ", col,
			                 col);
	}
	if (slot)
		appendStringInfo(&sql, ", %s", slot);
	appendStringInfoString(&sql, ") DO UPDATE SET ");
	AppendAdditions(&sql, c, "c", false, true);
	appendStringInfoString(&sql, exact.data);
	AppendReturning(&sql, c);
	return sql.data;
}

/* counters.set_touch: the target's timestamp column takes the transaction's start time with the new values. */
void
AppendTouch(StringInfo sql, const CompiledCounter *c)
{
	if (c->touch_column != nullptr)
		appendStringInfo(sql, ", %s = pg_catalog.transaction_timestamp()", Quoted(c->touch_column));
}

/*
 * Counter-cache columns of an existing table: add to the rows of the key (rows that do not exist are not created).
 * The key is compared as it is, never cast to the column's type: a cast to a narrower type (varchar(3), integer)
 * would fold different keys into one row. Declarations require the column to have the key's type; a counter
 * declared before that rule compares across types as PostgreSQL's own operators do.
 */
char *
TargetUpdateStatement(const CompiledCounter *c)
{
	const CounterDef *def = c->def;
	StringInfoData sql;
	initStringInfo(&sql);
	appendStringInfo(&sql, "UPDATE %s AS c SET ", QualifiedName(c->write_rel));
	AppendAdditions(&sql, c, "c", true, false);
	AppendTouch(&sql, c);
	appendStringInfoString(&sql, " WHERE ");
	for (int i = 0; i < def->nkeys; i++) {
		AttrNumber attnum = get_attnum(c->write_rel, c->key_columns[i]);
		if (attnum == InvalidAttrNumber)
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
			                errmsg("counter \"%s\": target table %s has no column %s", def->name,
			                       QualifiedName(c->write_rel), Quoted(c->key_columns[i]))));
		Oid type = getBaseType(get_atttype(c->write_rel, attnum));
		if (i > 0)
			appendStringInfoString(&sql, " AND ");
		const char *column = psprintf("c.%s", Quoted(c->key_columns[i]));
		const char *param = psprintf("$%d", i + 1);
		if (type != getBaseType(def->keys[i].type)) {
			appendStringInfo(&sql, "%s OPERATOR(pg_catalog.=) %s", column, param);
			continue;
		}
		TypeCacheEntry *tc = lookup_type_cache(type, TYPECACHE_EQ_OPR);
		if (!OidIsValid(tc->eq_opr))
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
			                errmsg("counter \"%s\": key column %s of %s has no equality operator", def->name,
			                       Quoted(c->key_columns[i]), QualifiedName(c->write_rel))));
		generate_operator_clause(&sql, column, type, tc->eq_opr, param, def->keys[i].type);
	}
	appendStringInfoString(&sql, " RETURNING ");
	AppendColumns(&sql, c, false, true, "c.");
	return sql.data;
}

/* TRUNCATE of a source: empty the counter table, the log (or slots) and totals, or zero the counter-cache columns. */
char *
TruncateStatement(const CompiledCounter *c)
{
	const char *rel = QualifiedName(c->write_rel);
	switch (c->mode) {
	case ApplyMode::Exact:
		return psprintf("DELETE FROM %s", rel);
	case ApplyMode::Target: {
		StringInfoData sql;
		initStringInfo(&sql);
		appendStringInfo(&sql, "UPDATE %s SET ", rel);
		for (int i = 0; i < c->def->nvalues; i++)
			appendStringInfo(&sql, "%s%s = 0", i ? ", " : "", Quoted(c->value_columns[i]));
		AppendTouch(&sql, c);
		appendStringInfoString(&sql, " WHERE ");
		for (int i = 0; i < c->def->nvalues; i++)
			appendStringInfo(&sql, "%s%s IS DISTINCT FROM 0", i ? " OR " : "", Quoted(c->value_columns[i]));
		return sql.data;
	}
	default:
		return psprintf("WITH l AS (DELETE FROM %s) DELETE FROM %s", rel, QualifiedName(c->totals));
	}
}

} // namespace

PlanStatement
ApplyStatement(const CompiledCounter *c, Plan plan)
{
	const CounterDef *def = c->def;
	int nparams = def->nkeys + def->nvalues;
	PlanStatement st = {nullptr, nparams, (Oid *)palloc(sizeof(Oid) * (nparams + 1))};
	for (int i = 0; i < def->nkeys; i++)
		st.argtypes[i] = def->keys[i].type;
	for (int i = 0; i < def->nvalues; i++)
		st.argtypes[def->nkeys + i] = def->values[i].accum == AccumKind::Int64 ? INT8OID : NUMERICOID;
	const char *rel = QualifiedName(c->write_rel);
	bool exact = c->mode == ApplyMode::Exact;
	switch (plan) {
	case PLAN_APPLY:
		if (c->mode == ApplyMode::Log) {
			/* Log mode: append the statement's summed deltas; no counter row is locked, nothing can conflict. */
			StringInfoData sql;
			initStringInfo(&sql);
			appendStringInfo(&sql, "INSERT INTO %s (", rel);
			AppendColumns(&sql, c, true, true);
			appendStringInfoString(&sql, ") VALUES (");
			AppendParams(&sql, nparams, false);
			appendStringInfoChar(&sql, ')');
			st.sql = sql.data;
		} else if (c->mode == ApplyMode::Sharded) {
			st.argtypes[st.nargs++] = INT4OID;
			st.sql = UpsertStatement(c, false, Quoted(get_attname(c->write_rel, c->slot_attnum, false)));
		} else if (exact)
			st.sql = UpsertStatement(c, false, nullptr);
		else
			st.sql = TargetUpdateStatement(c);
		break;
	case PLAN_BULK:
		/* Many keys at once, fed by one array per column, read in step: rows are still locked in sorted key order. */
		for (int i = 0; i < nparams; i++) {
			st.argtypes[i] = get_array_type(st.argtypes[i]);
			if (!OidIsValid(st.argtypes[i]))
				return st;
		}
		if (c->mode == ApplyMode::Log) {
			StringInfoData sql;
			initStringInfo(&sql);
			appendStringInfo(&sql, "INSERT INTO %s (", rel);
			AppendColumns(&sql, c, true, true);
			appendStringInfoString(&sql, ") SELECT ");
			AppendParams(&sql, nparams, true);
			st.sql = sql.data;
		} else if (exact)
			st.sql = UpsertStatement(c, true, nullptr);
		break;
	case PLAN_UPDATE:
		/*
		 * A CHECK constraint on the counter table holds for the row the upsert proposes (the delta alone) before it
		 * finds the existing row: a decrement would fail it. An existing row is updated first, then.
		 */
		if (exact && c->has_check) {
			StringInfoData sql;
			initStringInfo(&sql);
			appendStringInfo(&sql, "UPDATE %s AS c SET ", rel);
			AppendAdditions(&sql, c, "c", false, false);
			appendStringInfoString(&sql, " WHERE ");
			for (int i = 0; i < def->nkeys; i++)
				appendStringInfo(&sql, "%sc.%s IS NOT DISTINCT FROM $%d", i ? " AND " : "", Quoted(c->key_columns[i]),
				                 i + 1);
			AppendReturning(&sql, c);
			st.sql = sql.data;
		}
		break;
	case PLAN_DELETE:
		st.nargs = 1;
		st.argtypes[0] = TIDOID;
		if (exact || c->mode == ApplyMode::Sharded)
			st.sql = psprintf("DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) $1", rel);
		break;
	case PLAN_BULK_DELETE:
		st.nargs = 1;
		st.argtypes[0] = TIDARRAYOID;
		if (exact)
			st.sql = psprintf("DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) ANY ($1)", rel);
		break;
	case PLAN_TRUNCATE:
		st.nargs = 0;
		st.sql = TruncateStatement(c);
		break;
	case NUM_PLANS:
		break;
	}
	return st;
}

/* ---- window thresholds ---- */

char *
WindowSumsStatement(const CompiledCounter *c, int bucket, const WindowConfig *w, bool written)
{
	const CounterDef *def = c->def;
	const char *table = QualifiedName(c->write_rel);
	/* the prefix: the key columns but the bucket, of the counter's rows (t) or of the prefixes written (w) */
	StringInfoData t_object, w_object, t_prefix, names, match, params, sums, changed;
	initStringInfo(&t_object);
	initStringInfo(&w_object);
	initStringInfo(&t_prefix);
	initStringInfo(&names);
	initStringInfo(&match);
	initStringInfo(&params);
	initStringInfo(&sums);
	initStringInfo(&changed);
	int p = 0;
	for (int k = 0; k < def->nkeys; k++) {
		if (k == bucket)
			continue;
		const char *col = Quoted(c->key_columns[k]);
		const char *sep = p++ ? ", " : "";
		appendStringInfo(&t_object, "%s%s, t.%s", sep, quote_literal_cstr(c->key_columns[k]), col);
		appendStringInfo(&w_object, "%s%s, w.%s", sep, quote_literal_cstr(c->key_columns[k]), col);
		appendStringInfo(&t_prefix, "%st.%s", sep, col);
		appendStringInfo(&params, "%spg_catalog.unnest($%d)", sep, p);
		appendStringInfo(&names, "%s%s", sep, col);
		/* (no IS NOT DISTINCT FROM, which no index can serve: = where the key cannot be NULL, else = or both NULL) */
		if (def->keys[k].not_null)
			appendStringInfo(&match, " AND t.%s OPERATOR(pg_catalog.=) w.%s", col, col);
		else
			appendStringInfo(&match, " AND (t.%s OPERATOR(pg_catalog.=) w.%s OR (t.%s IS NULL AND w.%s IS NULL))", col,
			                 col, col, col);
	}
	for (int i = 0; i < w->ncolumns; i++) {
		appendStringInfo(&sums, ", COALESCE(pg_catalog.sum(t.%s), 0)::pg_catalog.numeric AS s%d", Quoted(w->columns[i]),
		                 i);
		/*
		 * (written: per column, from $p+2, its name and thresholds. A prefix is returned when a threshold's state would
		 * change: reached and not recorded, or recorded and not reached. OFFSET 0 keeps the lookup of the state one
		 * index probe per prefix: hashed, it would read every crossing recorded for the column, per statement.)
		 */
		appendStringInfo(
		    &changed,
		    "%sEXISTS (SELECT FROM pg_catalog.unnest($%d::pg_catalog.numeric[]) th(th) "
		    "WHERE (x.s%d OPERATOR(pg_catalog.>=) th.th) IS DISTINCT FROM EXISTS (SELECT FROM "
		    "%s r WHERE r.column_name OPERATOR(pg_catalog.=) $%d "
		    "AND counters.%s(r.prefix::pg_catalog.text) OPERATOR(pg_catalog.=) counters.%s(x.prefix::pg_catalog.text) "
		    "AND r.prefix OPERATOR(pg_catalog.=) x.prefix AND r.threshold OPERATOR(pg_catalog.=) th.th OFFSET 0))",
		    i ? " OR " : "", p + 3 + 2 * i, i, QualifiedName(w->crossings), p + 2 + 2 * i, KEY_DIGEST_NAME,
		    KEY_DIGEST_NAME);
	}
	/* The window: buckets later than now() - width, compared in the bucket's type. */
	char *window =
	    psprintf("t.%s OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) "
	             "$%d::pg_catalog.interval)::%s",
	             Quoted(c->key_columns[bucket]), written ? p + 1 : 1, format_type_be_qualified(def->keys[bucket].type));
	char *sums_query;
	if (p == 0) /* (no key but the bucket: one window) */
		sums_query = psprintf("SELECT '{}'::pg_catalog.jsonb AS prefix%s FROM %s t WHERE %s", sums.data, table, window);
	else if (!written)
		sums_query = psprintf("SELECT pg_catalog.jsonb_build_object(%s) AS prefix%s FROM %s t WHERE %s GROUP BY %s",
		                      t_object.data, sums.data, table, window, t_prefix.data);
	else {
		/*
		 * The prefixes written, each once, with the sums of its window (a NULL key matches a NULL key): one index range
		 * scan per prefix, whatever the generic plan's estimates.
		 */
		StringInfoData columns;
		initStringInfo(&columns);
		for (int i = 0; i < w->ncolumns; i++)
			appendStringInfo(&columns,
			                 ", (SELECT COALESCE(pg_catalog.sum(t.%s), 0)::pg_catalog.numeric FROM %s t WHERE %s%s) "
			                 "AS s%d",
			                 Quoted(w->columns[i]), table, window, match.data, i);
		sums_query = psprintf("SELECT pg_catalog.jsonb_build_object(%s) AS prefix%s "
		                      "  FROM (SELECT DISTINCT * FROM ROWS FROM (%s) AS w(%s)) w",
		                      w_object.data, columns.data, params.data, names.data);
	}
	if (!written)
		return sums_query;
	/* (OFFSET 0: each sum computed once, not once per threshold) */
	return psprintf("SELECT x.* FROM (%s OFFSET 0) x WHERE %s", sums_query, changed.data);
}

char *
WindowStateStatement(Oid crossings)
{
	/*
	 * $1 column, $2 prefixes (jsonb[]) and $3 their window sums, $4 thresholds, $5 whether every prefix is in $2 (a
	 * prefix with a crossing recorded but absent has a sum of 0). Returns up, prefix, new, threshold.
	 */
	const char *table = QualifiedName(crossings);
	return psprintf(
	    "WITH t AS (SELECT p.prefix, p.s, th.th FROM ROWS FROM (pg_catalog.unnest($2::pg_catalog.jsonb[]), "
	    "             pg_catalog.unnest($3::pg_catalog.numeric[])) AS p(prefix, s), "
	    "             pg_catalog.unnest($4::pg_catalog.numeric[]) AS th(th)), "
	    "     ups AS (INSERT INTO %s AS x (column_name, prefix, threshold) "
	    "             SELECT $1, t.prefix, t.th FROM t WHERE t.s OPERATOR(pg_catalog.>=) t.th "
	    "             ON CONFLICT DO NOTHING RETURNING x.prefix, x.threshold), "
	    "     downs AS (DELETE FROM %s x WHERE x.column_name OPERATOR(pg_catalog.=) $1 "
	    "                  AND (EXISTS (SELECT FROM t WHERE t.prefix OPERATOR(pg_catalog.=) x.prefix "
	    "                                AND t.th OPERATOR(pg_catalog.=) x.threshold "
	    "                                AND t.s OPERATOR(pg_catalog.<) t.th) "
	    "                       OR ($5 AND NOT EXISTS (SELECT FROM t WHERE t.prefix OPERATOR(pg_catalog.=) x.prefix))) "
	    "               RETURNING x.prefix, x.threshold), "
	    "     c AS (SELECT true AS up, u.prefix, u.threshold, "
	    "                  (SELECT t.s FROM t WHERE t.prefix OPERATOR(pg_catalog.=) u.prefix LIMIT 1) AS s FROM ups u "
	    "           UNION ALL "
	    "           SELECT false, d.prefix, d.threshold, "
	    "                  COALESCE((SELECT t.s FROM t WHERE t.prefix OPERATOR(pg_catalog.=) d.prefix LIMIT 1), 0) "
	    "             FROM downs d) "
	    "SELECT c.up, c.prefix, c.s, c.threshold "
	    "  FROM c ORDER BY c.prefix, c.threshold",
	    table, table);
}

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
