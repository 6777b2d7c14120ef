/*
 * model.hpp: what a counter is, decided once. Its definition decomposed into the universal formula (definition.cpp);
 * its catalog row with typed options, read by one reader and written by one writer (catalog.cpp, options.cpp),
 * entered only through Register (register.cpp), kept by a dump as its description (restore.cpp); the locks of a
 * change (lock.cpp); its mode, names, relations and their order (counter.cpp); its layout, where its values live and
 * its columns in each relation (layout.cpp); whose code it runs and the one way to run it (security.cpp); its keys in
 * indexes (keys.cpp); SPI (spi.cpp). What it asks of an integration (Citus) goes through IntegrationHooks: the model
 * includes nothing but counters.hpp, compat.hpp and its own header.
 */
#pragma once

#include "counters.hpp"

namespace counters {

/* How a row contributes to one value column. */
enum class ValueKind { CountStar, CountArg, Sum, Extreme, Distinct };

/*
 * How contributions are summed: exactly in int64 (overflow is an error) or as numeric; or, for min() and max(), not
 * summed: a key's delta keeps the most extreme value its rows added and the most extreme they removed.
 */
enum class AccumKind { Int64, Numeric, Extreme };

/*
 * The aggregate kinds a value column keeps, one row each (aggregates.cpp): the aggregate functions that declare it,
 * whether it evaluates an argument (a NULL one contributes nothing), what a row that passes the WHERE and FILTER
 * contributes -- one (counts) or its argument (sums) -- how contributions are summed, and the modes that keep it. A
 * row's old version subtracts what its new one adds; deltas of one key add up; a stored value is checked and rebuilt
 * by the definition view, which recomputes the aggregate. The analysis (definition.cpp) and the write path
 * (capture.cpp) dispatch through it; a new kind is a new row.
 */
enum class Contribution { One, Argument, Extreme, Distinct };
struct AggregateKind {
	ValueKind kind;
	const char *name; /* as the definition writes it */
	bool takes_arg;
	Contribution contributes;
	AccumKind accum;
	unsigned modes; /* bit (1 << (int)Mode) for each mode that keeps it */
	int direction;  /* an extreme: 1 keeps the greatest (max), -1 the least (min); else 0 */
};
/* The kind an aggregate function declares (its pg_aggregate OID), or NULL when no kind keeps it. */
const AggregateKind *AggregateOfFunction(Oid aggfnoid);
/* The kind of aggregate `agg` as written: AggregateOfFunction's, or count(DISTINCT x)'s; NULL when no kind keeps it. */
const AggregateKind *AggregateOf(const Aggref *agg);
/*
 * Whether value column `vd` reads the source again when it is applied, through an index on (keys, argument): min() and
 * max() (a removal that reaches the extreme), count(DISTINCT x) (whether a changed (key, x) pair still has rows).
 */
struct ValueDef;
bool ReadsSource(const ValueDef *vd);
/* Whether kind `kind` is kept in mode `mode` (a Mode, as an int: the model's modes are declared below). */
bool KindKeptIn(const AggregateKind *kind, int mode);
/* The sort operator of aggregate `aggfnoid` when it is PostgreSQL's own min() or max(), else InvalidOid. */
Oid ExtremeSortOperator(Oid aggfnoid);
/*
 * For an aggregate no kind keeps (with DISTINCT, or not) whose argument deparses as `arg`: how it is kept exactly
 * today from counts and sums (docs/aggregates.md), as a hint; NULL when there is no such way.
 */
const char *RecipeOf(Oid aggfnoid, bool distinct, const char *arg);

/*
 * Kinds kept as two accumulators, value columns of counts and sums the definition also selects (added to it when it
 * does not: `avg(x) AS a` keeps `sum(x) AS a_sum` and `count(x) AS a_count`), and read through an expression of them:
 * a stored generated column of the counter table, named as the definition names the aggregate. Exact as its
 * accumulators are; one row per aggregate function (aggregates.cpp). `read` is a format of the accumulators' quoted
 * column names, %1$s and %2$s, as a generated column's expression; `type` the result's type, as CREATE TABLE writes
 * it; `suffixes` name the accumulators a definition is given ("<column>_<suffix>").
 */
struct DerivedKind {
	const char *name; /* as the definition writes it */
	const char *type;
	const char *suffixes[2];
	const char *read;
	bool fixed_scale; /* a numeric argument must have a declared scale (numeric(p, s)): see derived.cpp */
};
/* The kind an aggregate function declares that is kept as accumulators, or NULL. */
const DerivedKind *DerivedKindOf(Oid aggfnoid);
/*
 * The two accumulators of `agg`, an aggregate of a derived kind, as the aggregates a definition selects for them (with
 * its argument and FILTER): what a definition is given, and what its columns are matched with.
 */
void DerivedAccumulators(const Aggref *agg, Aggref *out[2]);

struct KeyDef {
	const char *column_name;
	Expr *expr; /* planned, Vars of the source at varno 1 */
	Oid type;
	int32 typmod;
	Oid collation;
	bool not_null; /* a plain NOT NULL column of the source */
};

struct ValueDef {
	const char *column_name;
	ValueKind kind;
	const AggregateKind *aggregate; /* the row of its kind */
	AccumKind accum;
	Oid arg_type; /* base type of the summed expression */
	Expr *arg;    /* planned; NULL for count(*) */
	Expr *filter; /* planned FILTER (WHERE ...) condition, or NULL */
	/*
	 * an extreme: the argument's type as stored, its collation and the aggregate's sort operator (< or >); a distinct
	 * count: the argument's type and collation, and the ordering operator (<) its DISTINCT compares with
	 */
	Oid extreme_type;
	Oid collation;
	Oid sortop;
};
/* The type a value column is stored as, in every relation that holds it, and as CREATE TABLE writes it. */
Oid StoredType(const ValueDef *vd);
const char *StoredTypeName(const ValueDef *vd);
/*
 * A value column's "nothing counted", in SQL: 0, or NULL for an extreme; `expr` (a column of it, which may be NULL)
 * with NULL read as that; the test that it holds something.
 */
const char *ZeroOf(const ValueDef *vd);
/* What CREATE TABLE writes after a value column's type: NOT NULL DEFAULT 0, or nothing for an extreme. */
const char *ValueConstraints(const ValueDef *vd);
const char *ValueOrZero(const ValueDef *vd, const char *expr);
const char *NonzeroTest(const ValueDef *vd, const char *expr);

/*
 * A column of a derived kind: not one of the counter's columns (its accumulators are), but a generated column of the
 * counter table, after the `position` counter columns the definition selects before it.
 */
struct DerivedDef {
	const char *column_name;
	const DerivedKind *kind;
	int accumulators[2]; /* into values */
	int position;
};

/* One column of the counter, in definition order. */
struct ColumnDef {
	bool is_key;
	int index; /* into keys or values */
};

/* A counter definition decomposed into the universal formula. */
struct CounterDef {
	const char *name;
	Oid source;
	int nkeys;
	KeyDef *keys;
	int nvalues;
	ValueDef *values;
	int ncolumns;
	ColumnDef *columns;
	int nderived;
	DerivedDef *derived;
	List *quals; /* planned WHERE clause, implicit AND, Vars at varno 1 */
	/*
	 * Counted through a parent row (FROM source JOIN parent ON source.child_key = parent.parent_key): expressions read
	 * the parent's columns as Vars at varno 2. InvalidOid: a single-table counter.
	 */
	Oid parent;
	AttrNumber child_key;  /* in the source */
	AttrNumber parent_key; /* in the parent: a unique integer column */
	Oid join_type;         /* int2, int4 or int8: both columns' type */
};

/*
 * Analyse a single-table aggregate query (as parse analysis or a view's rule produced it) for counter `name`.
 * Raises a clear error naming the counter and the offending part for anything the universal formula cannot
 * maintain exactly. `column_names` (may be NULL) overrides the target list names, e.g. with a view's attributes.
 * Allocates in CurrentMemoryContext, and may rewrite `query` in place (give it a copy of a cached one).
 */
CounterDef *AnalyzeDefinition(const char *name, Query *query, TupleDesc column_names, Oid source = InvalidOid);
/*
 * The checks of a definition's query as a whole (one SELECT, grouped, no WITH, subquery, window, HAVING, ORDER BY,
 * LIMIT ...): 0A000 or 42P17 naming the counter. AnalyzeDefinition makes them first; a chain (chain.cpp) too.
 */
void RequireAggregateQuery(const char *name, Query *query);
/* A unique, immediately checked, non-partial index on exactly column `attnum` of `relid` (a parent's key). */
bool HasUniqueIndexOn(Oid relid, AttrNumber attnum);
/* Whether target entry `tle` of `query` is one of its GROUP BY expressions. */
bool IsGroupKey(Query *query, TargetEntry *tle);
/*
 * The two columns a join's ON clause compares (*a, *b): NULL when it is an inner join ON one = between integer columns
 * of the same type of two tables, else what is wrong with it, for a message.
 */
const char *JoinColumns(const JoinExpr *join, Var **a, Var **b);
/*
 * 55000 naming the counter when the parent column it joins has no unique index (any more): compiling a counter
 * through a parent row, whose stored join is oriented by the catalog's source whatever indexes exist.
 */
void RequireUniqueParentKey(const char *name, const CounterDef *def);

/*
 * derived.cpp: AddAccumulators appends to a definition's select list (parse analysis's) the accumulators its derived
 * aggregates lack, and says whether it did; MatchDerived finds each derived column's accumulators among the value
 * columns (their aggregates in `values`, the derived ones in `derived`), or refuses the definition (42P17).
 */
bool AddAccumulators(Query *query);
/* The derived column of `def` named `column`, or NULL. */
const DerivedDef *FindDerived(const CounterDef *def, const char *column);
/* The column (definition order: into def->columns) that is value column `v`. */
int ValueColumnIndex(const CounterDef *def, int v);
void MatchDerived(const char *counter, CounterDef *def, Aggref *const *derived, Aggref *const *values);

/* A counter's mode, as counters.counter.mode names it. */
enum class Mode { Exact, Log, Sharded };
/* Whether a mode keeps rows pending (log: the log, sharded: the slots) beside the totals, which compaction folds. */
bool HasPending(Mode mode);
/* A mode's name, and back: LookupModeName says whether `name` is one; ParseModeName reads the catalog's (else exact).
 */
const char *ModeName(Mode mode);
bool LookupModeName(const char *name, Mode *mode);
Mode ParseModeName(const char *name);

/*
 * 0A000 when a value column of `def` is of a kind `mode` cannot keep (min() and max(): exact mode only); on every
 * declaration, restore and mode switch.
 */
void RequireKindsKept(const char *name, const CounterDef *def, Mode mode);
/* 0A000, with the CREATE INDEX to run, when a min() or max() column has no index to read it by (ExtremeIndexOf). */
void RequireExtremeIndexes(const char *name, const CounterDef *def);

/* ---- a counter's options, typed (options.cpp: the one reader and writer of counters.counter.options) ---- */

/* sharded mode: slot rows per key, when alter_counter was not told (max_slots), and the range it accepts */
constexpr int MAX_SLOTS_DEFAULT = 16;
constexpr int MAX_SLOTS_MIN = 1;
constexpr int MAX_SLOTS_MAX = 1024;

/* counters.set_bounds of one value column (numeric bounds; has_min/has_max say which are set) */
struct ColumnBounds {
	const char *column;
	bool has_min;
	bool has_max;
	Datum min;
	Datum max;
};
/* counters.set_thresholds (or a window's) of one value column */
struct ColumnThresholds {
	const char *column;
	int nvalues;
	Datum *values;        /* numeric, as set (set_thresholds sorts them) */
	Datum every;          /* numeric step of repeating thresholds; (Datum)0: none */
	const char *callback; /* regprocedure, qualified (ResolveCallback); NULL: none */
};
/* counters.set_window_thresholds */
struct WindowOptions {
	const char *bucket; /* key column */
	const char *width;  /* interval */
	int ncolumns;       /* value columns, in C order */
	ColumnThresholds *columns;
};
struct CounterOptions {
	int nbounds;
	ColumnBounds *bounds;
	int nthresholds;
	ColumnThresholds *thresholds; /* in C order of their columns */
	WindowOptions *window;        /* NULL: none */
	const char *retention_column; /* counters.set_retention: a key column (NULL: none), */
	const char *retention_keep;   /* ... and the interval kept */
	const char *touch;            /* counters.set_touch: a timestamp column of the target (NULL: none) */
	bool keep_zero;               /* counters.set_keep_zero */
	bool deferred;                /* counters.set_deferred: its deltas wait for the commit (write/deferred.cpp) */
	const char *part_of;          /* a level of this counter through a chain of parent rows (NULL: none) */
	const char *chain;            /* a counter through a chain: its whole definition, as declared (NULL: none) */
	int max_slots;                /* sharded mode (MAX_SLOTS_DEFAULT unless set) */
	bool max_slots_set;
	bool building;          /* a concurrent declaration or rebuild is under way, */
	bool building_has_mode; /* ... ending in a mode it names, */
	Mode building_mode;
	int building_max_slots; /* ... with these slots (sharded; -1: not named) */
	const char *invalid;    /* why these options cannot be used as written (NULL: they can) */
};
/*
 * Options from the catalog's jsonb (isnull: none); in CurrentMemoryContext. Reading never fails: a value that cannot
 * be used (a max_slots out of range, a bound that is not a number) is left at its default and said in `invalid`, so
 * that one row a superuser wrote by hand stops only its own counter (RequireValidOptions), never the reading of the
 * catalog by every DDL statement and every other counter.
 */
const CounterOptions *ParseOptions(Datum options, bool isnull);
/* 22023 naming the counter if its options are invalid: where a counter's options are used (compiling, maintaining). */
void RequireValidOptions(const Counter *e);
/* The options of counter `name` now (latest snapshot); none if there is no such counter. */
const CounterOptions *CurrentOptions(const char *name);
/* A callback as its options name it: the function, or InvalidOid when it no longer exists. */
Oid ResolveCallback(const char *callback);
/* A key type a retention or a window can age out: date, timestamp, timestamptz. */
bool IsTimeBucketType(Oid type);
/*
 * Options written back from the typed fields (options.cpp, one table of the keys): all the user's settings
 * (RestoreOptions: the counter's own state, building and last_rebuild, is not written), or the value of one key
 * (isnull: none left; written by WriteOption). IsOptionKey: a key SetOption may write. OptionKeys: the keys of the
 * user's settings (state false) or of the counter's own state (never written back, never in a description), a text[].
 */
Datum OptionsJsonb(const CounterOptions *o);
Datum OptionJsonb(const CounterOptions *o, const char *key, bool *isnull);
bool IsOptionKey(const char *key);
Datum OptionKeys(bool state);
/*
 * Per-column option entries (ColumnBounds, ColumnThresholds: each names its `column`): a copy of `n` entries without
 * `column`'s, plus `entry` (NULL: none); *n becomes the new number.
 */
template <typename Entry>
Entry *
WithColumnEntry(const Entry *entries, int *n, const char *column, const Entry *entry)
{
	Entry *out = (Entry *)palloc0(sizeof(Entry) * (*n + 1));
	int m = 0;
	for (int i = 0; i < *n; i++)
		if (strcmp(entries[i].column, column) != 0)
			out[m++] = entries[i];
	if (entry != nullptr)
		out[m++] = *entry;
	*n = m;
	return out;
}

/*
 * Authorize, then act. EnterOwner takes an Authorization, the proof that whoever started the work may make it run as
 * that role, and only the Authorize functions below make one, each after its check (PostgreSQL's order for VACUUM,
 * REINDEX and REFRESH MATERIALIZED VIEW: check the caller, then switch):
 *   - AuthorizeDeclaration: `principal` (the caller; for a description, its view's owner) has the privileges of the
 *     owner of every relation in `rels` -- every relation a definition names, found in its raw parse or its view's
 *     rule before anything is analysed -- and the counter's owner `owner` has them too, and is a role `principal` has
 *     the privileges of: declaring, redefining, adopting;
 *   - AuthorizeMaintainer: the caller has the privileges of the owner of every relation of a counter: changing and
 *     maintaining it;
 *   - AuthorizedByCatalog: a counter read from the catalog, which only Register writes, after an AuthorizeDeclaration:
 *     running the counter's own stored code (its definition, key types, callbacks) for whoever triggers it -- a writer
 *     of its source, a reader of its keys, an event trigger, the background worker -- never code of the caller's;
 *   - AuthorizeTableOwner: the caller has the privileges of a table's owner (its rules and policies run as it);
 *   - AuthorizeCatalogOwner: the extension's own fixed statements over its catalog, as the catalog's owner;
 *   - AuthorizeCaller: the caller itself, restricted.
 */
class Authorization {
  public:
	/* the role the work runs as */
	Oid
	role() const
	{
		return role_;
	}
	/* whose rights were checked (InvalidOid: the counter's catalog row, or the extension itself) */
	Oid
	principal() const
	{
		return principal_;
	}

