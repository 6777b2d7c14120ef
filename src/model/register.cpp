/*
 * register.cpp: the one way into counters.counter. Register validates a declaration -- its name, the kinds of its
 * relations, the mode's shape, the caller's authorization for every relation the row names, the view a definition
 * whose columns the tables keep, an existing target's columns and key, the options fitted to the definition -- and
 * writes the row whole, as the catalog's owner (catalog.cpp). create_counter, a redefinition or retype, the adoption
 * of a description and a row inserted by a restore (restore.cpp) all come through here.
 */
#include "model/model.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "catalog/pg_attribute.h"
}

namespace counters {

namespace {

/*
 * A counter kept in columns of an existing table updates the row whose key columns equal the counter's key. A key
 * column of another type than the definition's key (varchar(3) for text, integer for bigint) would compare after a
 * conversion that folds different keys into one row, or fails: the types must be the same (a domain counts as its
 * base type; a narrower typmod is fine, the comparison does not convert).
 */
void
CheckTargetKeyTypes(const CounterDef *def, Oid target)
{
	for (int k = 0; k < def->nkeys; k++) {
		const KeyDef *key = &def->keys[k];
		AttrNumber attnum = get_attnum(target, key->column_name);
		if (attnum == InvalidAttrNumber)
			continue; /* (reported with the other missing columns) */
		Oid type;
		int32 typmod;
		Oid collation;
		get_atttypetypmodcoll(target, attnum, &type, &typmod, &collation);
		if (getBaseType(type) != getBaseType(key->type))
			ereport(ERROR,
			        (errcode(ERRCODE_DATATYPE_MISMATCH),
			         errmsg("counter \"%s\": key column \"%s\" of %s has type %s, the definition's key has type %s",
			                def->name, key->column_name, QualifiedName(target), format_type_with_typemod(type, typmod),
			                format_type_be(key->type)),
			         errdetail("Keys are compared without conversion, so that no two keys fold into one row."),
			         errhint("Cast the key in the definition to the column's type, e.g. %s::%s AS %s.",
			                 quote_identifier(key->column_name), format_type_be(getBaseType(type)),
			                 quote_identifier(key->column_name))));
	}
}

} // namespace

void
CheckCounterName(const char *name)
{
	if (name == nullptr)
		ereport(ERROR, (errcode(ERRCODE_INVALID_NAME), errmsg("invalid counter name NULL"),
		                errdetail("A counter name has 1 to %d bytes.", COUNTER_NAME_MAX_BYTES)));
	/* The definition view is named <name>_definition, an identifier of at most NAMEDATALEN - 1 bytes. */
	if (strlen(name) == 0 || strlen(name) > COUNTER_NAME_MAX_BYTES)
		ereport(ERROR, (errcode(ERRCODE_INVALID_NAME), errmsg("invalid counter name %s", quote_literal_cstr(name)),
		                errdetail("A counter name has 1 to %d bytes (this one has %zu): its tables and views are "
		                          "named after it.",
		                          COUNTER_NAME_MAX_BYTES, strlen(name))));
}

namespace {

struct KeyColumns {
	int n;
	AttrNumber *attnums;
};

/* A unique index on exactly the columns `arg` (KeyColumns) names, in any order, without expressions. */
bool
UniqueOnColumns(HeapTuple tup, const void *arg)
{
	const KeyColumns *keys = (const KeyColumns *)arg;
	Form_pg_index index = (Form_pg_index)GETSTRUCT(tup);
	bool ok = index->indisunique && index->indnatts == keys->n && heap_attisnull(tup, Anum_pg_index_indexprs, nullptr);
	for (int k = 0; ok && k < keys->n; k++) {
		bool in_index = false;
		for (int j = 0; j < index->indnatts; j++)
			in_index |= index->indkey.values[j] == keys->attnums[k];
		ok = in_index;
	}
	return ok;
}

/*
 * An existing table that keeps a counter's columns must have the definition's columns, values of integer or numeric
 * types, and keys of the definition's key types (its unique key: RequireTargetKey).
 */
void
CheckExistingTarget(const char *name, const CounterDef *def, Oid target)
{
	StringInfoData missing;
	initStringInfo(&missing);
	for (int i = 0; i < def->ncolumns; i++) {
		const char *column = ColumnName(def, i);
		if (get_attnum(target, column) == InvalidAttrNumber)
			appendStringInfo(&missing, "%s%s", missing.len ? ", " : "", quote_identifier(column));
	}
	if (missing.len > 0)
		ereport(ERROR,
		        (errcode(ERRCODE_UNDEFINED_COLUMN),
		         errmsg("counter \"%s\": target table %s has no column %s", name, QualifiedName(target), missing.data),
		         def->nderived > 0
		             ? errhint("The key and value aliases of the definition must name columns of the target table; "
		                       "%s() and the like are kept in two columns each, such as %s (docs/aggregates.md).",
		                       def->derived[0].kind->name, missing.data)
		             : errhint("The key and value aliases of the definition must name columns of the target table.")));
	for (int v = 0; v < def->nvalues; v++) {
		AttrNumber attnum = get_attnum(target, def->values[v].column_name);
		Oid type;
		int32 typmod;
		Oid collation;
		get_atttypetypmodcoll(target, attnum, &type, &typmod, &collation);
		const ValueDef *vd = &def->values[v];
		if (vd->accum == AccumKind::Extreme) {
			/* (min() and max(): the aggregate's own type and collation, and NULL where no row counts) */
			if (getBaseType(type) != getBaseType(vd->extreme_type) ||
			    (OidIsValid(vd->collation) && collation != vd->collation))
				ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
				                errmsg("counter \"%s\": target column %s has type %s, the counter keeps %s there", name,
				                       quote_identifier(vd->column_name), format_type_with_typemod(type, typmod),
				                       StoredTypeName(vd))));
			if (AttributeNotNull(target, attnum))
				ereport(
				    ERROR,
				    (errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				     errmsg("counter \"%s\": target column %s is NOT NULL", name, quote_identifier(vd->column_name)),
				     errdetail("%s() of a key without rows is NULL.", vd->aggregate->direction > 0 ? "max" : "min"),
				     errhint("ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL;", QualifiedName(target),
				             quote_identifier(vd->column_name))));
			continue;
		}
		/* (a numeric sum into an integer column would be rounded at every write: silently wrong) */
		if (vd->accum == AccumKind::Numeric && (type == INT2OID || type == INT4OID || type == INT8OID))
			ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
			                errmsg("counter \"%s\": target column %s has type %s, the counter sums numeric there", name,
			                       quote_identifier(vd->column_name), format_type_with_typemod(type, typmod)),
			                errdetail("Each delta would be rounded to an integer: the column would drift from its "
			                          "recount."),
			                errhint("ALTER TABLE %s ALTER COLUMN %s TYPE numeric;", QualifiedName(target),
			                        quote_identifier(vd->column_name))));
		if (type != INT2OID && type != INT4OID && type != INT8OID && type != NUMERICOID)
			appendStringInfo(&missing, "%s%s (%s)", missing.len ? ", " : "",
			                 quote_identifier(def->values[v].column_name), format_type_with_typemod(type, typmod));
	}
	if (missing.len > 0)
		ereport(ERROR,
		        (errcode(ERRCODE_DATATYPE_MISMATCH),
		         errmsg("counter \"%s\": target column %s is not of an integer or numeric type", name, missing.data)));
	CheckTargetKeyTypes(def, target);
}

} // namespace

