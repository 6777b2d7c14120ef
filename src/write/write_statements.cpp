/*
 * write_statements.cpp: the statements of the write path -- applying a counter's deltas (prepared by compile.cpp
 * for apply.cpp, one set per mode), reading the parent rows and child rows of a counter through a parent row, the
 * window sums and window state of window thresholds, and a counter-cache row's recount. *
 * Every name is quoted and schema-qualified, every operator written OPERATOR(pg_catalog.x) or generated for its
 * types; values travel as parameters; the statements run with search_path pinned as well.
 */
#include "write/write.hpp"

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

inline bool
IsExtreme(const CompiledCounter *c, int v)
{
	return c->extremes != nullptr && c->extremes[v].kept;
}

void
AppendColumns(StringInfo sql, const CompiledCounter *c, bool keys, bool values, const char *prefix = "")
{
	bool first = true;
	for (int i = 0; keys && i < c->def->nkeys; i++) {
		Sep(sql, &first);
		appendStringInfo(sql, "%s%s", prefix, quote_identifier(c->key_columns[i]));
	}
	for (int i = 0; values && i < c->def->nvalues; i++) {
		Sep(sql, &first);
		appendStringInfo(sql, "%s%s", prefix, quote_identifier(c->value_columns[i]));
	}
}

/* $1, $2, ... $n, or (bulk) the arrays read in step: unnest() in the target list keeps a composite element whole. */
void
AppendParams(StringInfo sql, int n, bool bulk)
{
	for (int i = 1; i <= n; i++)
		appendStringInfo(sql, bulk ? "%spg_catalog.unnest($%d)" : "%s$%d", i > 1 ? ", " : "", i);
}

/*
 * Log mode's append of a statement's summed deltas to the log `rel`: the query string built is INSERT INTO rel
 * (keys..., values...) VALUES ($1, ...), or (bulk) SELECT the arrays read in step.
 */
char *
LogInsertStatement(const CompiledCounter *c, const char *rel, int nparams, bool bulk)
{
	StringInfoData sql;
	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (", rel);
	AppendColumns(&sql, c, true, true);
	if (c->anchor != nullptr)
		appendStringInfo(&sql, ", %s", ANCHOR_COLUMN);
	appendStringInfoString(&sql, bulk ? ") SELECT " : ") VALUES (");
	AppendParams(&sql, nparams, bulk);
	if (c->anchor != nullptr)
		appendStringInfo(&sql, ", %s", c->anchor);
	if (!bulk)
		appendStringInfoChar(&sql, ')');
	return sql.data;
}

/* RETURNING the row's ctid, whether every value is now zero, the new values, then the keys (for bounds). */
void
AppendReturning(StringInfo sql, const CompiledCounter *c)
{
	appendStringInfoString(sql, " RETURNING c.ctid, ");
	for (int i = 0; i < c->def->nvalues; i++)
		appendStringInfo(sql, IsExtreme(c, i) ? "%sc.%s IS NULL" : "%sc.%s OPERATOR(pg_catalog.=) 0", i ? " AND " : "",
		                 quote_identifier(c->value_columns[i]));
	appendStringInfoString(sql, ", ");
	AppendColumns(sql, c, false, true, "c.");
	appendStringInfoString(sql, ", ");
	AppendColumns(sql, c, true, false, "c.");
}

/* SET v = <row>.v + $n for every value column (an extreme: the more extreme of the two, GREATEST or LEAST) */
void
AppendAdditions(StringInfo sql, const CompiledCounter *c, const char *row, bool coalesce, bool excluded)
{
	for (int i = 0; i < c->def->nvalues; i++) {
		const char *col = quote_identifier(c->value_columns[i]);
		if (IsExtreme(c, i))
			appendStringInfo(sql, "%s%s = %s(%s.%s, ", i ? ", " : "", col,
			                 c->extremes[i].direction > 0 ? "GREATEST" : "LEAST", row, col);
		else
			appendStringInfo(sql, "%s%s = %s%s.%s%s OPERATOR(pg_catalog.+) ", i ? ", " : "", col,
			                 coalesce ? "COALESCE(" : "", row, col, coalesce ? ", 0)" : "");
		if (excluded)
			appendStringInfo(sql, "EXCLUDED.%s", col);
		else
			appendStringInfo(sql, "$%d", c->def->nkeys + i + 1);
		if (IsExtreme(c, i))
			appendStringInfoChar(sql, ')');
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
		const char *col = quote_identifier(c->key_columns[i]);
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
		appendStringInfo(sql, ", %s = pg_catalog.transaction_timestamp()", quote_identifier(c->touch_column));
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
			                       QualifiedName(c->write_rel), quote_identifier(c->key_columns[i]))));
		Oid type = getBaseType(get_atttype(c->write_rel, attnum));
		if (i > 0)
			appendStringInfoString(&sql, " AND ");
		const char *column = psprintf("c.%s", quote_identifier(c->key_columns[i]));
		const char *param = psprintf("$%d", i + 1);
		if (type != getBaseType(def->keys[i].type)) {
			appendStringInfo(&sql, "%s OPERATOR(pg_catalog.=) %s", column, param);
			continue;
		}
		TypeCacheEntry *tc = lookup_type_cache(type, TYPECACHE_EQ_OPR);
		if (!OidIsValid(tc->eq_opr))
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
			                errmsg("counter \"%s\": key column %s of %s has no equality operator", def->name,
			                       quote_identifier(c->key_columns[i]), QualifiedName(c->write_rel))));
		generate_operator_clause(&sql, column, type, tc->eq_opr, param, def->keys[i].type);
	}
	appendStringInfoString(&sql, " RETURNING c.ctid, ");
	AppendColumns(&sql, c, false, true, "c.");
	return sql.data;
}

