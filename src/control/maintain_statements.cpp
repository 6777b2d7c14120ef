/*
 * maintain_statements.cpp: the statements of maintenance -- verify, rebuild, compact, retention -- and of bounds and
 * top().
 * Every name is quoted and schema-qualified, every operator written OPERATOR(pg_catalog.x) or generated for its
 * types; values travel as parameters; the statements run with search_path pinned as well. Inside a maintenance
 * statement the counter's columns travel under positional aliases (k<n> for keys, s<n>/e<n>/v<n> for values, n = the
 * column's position in the definition), so that no column name of a counter can collide with another once prefixed, nor
 * with a name the statement uses itself.
 */
#include "control/control.hpp"

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

/* Column `i` of counter `e` (definition order), when it keeps min() or max(); else NULL. */
const ValueDef *
ExtremeOfColumn(const Counter *e, int i)
{
	const CounterDef *def = DefinitionOf(e);
	const ColumnDef *cd = &def->columns[i];
	if (cd->is_key || def->values[cd->index].accum != AccumKind::Extreme)
		return nullptr;
	return &def->values[cd->index];
}

/* A type verify() can report as a number. */
bool
IsNumberType(Oid type)
{
	switch (getBaseType(type)) {
	case INT2OID:
	case INT4OID:
	case INT8OID:
	case NUMERICOID:
	case FLOAT4OID:
	case FLOAT8OID:
		return true;
	default:
		return false;
	}
}

/* The retention condition over the bucket column `column` (a qualified reference), or "true". */
char *
LiveCondition(const Counter *e, const char *column)
{
	const CounterLayout *l = LayoutOf(e);
	if (l->retention_column < 0)
		return pstrdup("true");
	return psprintf("%s OPERATOR(pg_catalog.>=) (pg_catalog.now() OPERATOR(pg_catalog.-) %s::pg_catalog.interval)::%s",
	                column, quote_literal_cstr(e->options->retention_keep),
	                format_type_extended(l->retention_type, -1, FORMAT_TYPE_FORCE_QUALIFY));
}

} // namespace