void
RequireTargetKey(const char *name, const CounterDef *def, Oid target)
{
	/* a valid unique index, without predicate or expressions, on exactly the key columns */
	KeyColumns keys = {def->nkeys, (AttrNumber *)palloc(sizeof(AttrNumber) * def->nkeys)};
	for (int k = 0; k < def->nkeys; k++)
		keys.attnums[k] = get_attnum(target, def->keys[k].column_name);
	if (!AnyIndexOf(target, UniqueOnColumns, &keys))
		ereport(ERROR, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
		                errmsg("counter \"%s\": key columns (%s) are not a unique key of target table %s", name,
		                       KeyNames(def), QualifiedName(target)),
		                errhint("Create a unique index or primary key on exactly the key columns.")));
}

namespace {

/* 42809 naming the counter unless relation `rel` (what it is to the counter: `what`) is one of the kinds given. */
void
RequireKind(const char *name, Oid rel, const char *what, char kind, char other = '\0')
{
	char relkind = get_rel_relkind(rel);
	if (relkind == '\0')
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
		                errmsg("counter \"%s\": its %s, relation %u, does not exist", name, what, rel)));
	if (relkind != kind && (other == '\0' || relkind != other))
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
		                errmsg("counter \"%s\": its %s %s is not a %s", name, what, QualifiedName(rel),
		                       kind == RELKIND_VIEW ? "view" : "table")));
}