/*
 * The extremes of the row at ctid $1 re-read (extremes.cpp): SET each extreme column to its parameter ($2, ...),
 * RETURNING as the plan that wrote the row.
 */
char *
ExtremesStatement(const CompiledCounter *c, PlanStatement *st)
{
	StringInfoData sql;
	initStringInfo(&sql);
	appendStringInfo(&sql, "UPDATE %s AS c SET ", QualifiedName(c->write_rel));
	st->nargs = 1;
	st->argtypes[0] = TIDOID;
	for (int i = 0; i < c->def->nvalues; i++) {
		if (c->extremes == nullptr || (!c->extremes[i].kept && !c->extremes[i].distinct))
			continue;
		st->argtypes[st->nargs++] = StoredType(&c->def->values[i]);
		const char *col = quote_identifier(c->value_columns[i]);
		/* (an extreme read again; a distinct count moved by the pairs new to the key or gone from it) */
		if (c->extremes[i].distinct)
			appendStringInfo(&sql, "%s%s = c.%s OPERATOR(pg_catalog.+) $%d", st->nargs > 2 ? ", " : "", col, col,
			                 st->nargs);
		else
			appendStringInfo(&sql, "%s%s = $%d", st->nargs > 2 ? ", " : "", col, st->nargs);
	}
	appendStringInfoString(&sql, " WHERE c.ctid OPERATOR(pg_catalog.=) $1");
	if (c->counter->owns_target)
		AppendReturning(&sql, c);
	else {
		appendStringInfoString(&sql, " RETURNING c.ctid, ");
		AppendColumns(&sql, c, false, true, "c.");
	}
	return sql.data;
}

/* TRUNCATE of a source: empty the counter table, the log (or slots) and totals, or zero the counter-cache columns. */
char *
TruncateStatement(const CompiledCounter *c)
{
	const char *rel = QualifiedName(c->write_rel);
	if (!c->counter->owns_target) {
		StringInfoData sql;
		initStringInfo(&sql);
		appendStringInfo(&sql, "UPDATE %s SET ", rel);
		for (int i = 0; i < c->def->nvalues; i++)
			appendStringInfo(&sql, IsExtreme(c, i) ? "%s%s = NULL" : "%s%s = 0", i ? ", " : "",
			                 quote_identifier(c->value_columns[i]));
		AppendTouch(&sql, c);
		appendStringInfoString(&sql, " WHERE ");
		for (int i = 0; i < c->def->nvalues; i++)
			appendStringInfo(&sql, IsExtreme(c, i) ? "%s%s IS NOT NULL" : "%s%s IS DISTINCT FROM 0", i ? " OR " : "",
			                 quote_identifier(c->value_columns[i]));
		return sql.data;
	}
	if (HasPending(c->counter->mode))
		return psprintf("WITH l AS (DELETE FROM %s) DELETE FROM %s", rel, QualifiedName(c->totals));
	return psprintf("DELETE FROM %s", rel);
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
		st.argtypes[def->nkeys + i] = StoredType(&def->values[i]);
	const char *rel = QualifiedName(c->write_rel);
	/* (a counter kept in counter-cache columns of an existing table is in exact mode, but not `exact` here) */
	Mode mode = c->counter->mode;
	bool exact = c->counter->owns_target && mode == Mode::Exact;
	switch (plan) {
	case PLAN_APPLY:
		if (mode == Mode::Log)
			/* Log mode: append the statement's summed deltas; no counter row is locked, nothing can conflict. */
			st.sql = LogInsertStatement(c, rel, nparams, false);
		else if (mode == Mode::Sharded) {
			st.argtypes[st.nargs++] = INT4OID;
			st.sql = UpsertStatement(c, false, quote_identifier(get_attname(c->write_rel, c->slot_attnum, false)));
		} else if (exact)
			st.sql = UpsertStatement(c, false, nullptr);
		else
			st.sql = TargetUpdateStatement(c);
		break;
	case PLAN_BULK:
		/*
		 * Many keys at once, fed by one array per column, read in step: rows are still locked in sorted key order.
		 * (Not with extremes: a removal that reaches a key's extreme re-reads it once the key's row is locked.)
		 */
		if (c->extremes != nullptr)
			return st;
		for (int i = 0; i < nparams; i++) {
			st.argtypes[i] = get_array_type(st.argtypes[i]);
			if (!OidIsValid(st.argtypes[i]))
				return st;
		}
		if (mode == Mode::Log)
			st.sql = LogInsertStatement(c, rel, nparams, true);
		else if (exact)
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
				appendStringInfo(&sql, "%sc.%s IS NOT DISTINCT FROM $%d", i ? " AND " : "",
				                 quote_identifier(c->key_columns[i]), i + 1);
			AppendReturning(&sql, c);
			st.sql = sql.data;
		}
		break;
	case PLAN_DELETE:
		st.nargs = 1;
		st.argtypes[0] = TIDOID;
		if (exact || mode == Mode::Sharded)
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
	case PLAN_EXTREMES:
		if (c->extremes != nullptr && mode == Mode::Exact)
			st.sql = ExtremesStatement(c, &st);
		break;
	default:
		break; /* (the plans FetchPlan prepares when first used) */
	}
	return st;
}