char *
VerifyStatement(const Counter *e)
{
	const CounterLayout *l = LayoutOf(e);
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
	for (int i = 0; i < l->ncolumns; i++) {
		int n = i + 1;
		if (l->is_key[i]) {
			Sep(&keys, &fk);
			appendStringInfo(&keys, "u.k%d", n);
			appendStringInfo(&view_keys, "v.%s AS k%d, ", quote_identifier(l->def_names[i]), n);
			appendStringInfo(&read_keys, "t.%s AS k%d, ", quote_identifier(l->in_read.names[i]), n);
			appendStringInfo(&json, "%s%s, d.k%d", json.len ? ", " : "", quote_literal_cstr(l->def_names[i]), n);
		} else if (const ValueDef *vd = ExtremeOfColumn(e, i)) {
			/*
			 * (an extreme, compared as it is; verify() reports numbers: one of another type shows as NULL on both
			 * sides, its key and column saying which differs)
			 */
			Sep(&sums, &fv);
			const char *type = StoredTypeName(vd);
			const char *agg = vd->aggregate->direction > 0 ? "max" : "min";
			appendStringInfo(&stored, ", t.%s AS s%d, NULL::%s AS e%d", quote_identifier(l->in_read.names[i]), n, type,
			                 n);
			appendStringInfo(&expected, ", NULL::%s, v.%s", type, quote_identifier(l->def_names[i]));
			appendStringInfo(&sums, "pg_catalog.%s(u.s%d) AS s%d, pg_catalog.%s(u.e%d) AS e%d", agg, n, n, agg, n, n);
			appendStringInfo(&differs, "%spg_catalog.%s(u.s%d) IS DISTINCT FROM pg_catalog.%s(u.e%d)",
			                 differs.len ? " OR " : "", agg, n, agg, n);
			bool number = IsNumberType(vd->extreme_type);
			appendStringInfo(&unpivot, "%s(%s, %s, %s, d.s%d IS DISTINCT FROM d.e%d)", unpivot.len ? ", " : "",
			                 quote_literal_cstr(l->def_names[i]),
			                 number ? psprintf("d.s%d::pg_catalog.numeric", n) : "NULL::pg_catalog.numeric",
			                 number ? psprintf("d.e%d::pg_catalog.numeric", n) : "NULL::pg_catalog.numeric", n, n);
		} else {
			Sep(&sums, &fv);
			appendStringInfo(&stored, ", COALESCE(t.%s, 0)::pg_catalog.numeric AS s%d, 0::pg_catalog.numeric AS e%d",
			                 quote_identifier(l->in_read.names[i]), n, n);
			appendStringInfo(&expected, ", 0::pg_catalog.numeric, COALESCE(v.%s, 0)::pg_catalog.numeric",
			                 quote_identifier(l->def_names[i]));
			appendStringInfo(&sums, "pg_catalog.sum(u.s%d) AS s%d, pg_catalog.sum(u.e%d) AS e%d", n, n, n, n);
			appendStringInfo(&differs, "%spg_catalog.sum(u.s%d) IS DISTINCT FROM pg_catalog.sum(u.e%d)",
			                 differs.len ? " OR " : "", n, n);
			appendStringInfo(&unpivot, "%s(%s, d.s%d, d.e%d, d.s%d IS DISTINCT FROM d.e%d)", unpivot.len ? ", " : "",
			                 quote_literal_cstr(l->def_names[i]), n, n, n, n);
		}
	}
	int rk = l->retention_column + 1;
	/* (the keys that differ in a CTE of their own: Citus pushes it down to the shards, the keys first in both sides) */
	return psprintf(
	    "WITH d AS MATERIALIZED (SELECT %2$s, %3$s, pg_catalog.bool_or(u.in_target) AS in_target "
	    "        FROM (SELECT %4$strue AS in_target%5$s FROM %6$s t WHERE %7$s "
	    "              UNION ALL "
	    "              SELECT %8$sfalse%9$s FROM %10$s v WHERE %11$s) u "
	    "       GROUP BY %12$s HAVING %13$s) "
	    "SELECT $1::pg_catalog.text, pg_catalog.jsonb_build_object(%1$s), x.column_name::pg_catalog.text, x.stored, "
	    "x.expected "
	    "FROM d CROSS JOIN LATERAL (VALUES %14$s) x(column_name, stored, expected, differs) "
	    "WHERE x.differs AND (%15$s OR d.in_target) "
	    "ORDER BY 2, 3",
	    json.data, keys.data, sums.data, read_keys.data, stored.data, QualifiedName(e->target),
	    LiveCondition(e, rk > 0 ? psprintf("t.%s", quote_identifier(l->in_read.names[rk - 1])) : nullptr),
	    view_keys.data, expected.data, QualifiedName(e->query),
	    LiveCondition(e, rk > 0 ? psprintf("v.%s", quote_identifier(l->def_names[rk - 1])) : nullptr), keys.data,
	    differs.data, unpivot.data, e->owns_target ? "true" : "false");
}

char *
ConditionProbe(const char *condition)
{
	return psprintf("SELECT 1 WHERE (%s)", condition);
}

char *
RebuildConditionCheck(const Counter *e, const char *condition)
{
	const CounterLayout *l = LayoutOf(e);
	return psprintf("SELECT 1 FROM (SELECT %s FROM %s LIMIT 0) k WHERE (%s)", KeyColumnList(e), QualifiedName(l->table),
	                condition);
}

char *
KeyColumnList(const Counter *e)
{
	const CounterLayout *l = LayoutOf(e);
	StringInfoData keys;
	initStringInfo(&keys);
	bool first = true;
	for (int i = 0; i < l->ncolumns; i++)
		if (l->is_key[i]) {
			Sep(&keys, &first);
			appendStringInfoString(&keys, quote_identifier(l->in_table.names[i]));
		}
	return keys.data;
}