  private:
	Authorization(Oid role, Oid principal) : role_(role), principal_(principal) {}
	Oid role_;
	Oid principal_;
	friend Authorization AuthorizeDeclaration(const char *counter, Oid principal, List *rels, Oid owner);
	friend Authorization AuthorizeMaintainer(const Counter *e);
	friend Authorization AuthorizedByCatalog(const Counter *e);
	friend Authorization AuthorizeTableOwner(Oid rel);
	friend Authorization AuthorizeCatalogOwner();
	friend Authorization AuthorizeCaller();
};
Authorization AuthorizeDeclaration(const char *counter, Oid principal, List *rels, Oid owner);
Authorization AuthorizeMaintainer(const Counter *e);
Authorization AuthorizedByCatalog(const Counter *e);
Authorization AuthorizeTableOwner(Oid rel);
Authorization AuthorizeCatalogOwner();
Authorization AuthorizeCaller();

struct CounterLayout; /* (layout.cpp) */
/* One row of counters.counter (catalog.cpp). Relations absent in the row are InvalidOid. */
struct Counter {
	const char *name;
	Oid source;
	Oid target; /* what users read: the counter table, an existing table, or (log, sharded) the view */
	Oid query;  /* the definition view */
	Oid totals; /* log and sharded mode: the folded values */
	Oid log;    /* log mode: the log; sharded mode: the slots */
	bool owns_target;
	Mode mode;
	Oid crossings; /* window thresholds: which each prefix is at or above, as announced (a table) */
	const CounterOptions *options;
	/* its definition, analysed once (DefinitionOf), in the Counter's own memory context; NULL until asked for */
	mutable CounterDef *definition;
	/* its layout, found once (LayoutOf), in the same context; NULL until asked for */
	mutable CounterLayout *layout;
};

/* ---- layout.cpp: a counter's columns in its relations ---- */
/* Whether column `attnum` of relation `relid` is declared NOT NULL (false for a column that does not exist). */
bool AttributeNotNull(Oid relid, AttrNumber attnum);
/* The type a counter keeps in column `i` (definition order): the key's type, or int8 or numeric as the value sums. */
Oid ColumnType(const CounterDef *def, int i);
/*
 * The first def->ncolumns columns of `rel`, a table create_counter made, by position (its columns follow the
 * definition's; renames are followed), each checked to have the type the counter keeps there (42804 naming the
 * counter; 42P16 when it has fewer): their names and (attnums not NULL) attribute numbers, in definition order.
 */
void ColumnsByPosition(const CounterDef *def, Oid rel, const char ***names, AttrNumber **attnums);
/*
 * A counter's columns in one of its relations `rel` -- its counter table or totals, its log or slots, the view users
 * read -- by position (ColumnsByPosition: names and attribute numbers, in definition order); and of a table with a
 * key index (keyed), the keys that index has by their digest (by key number; NULL: none), and of sharded mode's slots
 * (slots), the slot column (the integer column after the definition's, last in the key index). The one place that
 * finds them: LayoutOf fills a counter's layout from it, which both planes read (the write plane also finds a Citus
 * shard's own columns with it).
 */
struct RelationColumns {
	const char **names;
	AttrNumber *attnums;
	bool *digested;
	AttrNumber slot;
};
RelationColumns ColumnsIn(const CounterDef *def, Oid rel, bool keyed, bool slots);
/*
 * The table that holds a counter's values: its totals (log, sharded mode), else the relation users read (the counter
 * table, or an existing table that keeps counter-cache columns). The one place that says which.
 */
Oid ValuesTable(const Counter *e);
/* The column a cross-shard counter's totals and log are distributed by on Citus (CounterLayout.anchored). */
#define ANCHOR_COLUMN "counters_anchor"
/*
 * A counter's layout: its columns, in definition order, in each of its relations, found by position in the tables it
 * made (ColumnsIn) and named by the definition's aliases in an existing table that keeps counter-cache columns; the
 * keys its values table's key index has by their digest; and the key column its retention ages out. What its options
 * say beyond that (keep_zero, the interval kept) callers read from e->options.
 */
struct CounterLayout {
	Oid table;    /* ValuesTable(e) */
	int ncolumns; /* in definition order */
	bool *is_key;
	const char **def_names;     /* in the definition view */
	RelationColumns in_table;   /* in the values table, and its key index's digested keys (by key number) */
	RelationColumns in_read;    /* in the relation users read (e->target): the values table, or the view of log and
	                               sharded mode */
	RelationColumns in_pending; /* in the log (log mode) or the slots (sharded: and the slot column); names NULL in
	                               exact mode */
	bool *digested;             /* by column: the keys in_table has by their digest (NULL: none) */
	/*
	 * Citus, a key without the distribution column: the totals and log have ANCHOR_COLUMN after the definition's, their
	 * distribution column; a key's rows are per-shard partials, one per anchor (docs/citus.md, cross-shard keys)
	 */
	bool anchored;
	int retention_column; /* the key column options.retention names (-1: none), */
	Oid retention_type;   /* ... and its type */
};
/*
 * The layout of a counter read from the catalog: found once per Counter, from its definition (DefinitionOf) and its
 * tables, and kept with it in its memory context (callers share it: they do not change it).
 */
const CounterLayout *LayoutOf(const Counter *e);
/*
 * The columns of counter `e` in `rel` as its layout has them: its values table's, the relation users read, its log's
 * or slots'; NULL for any other relation (a Citus shard of one of them: its own attribute numbers), whose layout is
 * then not looked for.
 */
const RelationColumns *LayoutColumnsIn(const Counter *e, Oid rel);

/* ---- lock.cpp: the locks of a change, in one order ---- */
/*
 * Lock a source and every partition under it (as LOCK TABLE does): a writer that names a partition takes no lock on
 * the partitioned table, and must wait too.
 */
void LockSource(Oid source, LOCKMODE mode);
/*
 * The tables whose writes a counter follows, locked in one order: its source (and partitions), then the parent it
 * joins (a counter through a parent row). Every change of a counter that must keep writers out locks them so.
 */
void LockCounterSources(const Counter *e, LOCKMODE mode);
/*
 * Whether a counter read before its locks is still the counter read after them: the same relations in the same mode
 * (a change that committed meanwhile -- a redefinition, a mode switch, a drop and declaration -- leaves neither; an
 * option changed is not a new counter). The one test after a lock, for changes (BeginChange) and maintenance.
 */
bool SameCounter(const Counter *before, const Counter *after);
/*
 * Run `lock(arg)`, which takes the locks of a change (and may look the counter up again), without making new
 * transactions queue behind it for long: each attempt waits at most 50 ms for a lock (lock_timeout, in a
 * subtransaction that keeps the locks it took when it succeeds and releases them when not), then steps aside for a
 * growing pause (up to 1 s) and tries again, until the caller's own lock_timeout, if set, has passed (55P03). A
 * transaction left open on the source thus delays the change, not every writer behind it. (`counter` and `rel` name
 * them in the error.) Not for Citus tables, whose locks are taken on every node.
 */
void LockPolitely(const char *counter, Oid rel, void (*lock)(void *), void *arg);
/*
 * The parent of a counter through a parent row, from its definition (DefinitionOf: analysed once per Counter);
 * InvalidOid: none, or its definition view is gone (a broken counter dropped, or one read while DDL drops it).
 */
Oid CounterParent(const Counter *e);

/* ---- catalog.cpp: the rows of counters.counter and counters.maintenance, read and written ---- */
/* Counters named `name` (NULL: all), in name order, as the latest snapshot sees them. */
List *ReadCatalog(const char *name);
/* ... as this node's triggers read it (a Citus worker: the replica), for what each node does for its own shards. */
List *ReadCatalogHere(const char *name);
/* The counters one of whose relations (target, totals, log or slots, definition view) is `rel`, in name order. */
List *ReadCatalogOfRelation(Oid rel);
/*
 * The counter one of whose own relations `rel` is (its definition view, the table it created, its totals, log or
 * slots, the view of log and sharded mode; not an existing table that keeps counter-cache columns), or NULL; and what
 * `rel` is to it, for a message.
 */
Counter *OwnerCounterOf(Oid rel, const char **what);
/* 2BP01 if `rel` is one of a counter's own relations: `command` (DROP, TRUNCATE) would leave the counter wrong. */
void GuardCounterRelation(Oid rel, const char *command);
/* The counter named `name`, or an error (42704). */
Counter *LookupCounter(const char *name);
/*
 * A counter's catalog row changed (`name`, NULL: no row Citus copies changed): Citus's replica follows, and every
 * backend compiles the counters of `source` (InvalidOid: none left to) again. Every write of the catalog ends so.
 */
void CounterChanged(const char *name, Oid source);
/* Run a catalog write as the catalog's owner; returns the rows processed. */
uint64 ExecuteAsCatalogOwner(const char *sql, int nargs, Oid *argtypes, Datum *values, const char *nulls, int expected,
                             bool exactly_one);
/* Whether counters.counter has column "crossings" (0.5 on): a catalog not updated yet has not. */
bool HasCrossingsColumn();
/* An OID as an SPI argument: `oid`, and in *null whether it is NULL (InvalidOid). */
Datum OidOrNull(Oid oid, char *null);
/*
 * Catalog writes (catalog.cpp), each after checking the caller's rights on every relation the row names: remove a
 * counter, remove a counter one of whose relations is gone, change its mode and relations, set (or remove, isnull)
 * one entry of its options.
 */
void Unregister(const Counter *e);
Counter *Forget(const char *name);
void SetMode(const char *name, Oid target, Mode mode, Oid totals, Oid log);
/*
 * 0A000 (or 2BP01) unless counter `e` may be switched to `mode`: the capability table (its kind; what only exact mode
 * keeps: bounds, window thresholds, keep_zero; what exact mode cannot keep on its table: thresholds on a
 * hash-distributed one), views other than `except` reading its table `table` (with `hint` as the hint, when given:
 * what else the caller may do).
 */
void RequireModeAllowed(const Counter *e, Mode mode, Oid table, Oid except, const char *hint = nullptr);
void SetOption(const char *name, const char *key, Datum value, bool isnull);
/*
 * A setter's read-modify-write of counter `name`'s options: LockOptions locks its catalog row (two setters of one
 * counter run one after the other, each on what the other wrote) and reads the options now; WriteOption writes the
 * value of `key` from the typed fields (OptionJsonb).
 */
CounterOptions LockOptions(const char *name);
void WriteOption(const char *name, const CounterOptions *o, const char *key);
/* The table of counter `name`'s window state (counters.counter.crossings; InvalidOid: none). */
void SetCrossings(const char *name, Oid crossings);
/* Options kept across a change of definition written back to the new definition `def` (what still applies). */
void RestoreOptions(const char *name, const CounterOptions *kept, const CounterDef *def);
/*
 * The catalog rows the compiled cache is built from (latest snapshot; on a Citus worker, the replica's): the counters
 * of `source`, or (as_parent) those whose definition joins it as the parent, in name order.
 */
List *ReadCountersOf(Oid source, bool as_parent = false);
/* Record what maintenance did to a counter in counters.maintenance: `columns` get `values` (see catalog.cpp). */
void NoteMaintenance(const char *name, int ncolumns, const char **columns, Oid *types, Datum *values,
                     const char *nulls);
/* Whether view `view` reads column `attnum` of `rel` (pg_depend). */
bool ViewUsesColumn(Oid view, Oid rel, AttrNumber attnum);
/* The views with a check option that read `rel`, directly or through other views, as a list, or NULL. */
char *CheckOptionViews(Oid rel);
/* ---- features.cpp: what each kind of counter may do ---- */
/*
 * What a kind of counter may do (features.cpp, one table): RequireFeature refuses (0A000, naming the counter) a feature
 * the counter's kind cannot have -- for its mode, its kind of table (its own, or counter-cache columns), a Citus
 * source. RequireFeatureOf: the same for a counter being declared (its name, source, kind of table, mode, target).
 */
enum class Feature {
	Bounds,
	Thresholds,
	WindowThresholds,
	KeepZero,
	Retention,
	Touch,
	LogShardedMode,
	DeclareConcurrently,
	Rebuild,
	RebuildConcurrently,
	Redefine,
	RedefineConcurrently,
	Verify,
	Extremes,
	DistinctCount,
	Deferred
};
void RequireFeature(const Counter *e, Feature feature);
/* Counter `e` may have `feature` (Citus aside): for a pass over every counter, which skips, with a NOTICE, those that
 * may not. */
bool HasFeature(const Counter *e, Feature feature);
void RequireFeatureOf(const char *name, Oid source, bool owns_target, Mode mode, Oid table, Feature feature);
/*
 * A counter of `source` with `options` may be switched to `mode`: the features it holds that need exact mode refuse
 * leaving it, each; those exact mode cannot keep on `source` (thresholds on a hash-distributed table) refuse entering.
 */
void RequireModeKeeps(const char *name, Oid source, const CounterOptions *options, Mode mode, Oid table);

/*
 * The model's integration hooks: what it asks of an extension that keeps a counter's tables on other nodes (Citus),
 * as PostgreSQL's own hooks, a table of function pointers filled when the library is loaded (citus::Init, from
 * _PG_init). The model includes nothing of an integration; each hook's default is inert, what the model does where
 * there is none.
 */
struct IntegrationHooks {
	/* The table whose shard `relid` is, or InvalidOid (default: InvalidOid). */
	Oid (*table_of_shard)(Oid relid);
	/* The relation the catalog is read from on this node (default: "counters.counter"). */
	const char *(*catalog_relation)();
	/* This node reads a replica of the catalog: no description is written or adopted here (default: false). */
	bool (*on_worker)();
	/* Counter `name`'s catalog row copied (or removed) where the other nodes read it (default: nothing). */
	void (*sync_replica)(const char *name);
	/* `rel` locked in `mode` on every node too (default: nothing). */
	void (*lock_on_every_node)(Oid rel, LOCKMODE mode);
	/*
	 * 0A000 if `what` is not supported for counter `counter` of `source` (default: nothing refused); `distributed`: it
	 * is on a hash-distributed table, only not on other Citus tables. True when `source` is one (and passed).
	 */
	bool (*refuse_feature)(const char *counter, Oid source, const char *what, bool distributed);
	/* The conversion the statement being run would make of a table, dropping it, or NULL (default: NULL). */
	const char *(*conversion)();
};
extern IntegrationHooks integration_hooks;

/* ---- spi.cpp: connecting, reading with the latest snapshot ---- */
/* SPI_connect, or an error. */
void SpiConnect();
/*
 * Run an SPI query (SPI connected) with the latest snapshot: it sees what committed before the locks the caller holds
 * were granted, whatever the transaction's snapshot. (read_only = false: also the current command's changes.)
 */
int QueryLatest(const char *sql, int nargs, Oid *argtypes, Datum *values, const char *nulls, bool read_only = true);

/* ---- register.cpp: the one way into the catalog ---- */
/*
 * A counter as it is declared: its name, its relations, its mode and options (NULL: none), the whole row Register
 * writes. The relations of modes other than `mode` are InvalidOid.
 */
struct Declaration {
	const char *name;
	Oid query; /* the definition view */
	Oid target;
	bool owns;
	Mode mode;
	Oid totals;
	Oid log;
	Oid crossings;
	const CounterOptions *options;
	/* the table it counts, when known (a catalog row, a description): which side of a join is the child */
	Oid source;
};
/*
 * 42602 unless `name` can name a counter: 1 to COUNTER_NAME_MAX_BYTES bytes (its relations are named after it).
 */
void CheckCounterName(const char *name);
/*
 * 42P17 unless existing table `target` has a unique index on exactly the keys of `def` (a counter kept in its columns
 * updates the row of each key). Checked when a counter is declared; not when a restore declares one again, whose
 * indexes the restore may create after its triggers.
 */
void RequireTargetKey(const char *name, const CounterDef *def, Oid target);
/*
 * Options `kept` as definition `def` can keep them (window_ok: an exact counter with a table of its own), what did
 * not survive said in a NOTICE naming the counter: Register's, and RestoreOptions' after a change of definition.
 */
CounterOptions FitOptions(const char *name, const CounterOptions *kept, const CounterDef *def, bool window_ok);
/*
 * What Register checks of a declaration, authorized by `auth`, and what it writes: the analysed definition, and the
 * options to write in *options. Also what a catalog row inserted by a restore is checked with (CatalogRowInserted).
 */
CounterDef *Validate(const Declaration *d, const Authorization &auth, Datum *options);
/*
 * The one way a counter enters the catalog (create_counter, a redefinition or retype, adoption of a description, the
 * entry points of earlier versions): `auth` must authorize the owner of the table that holds its values for every
 * relation the row names -- its view's rule's relations, target, totals, log, window state, checked again here before
 * the view is analysed -- then the row is validated (name, relation kinds, the mode's shape, the view a definition
 * whose columns the tables keep, options re-serialised from their typed form, those naming columns the definition
 * lacks dropped with a NOTICE) and written whole. Returns the source, for the caller to compile it at once.
 */
Oid Register(const Declaration *d, const Authorization &auth);

/* ---- restore.cpp: what a dump keeps of a counter ---- */
/*
 * Counter `name`'s catalog row written as the comment of its definition view, "counters: {...}": what a dump keeps of
 * a counter (the catalog's rows are not dumped), and what Adopt declares it again from.
 */
void Describe(const char *name);
/*
 * The counters described by the views that read `rel` (or the root of its partition tree), declared again where the
 * catalog has no row of that name: a restored database's. A description is data, not a declaration: it is honoured
 * only when its view's owner has the privileges of the owner of every relation it names (the view's own rule
 * included), and declared through Register, as that owner would declare it; any other (malformed, not honoured,
 * inconsistent, its name taken) is skipped with a WARNING naming the view, and never fails the caller. Adopters
 * queue (the first declares, the next find its rows). Returns whether any was declared.
 */
bool Adopt(Oid rel);
/*
 * Adopt without waiting for another adopter (the DDL event trigger, which holds a lock on `rel` that the other may
 * need: a parallel restore creates the triggers of a chain's levels in several sessions): *busy, and nothing done,
 * when another adopter holds the queue.
 */
bool TryAdopt(Oid rel, bool *busy);
/* Whether a view that reads `rel` carries a description: a counter a restore has not declared again yet. */
bool Described(Oid rel);
/*
 * counters._catalog_row(): a catalog row inserted by another role than the catalog's owner (a restore by the counters'
 * owner): refused unless that role has the privileges of the owner of every relation it names. Returns the row.
 */
HeapTuple CatalogRowInserted(TriggerData *td);

/*
 * security.cpp: the one way to run a counter's code. Everything user-controlled -- a definition's expressions (and
 * parsing and planning them), casts and output functions of its key types, threshold callbacks, triggers, policies
 * and constraints of its tables -- runs between EnterOwner and LeaveOwner: as the counter's owner, inside a
 * security-restricted operation, with the settings `pins` names pinned, whoever started the work. A function that
 * reaches SPI or the executor either enters the scope itself or calls RequireOwnerScope first; only the fixed
 * queries of the catalogs (catalog.cpp's, restore.cpp's) are exempt (test/scripts/entries.sh checks both, function by
 * function). Entering takes an Authorization (above): no scope is entered before its check.
 */
enum {
	PIN_SEARCH_PATH = 1,  /* search_path = pg_catalog, pg_temp */
	PIN_OUTPUT = 2,       /* the settings that change the text of values marked immutable */
	PIN_ROW_SECURITY = 4, /* row_security = off: a query that policies would filter fails instead */
	PIN_CALLER_PATH = 8   /* search_path = the caller's, as the caller resolves it (a definition the caller typed) */
};
struct OwnerScope {
	Oid owner;
	Oid saved_user;
	int saved_sec;
	int level; /* the GUC nest level of the pinned settings, or 0 */
};
void EnterOwner(OwnerScope *scope, const Authorization &auth, int pins);
void LeaveOwner(OwnerScope *scope);
/* An internal error unless running as `owner` inside a security-restricted operation (between EnterOwner/Leave). */
void RequireOwnerScope(Oid owner);
/* An internal error unless inside some counter owner's scope (code that runs as whichever owner entered it). */
void RequireRestricted();
/*
 * The caller's search_path as the caller resolves it, spelled out (its schemas in order, pg_catalog where it is
 * implicitly searched, without its temporary schema, pg_temp last): what PIN_CALLER_PATH sets.
 */
char *CallerSearchPath();
/*
 * Run one statement of this code base's making (SPI connected; search_path pinned); an internal error unless SPI
 * returns `expected`. Statements that run no code -- CREATE or DROP TRIGGER, GRANT, RENAME, COMMENT, DROP, LOCK,
 * CREATE TABLE or VIEW, ALTER TABLE's replica identity and trigger switches -- run as whoever runs them (the owner's
 * privileges were checked); anything else (a query, an index build, a column's type or default) runs only inside
 * an owner's scope, where a counter's code may run.
 */
void Execute(const char *sql, int expected);
/* Open a GUC nest level with the given settings pinned; UnpinSettings(level) ends it (pins only, no role change). */
int PinSettings(int flags);
void UnpinSettings(int level);
Oid RelationOwner(Oid relid);
bool HasOwnerPrivileges(Oid relid, Oid role = InvalidOid);
/*
 * 42501 naming the counter unless the caller (`caller`, when the work already runs as the counter's owner) has the
 * privileges of `relid`'s owner; and unless the counter's owner `owner` has them (its code runs as that role).
 */
void RequireOwnerPrivileges(const char *counter, Oid relid, Oid caller = InvalidOid);
void RequireOwnerRights(const char *counter, Oid relid, Oid owner);
/* The caller has the privileges of the owner of every relation of the counter. */
bool MayMaintain(const Counter *e);
void RequireMaintainer(const Counter *e);
/* The caller may read the counter (SELECT on its target) or maintain it. */
bool MayRead(const Counter *e);
/*
 * Whose code a counter runs, the one rule: the owner of the table holding its values (its counter table, the totals
 * of log and sharded mode, or the existing table of counter-cache columns). A counter being declared gets the owner
 * of its target, or the declaring role when it creates its own table.
 */
Oid CounterOwner(const Counter *e);
/* ... and of a row not read as a Counter yet (a declaration): the owner of its totals, else of its target. */
Oid OwnerOfTable(Oid target, Oid totals);

/* Names derived from a counter: "<base>_<suffix>", shortened to an identifier; a definition column's name. */
/* "<counter>_definition", the definition view (COUNTER_NAME_MAX_BYTES leaves room for the suffix). */
char *DefinitionViewName(const char *counter);
char *DerivedName(const char *base, const char *suffix);
const char *ColumnName(const CounterDef *def, int i);
/* The number of the key (key) or value column the definition names `column`: into def->keys or def->values; -1: none */
int DefinitionColumn(const CounterDef *def, const char *column, bool key);
/* A definition's key columns, quoted, separated by ", ". */
char *KeyNames(const CounterDef *def);

/*
 * The capture triggers, in the order attach() creates them; a sink (counters.set_sink) has SINK_TRIGGER,
 * SINK_GUARD_TRIGGER and SINK_END_TRIGGER instead of INSERT_TRIGGER, UPDATE_TRIGGER and DELETE_TRIGGER. A table
 * (not a sink, not Citus's) also has REPLICA_TRIGGER (AFTER INSERT OR UPDATE OR DELETE, for each row) and
 * REPLICA_TRUNCATE_TRIGGER, enabled for the replica role only: logical replication's apply worker fires row triggers
 * only, and runs as the replica role, where the others do not fire (docs/replication.md).
 */
enum {
	BEGIN_TRIGGER,
	INSERT_TRIGGER,
	UPDATE_TRIGGER,
	DELETE_TRIGGER,
	TRUNCATE_TRIGGER,
	SINK_TRIGGER,
	SINK_GUARD_TRIGGER,
	SINK_END_TRIGGER,
	REPLICA_TRIGGER,
	REPLICA_TRUNCATE_TRIGGER,
	CAPTURE_TRIGGERS
};
const char *CaptureTriggerName(int trigger);
/*
 * The triggers on the parent of counters through a parent row: counters_parent_begin (BEFORE INSERT OR UPDATE OR
 * DELETE, for each statement: loads the library, so that the statement's frame is there), counters_parent_row (AFTER
 * UPDATE OR DELETE, for each row), counters_parent_insert (AFTER INSERT, new table), and counters_parent_truncate
 * (AFTER TRUNCATE); and, enabled for the replica role only, counters_parent_replica (AFTER INSERT OR UPDATE OR DELETE,
 * for each row) and counters_parent_replica_truncate (AFTER TRUNCATE), which refuse what that role writes to a parent
 * (the others do not fire for it, and would miss it).
 */
enum {
	PARENT_BEGIN_TRIGGER,
	PARENT_ROW_TRIGGER,
	PARENT_INSERT_TRIGGER,
	PARENT_TRUNCATE_TRIGGER,
	PARENT_REPLICA_TRIGGER,
	PARENT_REPLICA_TRUNCATE_TRIGGER,
	PARENT_TRIGGERS
};
const char *ParentTriggerName(int trigger);

/* The trigger on an existing table that keeps counter-cache columns (see TargetKeyRow), and counters_guard (BEFORE
 * TRUNCATE, for each statement) on a counter's own tables. */
extern const char *const target_key_trigger;
extern const char *const guard_trigger;

/* The function of trigger `name` on `rel`, or InvalidOid (and its pg_trigger.tgenabled); the OID of counters.capture().
 */
Oid TriggerFunction(Oid rel, const char *name, char *enabled = nullptr);
Oid CaptureFunction();

/*
 * A counter's own relations in the one order every change and maintenance locks them, after its source and parent:
 * the definition view, the relation users read, the log or slots, the totals, the window state. (Compaction takes the
 * log, then writes the totals; writers reach them only through the source, locked first.) Returns how many.
 */
int CounterRelations(const Counter *e, Oid *rels);
/*
 * The relations a counter cannot go on without, its source and those its row names but the window state: a counter
 * one of them is gone is forgotten, and maintaining it takes the privileges of each one's owner. Returns how many.
 */
int RequiredRelations(const Counter *e, Oid *rels);
/* One of them no longer exists (dropped behind the extension's back, or by a change that committed meanwhile). */
bool RelationsGone(const Counter *e);
/*
 * The relations a counter created, in the order they are dropped, views first: its definition view, the view of log and
 * sharded mode, the log or slots, the totals, the counter table it created, the window state; not an existing table
 * that keeps counter-cache columns. At most COUNTER_RELATIONS; returns how many.
 */
struct CreatedRelation {
	Oid rel;
	const char *kind; /* "VIEW" or "TABLE", as DROP names it */
};
constexpr int COUNTER_RELATIONS = 6;
int CreatedRelations(const Counter *e, CreatedRelation *out);
/*
 * Logical replication: the subscription that replicates one of the tables counter `e` created into this node (its
 * counter table, totals, log or slots), or NULL. Such a counter follows its publisher: the publisher's counts arrive
 * with its tables, and this node neither counts nor compacts it (docs/replication.md). *table: that table.
 */
const char *FollowedSubscription(const Counter *e, Oid *table);
/*
 * Whether maintenance (`what`: "compact", "rebuild", ...) may write counter `e`'s tables on this node: not during
 * recovery (a standby's counters are its primary's), not for a counter that follows its publisher. A counter named
 * (`named`) is refused with an error that says so; else it is skipped (false).
 */
bool MayWriteHere(const Counter *e, bool named, const char *what);

/* A sink (counters.set_sink): a table whose inserted rows are counted and not stored (it has the sink trigger). */
bool IsSink(Oid rel);

/* The declared source a relation feeds: its partitioned root, or itself. */
Oid SourceOf(Oid relid);

/* The counters whose source is `source`. */
List *ReadCatalogOfSource(Oid source);

/* 25001 unless the transaction takes a new snapshot per statement: `what` locks before it reads. */
void RequireReadCommitted(const char *what);

/*
 * What lives until the transaction ends (pending sink rows, key locks held, counters waiting to be declared again):
 * the context in *cxt, a child of TopTransactionContext made when first needed; when the transaction's end deletes
 * it, forget(NULL) runs, for the caller to clear *cxt and its lists.
 */
MemoryContext TransactionContext(MemoryContext *cxt, const char *name, void (*forget)(void *));
/*
 * Run body(arg) in a subtransaction of its own: NULL when it succeeded; else the subtransaction is rolled back and its
 * error returned (in the caller's memory context) -- unless returned(error) says it is not the body's to return (by
 * default: a cancel, or an operator's intervention such as a shutdown), which is raised again.
 */
ErrorData *TrySubtransaction(void (*body)(void *), void *arg, bool (*returned)(ErrorData *error) = nullptr);
/* ", " (or `sep`) before every item but the first, in a statement being built. */
void Sep(StringInfo buf, bool *first, const char *sep = ", ");

/*
 * Parse and analyse a definition's text (names resolve with the caller's search_path), with the declaring rules. A
 * definition whose derived aggregates lack their accumulators is given them: *stored (when asked for) is the text to
 * store, the definition as given or, given accumulators, deparsed with every name qualified but pg_catalog's (the
 * view is created from it with the search_path pinned).
 */
CounterDef *DescribeDefinition(const char *name, const char *definition, Oid owner, const char **stored = nullptr);
/*
 * A counter through a chain of parent rows (FROM a JOIN b ON ... JOIN c ON ..., three tables or more: chain.cpp) is
 * kept as one counter per level, each over the one below and one parent row. DescribeChain analyses `definition` as
 * DescribeDefinition does (as the owner) and, for a chain, sets *parts to the counters that keep it, bottom-up, in SQL
 * naming everything but pg_catalog's objects with their schema: the last one is the counter `name` itself; and
 * *declared to the whole definition so deparsed (kept in the counter's options, "chain": what it is declared again
 * from). Returns their number, or 0 for a definition of one table or one parent row.
 */
struct ChainPart {
	const char *name;
	const char *definition;
};
int DescribeChain(const char *name, const char *definition, Oid owner, ChainPart **parts, const char **declared);
/* The deepest chain kept, in tables (and the deepest stack of counters over counters followed). */
constexpr int MAX_CHAIN_DEPTH = 16;
/* The counters declared as the levels of counter `e` (part_of), bottom-up; NIL for most counters. */
List *ChainParts(const Counter *e);
/*
 * The exact counters that write counter `e`'s source (their own table, or counter-cache columns of an existing
 * table): the counters `e` counts over. BottomUp orders `counters` so that each comes after those it counts over
 * (and, `below`, adds them and the ones under them: what verifying or rebuilding `e` bottom-up goes through).
 */
List *CountersFeeding(const Counter *e);
/* 0A000 if counter `e` is a level of another counter's chain (part_of): `change` (e.g. "redefined") is that one's. */
void RequireWhole(const Counter *e, const char *change);
List *BottomUp(List *counters, bool below);
/* Whether a definition's text joins three tables or more (raw parsing: no code runs, nothing is resolved). */
bool JoinsThreeTables(const char *name, const char *definition);
/* Whether an analysed query joins three tables or more; DecomposeChain of such a query (chain.cpp). */
bool IsChainQuery(Query *query);
int DecomposeChain(const char *name, Query *query, ChainPart **parts, const char **declared);
/*
 * Keys too long for a btree entry (about 2,700 bytes: a URL, a user agent). A key column of an unbounded string type
 * (text, bytea, varchar or char without a short length limit; deterministic collation: equal means byte-equal) is
 * indexed as counters.key_digest(column): its bytes when short, else a tag and their SHA-256, compared exactly where
 * a row is found by it. DigestedKeyType says whether a key column is; KeyDigest computes the digest of a value of
 * base type `type` (a char value without its trailing spaces, as char compares); KeyBytesEqual compares two values
 * as the digest does. KEY_DIGEST_NAME names the SQL function in index expressions.
 */
bool DigestedKeyType(Oid type, int32 typmod, Oid collation);
Datum KeyDigest(Datum value, Oid type);
bool KeyBytesEqual(Datum a, Datum b, Oid type);
#define KEY_DIGEST_NAME "key_digest"
/* A key column as an index element and ON CONFLICT target: the column, or (digested) counters.key_digest() of it. */
char *KeyIndexElement(const char *quoted_column, bool digested);
/*
 * The unique btree index of `rel` (no predicate) on exactly the key columns `attnums` (nkeys; and `slot` last unless
 * InvalidAttrNumber), each a plain column or counters.key_digest() of one: key_of_column gets each index column's key
 * number and digested (may be NULL) whether key k is indexed by its digest. InvalidOid if there is none.
 */
/*
 * Whether `relid` has a valid index without a predicate (one that covers every row) that match(index's pg_index
 * tuple, arg) accepts: the scan behind the declaration's checks of a target's, a parent's and a source's indexes.
 */
bool AnyIndexOf(Oid relid, bool (*match)(HeapTuple index, const void *arg), const void *arg);
/*
 * The first index of `rel` that match(the index, opened, arg) accepts, or InvalidOid: the search behind
 * FindKeyIndexOf, a child key's index and a window state's index.
 */
Oid FirstIndexOf(Relation rel, bool (*match)(Relation index, void *arg), void *arg);
/*
 * An index of `rel` (the source of `def`, one of its partitions, or none) that finds value column `v`'s extreme (min()
 * or max()) per key with one descent: a valid btree index without a predicate whose leading columns are the keys (in
 * any order: key_of gets each one's key number), each with an equality for the key's type and collation, then the
 * argument, in the aggregate's operator family and collation; *backward: the extreme comes last in its order.
 * InvalidOid if there is none.
 */
Oid ExtremeIndexOf(const CounterDef *def, int v, Relation rel, int *key_of, bool *backward);
/*
 * The btree equality operator that compares index column `column` of `index` with a value of `type`, and the scan
 * key's subtype (InvalidOid: the operator class's own type, a polymorphic one's such as anyenum); InvalidOid if none.
 */
Oid IndexEqualityOperator(Relation index, int column, Oid type, Oid *subtype);
/* The function of the btree operator `strategy` of index column `column`'s own type, or InvalidOid. */
RegProcedure IndexColumnOperator(Relation index, int column, int16 strategy);
Oid FindKeyIndexOf(Relation rel, int nkeys, const AttrNumber *attnums, AttrNumber slot, int *key_of_column,
                   bool *digested);
/*
 * Every relation definition `definition` of counter `name` names (its FROM items, joins, subqueries, WITH queries),
 * found in its raw parse and resolved as its analysis will resolve them -- with the caller's search_path spelled out,
 * or (pinned) pg_catalog's -- without analysing it: no code runs. The relations to authorize before it is analysed.
 * *source: the table it counts (its first FROM item; InvalidOid when there is none to find: DescribeDefinition says
 * why), whose owner will own the counter. 42P01 for a name that resolves to no relation.
 */
List *DefinitionRelations(const char *name, const char *definition, bool pinned, Oid *source);
/* The relations view `view` reads, from its stored rule (nothing is analysed): what a description must authorize. */
List *ViewRelations(Oid view);
/* A key column's type as the counter table declares it (qualified, with typmod and a non-default collation). */
char *KeyColumnType(const KeyDef *key);
/* The analysed definition of counter `name`, stored as view `view`, planned as the role `auth` authorized. */
CounterDef *AnalyzeView(const char *name, Oid view, const Authorization &auth, Oid source = InvalidOid);
/*
 * The analysed definition of a counter read from the catalog (as its owner, AuthorizedByCatalog): analysed once per
 * Counter, kept with it (callers share it: they do not change it).
 */
CounterDef *DefinitionOf(const Counter *e);
/* A relation's schema-qualified, quoted name. */
char *QualifiedName(Oid relid);

/* Deparse an expression over the source (Vars at `varno`) for error messages. */
char *DeparseSourceExpr(Node *expr, Oid source, Index varno);

} // namespace counters