/* ---- window thresholds ---- */

char *
WindowSumsStatement(const CompiledCounter *c, bool written)
{
	const CounterDef *def = c->def;
	const WindowOptions *w = c->counter->options->window;
	int bucket = c->window_bucket;
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
		const char *col = quote_identifier(c->key_columns[k]);
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
		appendStringInfo(&sums, ", COALESCE(pg_catalog.sum(t.%s), 0)::pg_catalog.numeric AS s%d",
		                 quote_identifier(w->columns[i].column), i);
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
		    i ? " OR " : "", p + 3 + 2 * i, i, QualifiedName(c->counter->crossings), p + 2 + 2 * i, KEY_DIGEST_NAME,
		    KEY_DIGEST_NAME);
	}
	/* The window: buckets later than now() - width, compared in the bucket's type. */
	char *window = psprintf("t.%s OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) "
	                        "$%d::pg_catalog.interval)::%s",
	                        quote_identifier(c->key_columns[bucket]), written ? p + 1 : 1,
	                        format_type_be_qualified(def->keys[bucket].type));
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
			                 quote_identifier(w->columns[i].column), table, window, match.data, i);
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
ParentRowsStatement(const CounterDef *def)
{
	const char *key = quote_identifier(get_attname(def->parent, def->parent_key, false));
	return psprintf(
	    "SELECT p.%s::pg_catalog.int8, p FROM %s p WHERE p.%s OPERATOR(pg_catalog.=) ANY ($1) FOR SHARE OF p", key,
	    QualifiedName(def->parent), key);
}

char *
ChildRowsStatement(const CounterDef *def)
{
	const char *key = quote_identifier(get_attname(def->source, def->child_key, false));
	return psprintf("SELECT c.%s::pg_catalog.int8, c FROM %s c WHERE c.%s OPERATOR(pg_catalog.=) ANY ($1)", key,
	                QualifiedName(def->source), key);
}

char *

KeyRecountStatement(const CounterDef *def, Oid view, Oid target)
{
	StringInfoData values, match;
	initStringInfo(&values);
	initStringInfo(&match);
	for (int v = 0; v < def->nvalues; v++) {
		const char *column = def->values[v].column_name;
		AttrNumber attnum = get_attnum(target, column);
		const ValueDef *vd = &def->values[v];
		/* (the view has one row of the key, or none) */
		const char *read = vd->accum == AccumKind::Extreme
		                       ? psprintf("pg_catalog.%s(d.%s)", vd->aggregate->direction > 0 ? "max" : "min",
		                                  quote_identifier(column))
		                       : psprintf("COALESCE(pg_catalog.sum(d.%s), 0)", quote_identifier(column));
		appendStringInfo(&values, "%s%s::%s", v ? ", " : "", read,
		                 format_type_extended(get_atttype(target, attnum), -1, FORMAT_TYPE_FORCE_QUALIFY));
	}
	for (int k = 0; k < def->nkeys; k++)
		appendStringInfo(&match, "%sd.%s IS NOT DISTINCT FROM $%d", k ? " AND " : "",
		                 quote_identifier(def->keys[k].column_name), k + 1);
	return psprintf("SELECT %s FROM %s d WHERE %s", values.data, QualifiedName(view), match.data);
}

} // namespace counters