char *
RebuildStatement(const Counter *e, const char *condition, bool distributed)
{
	const CounterLayout *l = LayoutOf(e);
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
	for (int i = 0; i < l->ncolumns; i++) {
		int n = i + 1;
		const char *col = quote_identifier(l->in_table.names[i]);
		Sep(&table_side, &fs);
		Sep(&view_side, &fc);
		Sep(&insert_cols, &fi);
		appendStringInfoString(&insert_cols, col);
		appendStringInfo(&insert_vals, "%sd.%s%d", insert_vals.len ? ", " : "", l->is_key[i] ? "k" : "e", n);
		if (l->is_key[i]) {
			appendStringInfo(&table_side, "t.%s AS k%d", col, n);
			appendStringInfo(&view_side, "v.%s", quote_identifier(l->def_names[i]));
			Sep(&keys, &fk);
			appendStringInfo(&keys, "u.k%d", n);
			appendStringInfo(&as_table, "%su.k%d AS %s", as_table.len ? ", " : "", n, col);
			appendStringInfo(&conflict, "%s%s", conflict.len ? ", " : "",
			                 KeyIndexElement(col, l->digested != nullptr && l->digested[i]));
		} else if (const ValueDef *vd = ExtremeOfColumn(e, i)) {
			/* (an extreme, compared as it is: each side has one row of the key or none) */
			const char *type = StoredTypeName(vd);
			const char *agg = vd->aggregate->direction > 0 ? "max" : "min";
			appendStringInfo(&table_side, "t.%s AS s%d, NULL::%s AS e%d", col, n, type, n);
			appendStringInfo(&view_side, "NULL::%s, v.%s", type, quote_identifier(l->def_names[i]));
			appendStringInfo(&sums, ", pg_catalog.%s(u.s%d) AS s%d, pg_catalog.%s(u.e%d) AS e%d", agg, n, n, agg, n, n);
			appendStringInfo(&differs, "%sx.s%d IS DISTINCT FROM x.e%d", differs.len ? " OR " : "", n, n);
			appendStringInfo(&stored_nonzero, "%sx.s%d IS NOT NULL", stored_nonzero.len ? " OR " : "", n);
			appendStringInfo(&nonzero, "%sd.e%d IS NOT NULL", nonzero.len ? " OR " : "", n);
			Sep(&sets, &fset);
			appendStringInfo(&sets, "%s = d.e%d", col, n);
		} else {
			appendStringInfo(&table_side,
			                 "COALESCE(t.%s, 0)::pg_catalog.numeric AS s%d, NULL::pg_catalog.numeric AS e%d", col, n,
			                 n);
			appendStringInfo(&view_side, "NULL::pg_catalog.numeric, COALESCE(v.%s, 0)::pg_catalog.numeric",
			                 quote_identifier(l->def_names[i]));
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
	int rk = l->retention_column + 1;
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
	             table_side.data, distributed ? "true" : "t.ctid", QualifiedName(l->table), view_side.data,
	             distributed ? "NULL::pg_catalog.bool" : "NULL::pg_catalog.tid", QualifiedName(e->query),
	             LiveCondition(e, rk > 0 ? psprintf("u.k%d", rk) : nullptr), keep, keys.data,
	             /* (a stored row of zeros differs too, unless the counter keeps them: it should not exist) */
	             e->owns_target && !e->options->keep_zero
	                 ? psprintf("%s OR (x.row_id IS NOT NULL AND NOT (%s))", differs.data, stored_nonzero.data)
	                 : differs.data);
	const char *table = QualifiedName(l->table);
	StringInfoData match;
	initStringInfo(&match);
	for (int i = 0; i < l->ncolumns; i++)
		if (l->is_key[i])
			appendStringInfo(&match, " AND t.%s OPERATOR(pg_catalog.=) d.k%d", quote_identifier(l->in_table.names[i]),
			                 i + 1);
	if (!e->owns_target)
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
	for (int i = 0; i < l->ncolumns; i++)
		if (!l->is_key[i])
			appendStringInfo(&excluded, "%s%s = EXCLUDED.%s", excluded.len ? ", " : "",
			                 quote_identifier(l->in_table.names[i]), quote_identifier(l->in_table.names[i]));
	StringInfoData order;
	initStringInfo(&order);
	for (int i = 0; i < l->ncolumns; i++)
		if (l->is_key[i])
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
	    diff, table, e->options->keep_zero ? "true" : nonzero.data, table, insert_cols.data, insert_vals.data,
	    e->options->keep_zero ? psprintf("(%s) OR d.row_id IS NOT NULL", nonzero.data) : nonzero.data, order.data,
	    conflict.data, excluded.data);
}