bool
IsValueColumn(const CounterDef *def, const char *column)
{
	return DefinitionColumn(def, column, false) >= 0;
}

bool
IsKeyColumn(const CounterDef *def, const char *column)
{
	return DefinitionColumn(def, column, true) >= 0;
}

} // namespace

/*
 * Options `kept` as definition `def` can keep them: bounds and thresholds of value columns it has, a retention of a
 * key column it has, a window over a key and value columns it has (window_ok: an exact counter with a table of its
 * own), touch, keep_zero and max_slots; what the counter's own state was (building, last_rebuild) goes. What did not
 * survive is said, in a NOTICE naming the counter.
 */
namespace {

/*
 * Per-column option entries (ColumnBounds, ColumnThresholds): a copy of those whose column `keep` accepts, each other
 * one named in `dropped` as "<what> of column <name>: <why>"; *n becomes the new number.
 */
template <typename Entry>
Entry *
EntriesWhere(const Entry *entries, int *n, bool (*keep)(const CounterDef *def, const char *column),
             const CounterDef *def, const char *what, const char *why, List **dropped)
{
	Entry *out = (Entry *)palloc0(sizeof(Entry) * Max(*n, 1));
	int m = 0;
	for (int i = 0; i < *n; i++)
		if (keep(def, entries[i].column))
			out[m++] = entries[i];
		else
			*dropped =
			    lappend(*dropped, psprintf("%s of column %s: %s", what, quote_identifier(entries[i].column), why));
	*n = m;
	return out;
}

} // namespace

CounterOptions
FitOptions(const char *name, const CounterOptions *kept, const CounterDef *def, bool window_ok)
{
	CounterOptions o = *kept;
	List *dropped = NIL;
	const char *no_column = "the definition has no such column";
	o.bounds = EntriesWhere(o.bounds, &o.nbounds, IsValueColumn, def, "bounds", no_column, &dropped);
	o.thresholds = EntriesWhere(o.thresholds, &o.nthresholds, IsValueColumn, def, "thresholds", no_column, &dropped);
	if (o.retention_column != nullptr && !IsKeyColumn(def, o.retention_column)) {
		dropped = lappend(dropped, psprintf("the retention of key %s: the definition has no such key",
		                                    quote_identifier(o.retention_column)));
		o.retention_column = nullptr;
	}
	if (o.window != nullptr) {
		bool keep = window_ok && o.window->bucket != nullptr && IsKeyColumn(def, o.window->bucket);
		for (int i = 0; keep && i < o.window->ncolumns; i++)
			keep = IsValueColumn(def, o.window->columns[i].column);
		if (!keep) {
			dropped = lappend(dropped, pstrdup("window thresholds: set them again with "
			                                   "counters.set_window_thresholds()"));
			o.window = nullptr;
		}
	}
	ListCell *lc;
	foreach (lc, dropped)
		ereport(NOTICE, (errmsg("counter \"%s\": dropped its %s", name, (const char *)lfirst(lc))));
	return o;
}

/*
 * What Register checks of a declaration, and what it writes: `auth` is for the owner of the table that holds its
 * values, and its principal has the privileges of the owner of every relation the row names (the view's rule read
 * before the view is analysed); the relations have the mode's kinds and the definition's columns; the options, typed,
 * are written back by the C writer. Returns the analysed definition and the options to write.
 */