char *
CompactStatement(const Counter *e, bool with_rows)
{
	const CounterLayout *l = LayoutOf(e);
	StringInfoData moved, keys, cols, sums, nonzero, updates, zero, conflict;
	initStringInfo(&moved);
	initStringInfo(&keys);
	initStringInfo(&cols);
	initStringInfo(&sums);
	initStringInfo(&nonzero);
	initStringInfo(&updates);
	initStringInfo(&zero);
	initStringInfo(&conflict);
	for (int i = 0; i < l->ncolumns; i++) {
		int n = i + 1;
		const char *col = quote_identifier(l->in_table.names[i]);
		appendStringInfo(&moved, "%sl.%s AS c%d", moved.len ? ", " : "", quote_identifier(l->in_pending.names[i]), n);
		appendStringInfo(&cols, "%s%s", cols.len ? ", " : "", col);
		if (l->is_key[i]) {
			appendStringInfo(&keys, "%sm.c%d", keys.len ? ", " : "", n);
			appendStringInfo(&conflict, "%s%s", conflict.len ? ", " : "",
			                 KeyIndexElement(col, l->digested != nullptr && l->digested[i]));
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
	/* (a cross-shard key on Citus: its rows are kept per anchor, a key of the totals' rows too) */
	if (l->anchored) {
		appendStringInfo(&moved, ", l.%s AS a", ANCHOR_COLUMN);
		appendStringInfoString(&keys, ", m.a");
		appendStringInfo(&conflict, ", %s", ANCHOR_COLUMN);
	}
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < l->ncolumns; i++)
			if (l->is_key[i] == (pass == 0))
				appendStringInfo(&insert_cols, "%s%s", insert_cols.len ? ", " : "",
				                 quote_identifier(l->in_table.names[i]));
		if (pass == 0 && l->anchored)
			appendStringInfo(&insert_cols, ", %s", ANCHOR_COLUMN);
	}
	const char *log = QualifiedName(e->log);
	/* Sharded mode: only the slot rows no transaction holds (busy ones wait for the next compaction). */
	char *pending =
	    e->mode == Mode::Sharded
	        ? psprintf("l.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT x.ctid FROM %s x FOR UPDATE SKIP LOCKED))", log)
	        : pstrdup("true");
	if (!with_rows)
		return psprintf(
		    "WITH moved AS (DELETE FROM %s l WHERE %s RETURNING %s), "
		    "     folded AS (INSERT INTO %s AS t (%s) SELECT %s%s FROM moved m GROUP BY %s HAVING %s "
		    "                ORDER BY %s ON CONFLICT (%s) DO UPDATE SET %s RETURNING t.ctid, (%s) AS zero) "
		    "SELECT (SELECT pg_catalog.count(*) FROM moved), ARRAY(SELECT f.ctid FROM folded f WHERE f.zero)",
		    log, pending, moved.data, QualifiedName(l->table), insert_cols.data, keys.data, sums.data, keys.data,
		    nonzero.data, keys.data, conflict.data, updates.data, zero.data);
	if (l->anchored)
		elog(ERROR, "counters: counter \"%s\": thresholds of a cross-shard key", e->name);
	/*
	 * With the folded rows (for thresholds): the same, then one row per folded key with its new values (f1 ... fn,
	 * definition order) and the sums folded into them (s<i> for value column i), after the two counts.
	 */
	StringInfoData sum_cols, returning, join, out;
	initStringInfo(&sum_cols);
	initStringInfo(&returning);
	initStringInfo(&join);
	initStringInfo(&out);
	for (int i = 0; i < l->ncolumns; i++) {
		int n = i + 1;
		appendStringInfo(&returning, ", t.%s AS f%d", quote_identifier(l->in_table.names[i]), n);
		appendStringInfo(&out, ", f.f%d", n);
		if (l->is_key[i]) {
			appendStringInfo(&sum_cols, "%sm.c%d", sum_cols.len ? ", " : "", n);
			appendStringInfo(&join, "%sf.f%d IS NOT DISTINCT FROM g.c%d", join.len ? " AND " : "", n, n);
		} else
			appendStringInfo(&sum_cols, "%spg_catalog.sum(m.c%d) AS c%d", sum_cols.len ? ", " : "", n, n);
	}
	for (int i = 0; i < l->ncolumns; i++)
		if (!l->is_key[i])
			appendStringInfo(&out, ", g.c%d", i + 1);
	StringInfoData folded_cols;
	initStringInfo(&folded_cols);
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < l->ncolumns; i++)
			if (l->is_key[i] == (pass == 0))
				appendStringInfo(&folded_cols, "%sg.c%d", folded_cols.len ? ", " : "", i + 1);
	StringInfoData group_keys;
	initStringInfo(&group_keys);
	for (int i = 0; i < l->ncolumns; i++)
		if (l->is_key[i])
			appendStringInfo(&group_keys, "%sg.c%d", group_keys.len ? ", " : "", i + 1);
	return psprintf("WITH moved AS (DELETE FROM %s l WHERE %s RETURNING %s), "
	                "     grouped AS (SELECT %s FROM moved m GROUP BY %s HAVING %s), "
	                "     folded AS (INSERT INTO %s AS t (%s) SELECT %s FROM grouped g ORDER BY %s "
	                "                ON CONFLICT (%s) DO UPDATE SET %s RETURNING t.ctid, (%s) AS zero%s) "
	                "SELECT (SELECT pg_catalog.count(*) FROM moved), ARRAY(SELECT f.ctid FROM folded f WHERE f.zero)%s "
	                "  FROM (SELECT) one LEFT JOIN (folded f JOIN grouped g ON %s) ON true",
	                log, pending, moved.data, sum_cols.data, keys.data, nonzero.data, QualifiedName(l->table),
	                insert_cols.data, folded_cols.data, group_keys.data, conflict.data, updates.data, zero.data,
	                returning.data, out.data, join.data);
}

char *
FoldAllStatement(const Counter *e)
{
	const CounterLayout *l = LayoutOf(e);
	StringInfoData cols, select, keys, conflict, updates;
	initStringInfo(&cols);
	initStringInfo(&select);
	initStringInfo(&keys);
	initStringInfo(&conflict);
	initStringInfo(&updates);
	for (int i = 0; i < l->ncolumns; i++) {
		const char *col = quote_identifier(l->in_table.names[i]);
		const char *pending = quote_identifier(l->in_pending.names[i]);
		appendStringInfo(&cols, "%s%s", cols.len ? ", " : "", col);
		if (l->is_key[i]) {
			appendStringInfo(&select, "%sl.%s", select.len ? ", " : "", pending);
			appendStringInfo(&keys, "%sl.%s", keys.len ? ", " : "", pending);
			appendStringInfo(&conflict, "%s%s", conflict.len ? ", " : "",
			                 KeyIndexElement(col, l->digested != nullptr && l->digested[i]));
		} else {
			appendStringInfo(&select, "%spg_catalog.sum(l.%s)", select.len ? ", " : "", pending);
			appendStringInfo(&updates, "%s%s = t.%s OPERATOR(pg_catalog.+) EXCLUDED.%s", updates.len ? ", " : "", col,
			                 col, col);
		}
	}
	if (l->anchored) {
		appendStringInfo(&cols, ", %s", ANCHOR_COLUMN);
		appendStringInfo(&select, ", l.%s", ANCHOR_COLUMN);
		appendStringInfo(&keys, ", l.%s", ANCHOR_COLUMN);
		appendStringInfo(&conflict, ", %s", ANCHOR_COLUMN);
	}
	return psprintf("INSERT INTO %s AS t (%s) SELECT %s FROM %s l GROUP BY %s ON CONFLICT (%s) DO UPDATE SET %s",
	                QualifiedName(l->table), cols.data, select.data, QualifiedName(e->log), keys.data, conflict.data,
	                updates.data);
}

char *
DeleteAllStatement(Oid rel)
{
	return psprintf("DELETE FROM %s", QualifiedName(rel));
}

char *
ZeroRowsStatement(const Counter *e)
{
	const CounterLayout *l = LayoutOf(e);
	StringInfoData nonzero;
	initStringInfo(&nonzero);
	for (int i = 0; i < l->ncolumns; i++)
		if (!l->is_key[i])
			appendStringInfo(&nonzero, "%st.%s OPERATOR(pg_catalog.<>) 0", nonzero.len ? " OR " : "",
			                 quote_identifier(l->in_table.names[i]));
	return psprintf("DELETE FROM %s t WHERE NOT (%s)", QualifiedName(l->table), nonzero.data);
}

char *
DeleteRowsStatement(Oid rel)
{
	return psprintf("DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) ANY ($1)", QualifiedName(rel));
}

char *
RetentionStatement(const Counter *e, Oid rel, const char **names)
{
	const CounterLayout *l = LayoutOf(e);
	return psprintf("DELETE FROM %s t WHERE NOT (%s)", QualifiedName(rel),
	                LiveCondition(e, psprintf("t.%s", quote_identifier(names[l->retention_column]))));
}

char *

BoundsViolation(const char *column, Datum min, bool min_null, Datum max, bool max_null)
{
	StringInfoData cond;
	initStringInfo(&cond);
	if (!min_null)
		appendStringInfo(&cond, "%s < %s", quote_identifier(column),
		                 quote_literal_cstr(DatumGetCString(DirectFunctionCall1(numeric_out, min))));
	if (!max_null)
		appendStringInfo(&cond, "%s%s > %s", cond.len ? " OR " : "", quote_identifier(column),
		                 quote_literal_cstr(DatumGetCString(DirectFunctionCall1(numeric_out, max))));
	return cond.data;
}