CounterDef *
Validate(const Declaration *d, const Authorization &auth, Datum *options)
{
	const char *name = d->name;
	CheckCounterName(name);
	bool exact = d->mode == Mode::Exact;
	if (!OidIsValid(d->query) || !OidIsValid(d->target) || exact != (!OidIsValid(d->totals) && !OidIsValid(d->log)))
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
		         errmsg("counter \"%s\": log and sharded mode have totals and a log, exact mode neither", name)));
	if (!exact && !d->owns)
		ereport(ERROR, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
		                errmsg("counter \"%s\": counter-cache columns of an existing table are kept in exact mode only",
		                       name)));
	RequireKind(name, d->query, "definition", RELKIND_VIEW);
	if (exact)
		RequireKind(name, d->target, "table", RELKIND_RELATION, d->owns ? '\0' : RELKIND_PARTITIONED_TABLE);
	else {
		RequireKind(name, d->target, "view of totals and pending deltas", RELKIND_VIEW);
		RequireKind(name, d->totals, "totals", RELKIND_RELATION);
		RequireKind(name, d->log, d->mode == Mode::Log ? "log" : "slots", RELKIND_RELATION);
	}
	if (OidIsValid(d->crossings))
		RequireKind(name, d->crossings, "window state", RELKIND_RELATION);
	/* Whose code it runs: the owner of its values' table, whom the authorization must be for. */
	Oid owner = OwnerOfTable(d->target, d->totals);
	if (auth.role() != owner || !OidIsValid(auth.principal()))
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("counter \"%s\": not authorized for its owner %s", name,
		                       quote_identifier(GetUserNameFromId(owner, false)))));
	/* Every relation the row names, the view's own rule's first: checked before the view is analysed. */
	List *rels = ViewRelations(d->query);
	Oid named[5] = {d->query, d->target, d->totals, d->log, d->crossings};
	for (int i = 0; i < 5; i++)
		if (OidIsValid(named[i]))
			rels = list_append_unique_oid(rels, named[i]);
	ListCell *lc;
	foreach (lc, rels) {
		RequireOwnerPrivileges(name, lfirst_oid(lc), auth.principal());
		RequireOwnerRights(name, lfirst_oid(lc), owner);
	}
	CounterDef *def = AnalyzeView(name, d->query, auth, d->source);
	RequireKindsKept(name, def, d->mode);
	if (!list_member_oid(rels, def->source) || (OidIsValid(def->parent) && !list_member_oid(rels, def->parent)))
		elog(ERROR, "counters: counter \"%s\": its definition reads a relation its view's rule does not name", name);
	/* The tables keep the definition's columns. */
	const char **names;
	if (!d->owns)
		CheckExistingTarget(name, def, d->target);
	else {
		ColumnsByPosition(def, exact ? d->target : d->totals, &names, nullptr);
		if (!exact)
			ColumnsByPosition(def, d->target, &names, nullptr);
	}
	CounterOptions none = *ParseOptions((Datum)0, true);
	CounterOptions o = FitOptions(name, d->options != nullptr ? d->options : &none, def, exact && d->owns);
	if (o.invalid != nullptr)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": its options are invalid: %s", name, o.invalid)));
	o.building = false;
	*options = OptionsJsonb(&o);
	return def;
}

Oid
Register(const Declaration *d, const Authorization &auth)
{
	Datum options;
	CounterDef *def = Validate(d, auth, &options);
	/* (a catalog of 0.4, not updated yet, has no column for the window state) */
	bool crossings = HasCrossingsColumn();
	if (OidIsValid(d->crossings) && !crossings)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("counter \"%s\": window thresholds need the extension updated", d->name),
		                errhint("ALTER EXTENSION counters UPDATE")));
	Oid argtypes[10] = {TEXTOID, OIDOID, OIDOID, OIDOID, BOOLOID, TEXTOID, OIDOID, OIDOID, JSONBOID, OIDOID};
	char nulls[10] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Datum values[10] = {
	    CStringGetTextDatum(d->name),      ObjectIdGetDatum(def->source), ObjectIdGetDatum(d->target),
	    ObjectIdGetDatum(d->query),        BoolGetDatum(d->owns),         CStringGetTextDatum(ModeName(d->mode)),
	    OidOrNull(d->totals, &nulls[6]),   OidOrNull(d->log, &nulls[7]),  options,
	    OidOrNull(d->crossings, &nulls[9])};
	ExecuteAsCatalogOwner(crossings
	                          ? "INSERT INTO counters.counter (name, source, target, query, owns_target, mode, "
	                            "totals, log, options, crossings) VALUES ($1, $2::pg_catalog.regclass, "
	                            "$3::pg_catalog.regclass, $4::pg_catalog.regclass, $5, $6, $7::pg_catalog.regclass, "
	                            "$8::pg_catalog.regclass, $9, $10::pg_catalog.regclass)"
	                          : "INSERT INTO counters.counter (name, source, target, query, owns_target, mode, "
	                            "totals, log, options) VALUES ($1, $2::pg_catalog.regclass, "
	                            "$3::pg_catalog.regclass, $4::pg_catalog.regclass, $5, $6, $7::pg_catalog.regclass, "
	                            "$8::pg_catalog.regclass, $9)",
	                      crossings ? 10 : 9, argtypes, values, nulls, SPI_OK_INSERT, true);
	CounterChanged(d->name, def->source);
	if (OidIsValid(def->parent))
		CacheInvalidateRelcacheByRelid(def->parent);
	CommandCounterIncrement();
	return def->source;
}

} // namespace counters