char *
CountWhereStatement(Oid rel, const char *condition)
{
	return psprintf("SELECT pg_catalog.count(*) FROM %s WHERE %s", QualifiedName(rel), condition);
}

char *
KeyFilterCheckStatement(const Counter *e, const char *filter)
{
	const CounterLayout *l = LayoutOf(e);
	return psprintf("SELECT 1 FROM (SELECT %s FROM %s LIMIT 0) x WHERE (%s)", KeyColumnList(e), QualifiedName(l->table),
	                filter);
}

namespace {

/*
 * The select list of a typed top() in log or sharded mode: the columns of `rowtype` (the counter's view) in order,
 * each key as grouped and each value summed over the totals and pending rows, in the type the view gives it.
 */
char *
TopRowColumns(const Counter *e, TupleDesc rowtype)
{
	const CounterLayout *l = LayoutOf(e);
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
		while (i < l->ncolumns && strcmp(l->in_read.names[i], NameStr(att->attname)) != 0)
			i++;
		if (i == l->ncolumns)
			appendStringInfo(&cols, "NULL::%s", type);
		else if (l->is_key[i])
			appendStringInfoString(&cols, quote_identifier(l->in_table.names[i]));
		else
			appendStringInfo(&cols, "pg_catalog.sum(%s)::%s", quote_identifier(l->in_table.names[i]), type);
	}
	return cols.data;
}

} // namespace

char *
TopStatement(const Counter *e, int col, const char *limit, const char *filter, TupleDesc rowtype, bool distributed)
{
	const CounterLayout *l = LayoutOf(e);
	const char *cond = filter ? psprintf("(%s)", filter) : "true";
	const char *value = quote_identifier(l->in_table.names[col]);
	StringInfoData keys, match, null_match, any_null, nonzero, xcols;
	initStringInfo(&keys);
	initStringInfo(&match);
	initStringInfo(&null_match);
	initStringInfo(&any_null);
	initStringInfo(&nonzero);
	initStringInfo(&xcols);
	for (int i = 0; i < l->ncolumns; i++) {
		const char *c = quote_identifier(l->in_table.names[i]);
		appendStringInfo(&xcols, "%sx.%s", i ? ", " : "", c);
		if (l->is_key[i]) {
			bool first = keys.len == 0;
			appendStringInfo(&keys, "%s%s", first ? "" : ", ", c);
			appendStringInfo(&match, "%sx.%s OPERATOR(pg_catalog.=) p.%s", first ? "" : " AND ", c, c);
			appendStringInfo(&null_match, "%sx.%s IS NOT DISTINCT FROM p.%s", first ? "" : " AND ", c, c);
			appendStringInfo(&any_null, "%sx.%s IS NULL", first ? "" : " OR ", c);
		} else
			/* a key is present when some value is nonzero, as in the counter's view */
			appendStringInfo(&nonzero, "%spg_catalog.sum(%s) OPERATOR(pg_catalog.<>) 0", nonzero.len ? " OR " : "", c);
	}
	if (e->mode == Mode::Exact) {
		const char *target = QualifiedName(e->target);
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
	const char *totals = QualifiedName(e->totals);
	const char *log = QualifiedName(e->log);
	const char *select = rowtype ? TopRowColumns(e, rowtype) : psprintf("%s, pg_catalog.sum(%s)", keys.data, value);
	const char *order = rowtype ? psprintf("pg_catalog.sum(%s)", value) : psprintf("%d", DefinitionOf(e)->nkeys + 1);
	/*
	 * Citus: every key's rows summed, shard by shard (a key is in one shard: the GROUP BY holds the distribution
	 * column), each shard's top k merged.
	 */
	if (distributed)
		return psprintf("SELECT %s FROM (SELECT %s FROM %s x WHERE %s UNION ALL SELECT %s FROM %s x WHERE %s) u "
		                "GROUP BY %s HAVING %s ORDER BY %s DESC, %s LIMIT %s",
		                select, xcols.data, totals, cond, xcols.data, log, cond, keys.data, nonzero.data, order,
		                keys.data, limit);
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
	                keys.data, log, cond, keys.data, totals, cond, value, keys.data, limit, select, xcols.data, totals,
	                match.data, xcols.data, log, match.data, xcols.data, totals, null_match.data, any_null.data,
	                xcols.data, log, null_match.data, any_null.data, keys.data, nonzero.data, order, keys.data, limit);
}

} // namespace counters
