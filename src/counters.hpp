/*
 * counters.hpp: the declarations the modules of src/ share (CONTRIBUTING.md maps the files onto the design).
 *
 * The dialect: C++17 used as C with namespaces, compiled without exceptions and RTTI, no standard library, memory
 * from palloc and memory contexts only. Every SQL-callable symbol is defined with COUNTERS_FUNCTION (functions.cpp),
 * the one C boundary. PostgreSQL errors are longjmps: no object with a destructor lives on a stack they can unwind.
 */
#pragma once

extern "C" {
#include "postgres.h"

#include "access/attmap.h"
#include "access/tupdesc.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/bitmapset.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "utils/array.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"
}

/* A counter's name, in bytes: "<name>_definition" must be an identifier (NAMEDATALEN - 1 bytes). */
#define COUNTER_NAME_MAX_BYTES (NAMEDATALEN - 1 - 11)

namespace counters {

/* How a row contributes to one value column. */
enum class ValueKind { CountStar, CountArg, Sum };

/* How contributions are summed: exactly in int64 (overflow is an error) or as numeric. */
enum class AccumKind { Int64, Numeric };

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
	AccumKind accum;
	Oid arg_type; /* base type of the summed expression */
	Expr *arg;    /* planned; NULL for count(*) */
	Expr *filter; /* planned FILTER (WHERE ...) condition, or NULL */
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
CounterDef *AnalyzeDefinition(const char *name, Query *query, TupleDesc column_names);

/*
 * How a counter's deltas are written (apply.cpp has one path per mode): upserted into the counter table (exact),
 * added to rows of an existing table (target: counter-cache columns), appended to the log (log), or added to one of
 * up to max_slots rows per key (sharded).
 */
enum class ApplyMode { Exact, Target, Log, Sharded };

/* The prepared statements of a counter (statements.cpp writes them, cache.cpp prepares those a mode has). */
enum Plan {
	PLAN_APPLY,       /* one key: upsert (exact, sharded), UPDATE (target), INSERT (log) */
	PLAN_BULK,        /* many keys passed as arrays, in order (exact, log; none if a key type has no array type) */
	PLAN_UPDATE,      /* add to an existing row of one key (exact, when the table has CHECK constraints) */
	PLAN_DELETE,      /* delete an all-zero row by ctid (exact, sharded) */
	PLAN_BULK_DELETE, /* delete all-zero rows by ctid array (exact) */
	PLAN_TRUNCATE,    /* empty the counter (exact, log, sharded) or zero its columns (target) */
	NUM_PLANS
};

/* A counter's window (counters.set_window_thresholds), as its catalog row has it. */
struct WindowConfig {
	char *bucket; /* key column */
	char *width;  /* interval, as text */
	int ncolumns;
	char **columns;
	Datum *thresholds; /* numeric[] */
	Oid *callbacks;
	bool *callback_missing; /* a callback was set but no longer exists */
	Oid crossings;          /* the counter's table of which thresholds each prefix is at or above, as announced */
};

/* The compiled, per-backend form of one counter. */
struct CompiledCounter {
	CounterDef *def;
	ApplyMode mode;
	Oid target; /* the relation users read: counter table, existing target, or (log mode) the totals+log view */
	Oid query;  /* the definition view */
	/*
	 * Where this backend writes deltas -- the one place that decides it: the counter table, the existing target,
	 * the log or the slots (WriteRelation in cache.cpp). `totals` is the log and sharded modes' folded table.
	 */
	Oid write_rel;
	Oid totals;
	int max_slots;          /* sharded mode: write_rel holds up to max_slots rows per key, */
	AttrNumber slot_attnum; /* numbered in this column */
	Oid owner;              /* owner of write_rel: deltas are applied, definitions evaluated, with its privileges */
	/* per key: comparison, hashing and equality support */
	FmgrInfo *key_cmp;
	FmgrInfo *key_hash;
	FmgrInfo *key_eq;
	bool *key_fast; /* integer-like pass-by-value type: hash and compare the Datum itself */
	int16 *key_typlen;
	bool *key_byval;
	char *key_typalign;
	const char **key_columns; /* column names in write_rel */
	const char **value_columns;
	AttrNumber *key_attnums; /* their attribute numbers (tables created by create_counter; else NULL) */
	bool *key_digested;      /* keys write_rel's key index has by their digest (KeyDigest), NULL: none */
	AttrNumber *value_attnums;
	/* counters.set_bounds: per value column, numeric bounds (has_min/has_max say which are set); NULL if none */
	bool *has_min;
	bool *has_max;
	Datum *min;
	Datum *max;
	/*
	 * counters.set_thresholds: per value column, sorted numeric thresholds, the step of its repeating thresholds
	 * (numeric; (Datum)0 if none) and a callback (InvalidOid if none)
	 */
	bool has_thresholds;
	int *nthresholds;
	Datum **thresholds;
	Datum *every;
	Oid *callbacks;
	bool *callback_missing; /* a callback was set but no longer exists */
	/* counters.set_retention: deltas to buckets older than now() - keep are dropped (-1: no retention) */
	int retention_key;
	Datum retention_keep;       /* interval */
	Oid key_index;              /* the unique index on the key columns, found by the first DirectBegin */
	int *key_of_column;         /* its columns' key numbers; NULL until then */
	RegProcedure *key_eq_procs; /* its columns' equality functions (for index key_eq_index); NULL until needed */
	Oid key_eq_index;
	SPIPlanPtr plans[NUM_PLANS];
	const char *touch_column;   /* counter-cache counters: a timestamp column of the target set when values change */
	bool has_check;             /* write_rel has CHECK constraints */
	bool keep_zero;             /* counters.set_keep_zero: rows whose values are all zero stay */
	int window_bucket;          /* counters.set_window_thresholds: the window's bucket key (-1: no window) */
	WindowConfig *window;       /* ... and the window (NULL: none) */
	SPIPlanPtr window_plans[2]; /* the window sums of the prefixes written, what changed (prepared when first used) */
	SPIPlanPtr parent_plan;     /* a counter through a parent row: its parents by key (prepared when first used) */
	SPIPlanPtr child_plan;      /* ... and the source's rows by key (when a parent's write first counts them) */
	bool has_rls;               /* ... has row-level security enabled */
};

/* A prepared statement's text and parameter types. */
struct PlanStatement {
	char *sql;
	int nargs;
	Oid *argtypes;
};
/* The text of plan `plan` of counter `c` (statements.cpp), or sql = NULL when its mode has none. */
PlanStatement ApplyStatement(const CompiledCounter *c, Plan plan);

/*
 * Adding deltas to existing rows of a counter table without the executor (direct.cpp). DirectBegin returns NULL
 * when the counter's table needs the SPI upsert (see direct.cpp); DirectAdd takes the keys then the deltas (int8 or
 * numeric) in `params` and reports Missing when the key has no row, for the caller to insert it (sharded mode: no
 * slot row it could lock without waiting; *free_slot says which slot to insert, or wait for).
 */
struct DirectTarget;
enum class DirectResult { Applied, Missing };
DirectTarget *DirectBegin(CompiledCounter *c);
DirectResult DirectAdd(DirectTarget *d, Datum *params, char *nulls, int *free_slot);
/* Whether rows were written: the caller makes them visible (CommandCounterIncrement) before reading them again. */
bool DirectEnd(DirectTarget *d);

/* All counters fed by one relation (a source table or one of its partitions), in name order. */
struct SourceCounters {
	Oid relid;  /* the relation the trigger fired on */
	Oid source; /* the declared source (the partitioned root when relid is a partition) */
	bool valid;
	MemoryContext cxt;
	int ncounters;
	CompiledCounter *counters;
};

/* Look up (building when needed) the counters fed by relation `relid`. Never returns NULL. */
SourceCounters *GetSourceCounters(Oid relid);
/* ... and the counters through a parent row whose parent is `relid` (their source is another table). */
SourceCounters *GetParentCounters(Oid relid);

/* Register the relcache invalidation callback (from _PG_init). */
void InitCache();

/* The capture trigger's work (capture.cpp), and the hooks that collect a statement's deltas across its events. */
void Capture(TriggerData *td);
/* The sink trigger: take the row for counting at the statement's end; the trigger returns NULL: it is not stored. */
void SinkRow(TriggerData *td);
/* counters_parent_row: a parent row that changed moves its children's contributions. */
void ParentRow(TriggerData *td);
void InitCapture();
/* Add (sign 1) or subtract (-1) the rows `rel` holds now to the counters of `source` (rel or its partitioned root). */
void CountRelationRows(Relation rel, Oid source, int sign);
/* The declared source a relation feeds: its partitioned root, or itself. */
Oid SourceOf(Oid relid);

/*
 * Raise check_violation (23514) if value column `v` of counter `c` would become `value` (of type `type`: an integer
 * type or numeric) outside its bounds for the key in keys/nulls ('n' = NULL, as SPI takes them).
 */
void CheckBounds(CompiledCounter *c, int v, Datum value, Oid type, Datum *keys, const char *key_nulls);
/*
 * Note every threshold of value column `v` that its value crossed, now `value` (of type `type`) after adding
 * `delta` (int8 or numeric as the column accumulates); they are announced once the statement's deltas are applied.
 */
void NoteCrossings(CompiledCounter *c, int v, Datum value, Oid type, Datum delta, Datum *keys, const char *key_nulls);
/*
 * Whether a write knows the counter's value (exact and counter-cache counters): thresholds are crossed at write time.
 * Log and sharded counters cross them when compaction folds their pending rows (maintenance.cpp).
 */
inline bool
CrossesAtWrite(const CompiledCounter *c)
{
	return c->mode == ApplyMode::Exact || c->mode == ApplyMode::Target;
}
/*
 * A function that can be a threshold callback, not returning a set: (text, jsonb, text, numeric, numeric, numeric,
 * text), or the same followed by (numeric, numeric), which also take the step of repeating thresholds and the number
 * of multiples crossed.
 */
bool IsThresholdCallback(Oid proc);
/* An integer or numeric value as numeric. */
Datum ToNumeric(Datum value, Oid type);
/*
 * A key as jsonb, {"<name>": value, ...}, as jsonb_build_object renders it: inside the owner's scope only (a cast to
 * json of a key's type, which a role may create, is the owner's code to run).
 */
Datum RenderKey(Oid owner, int n, const char *const *names, const Datum *values, const bool *nulls, const Oid *types);

/* A counter's mode, as counters.counter.mode names it. */
enum class Mode { Exact, Log, Sharded };
/* A mode's name, and back: LookupModeName says whether `name` is one; ParseModeName reads the catalog's (else exact).
 */
const char *ModeName(Mode mode);
bool LookupModeName(const char *name, Mode *mode);
Mode ParseModeName(const char *name);

/* ---- a counter's options, typed (counter.cpp: the one reader of counters.counter.options) ---- */

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
	int max_slots;                /* sharded mode (MAX_SLOTS_DEFAULT unless set) */
	bool max_slots_set;
	bool building;          /* a concurrent declaration or rebuild is under way, */
	bool building_has_mode; /* ... ending in a mode it names, */
	Mode building_mode;
	int building_max_slots; /* ... with these slots (sharded; -1: not named) */
};
/* Options from the catalog's jsonb (isnull: none); in CurrentMemoryContext. */
const CounterOptions *ParseOptions(Datum options, bool isnull);
/* The options of counter `name` now (latest snapshot); none if there is no such counter. */
const CounterOptions *CurrentOptions(const char *name);
/* A callback as its options name it: the function, or InvalidOid when it no longer exists. */
Oid ResolveCallback(const char *callback);
/* A key type a retention or a window can age out: date, timestamp, timestamptz. */
bool IsTimeBucketType(Oid type);
/*
 * Options written back (SetOption, RestoreOptions): the value of one key (isnull: none left), or all of them (what a
 * counter's own state was, building and last_rebuild, is not written). Built in C from the typed fields.
 */
Datum BoundsJsonb(const CounterOptions *o, bool *isnull);
Datum ThresholdsJsonb(const CounterOptions *o, bool *isnull);
Datum WindowJsonb(const CounterOptions *o, bool *isnull);
Datum OptionsJsonb(const CounterOptions *o);
Datum MaxSlotsJsonb(int max_slots);
/* "building": where a concurrent declaration or rebuild is going (max_slots <= 0: not named) */
Datum BuildingJsonb(Mode mode, int max_slots);
/* A copy of `n` entries without `column`'s, plus `entry` (NULL: none); *n becomes the new number. */
ColumnBounds *WithColumnBounds(const ColumnBounds *bounds, int *n, const char *column, const ColumnBounds *entry);
ColumnThresholds *WithColumnThresholds(const ColumnThresholds *thresholds, int *n, const char *column,
                                       const ColumnThresholds *entry);

/* One row of counters.counter (catalog.cpp). Relations absent in the row are InvalidOid. */
struct CatalogEntry {
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
};
/*
 * How a counter's deltas are written, from its row: the one place that derives it (a counter-cache counter is
 * exact mode with a target it does not own).
 */
ApplyMode ApplyModeOf(const CatalogEntry *e);

/*
 * Lock a source and every partition under it (as LOCK TABLE does): a writer that names a partition takes no lock on
 * the partitioned table, and must wait too.
 */
void LockSource(Oid source, LOCKMODE mode);
/*
 * The tables whose writes a counter follows, locked in one order: its source (and partitions), then the parent it
 * joins (a counter through a parent row). Every change of a counter that must keep writers out locks them so.
 */
void LockCounterSources(const CatalogEntry *e, LOCKMODE mode);
/* The parent of a counter through a parent row (InvalidOid: none, or its definition view is gone). */
Oid CounterParent(const CatalogEntry *e);
/* Whether view `view` reads column `attnum` of `rel` (pg_depend). */
bool ViewUsesColumn(Oid view, Oid rel, AttrNumber attnum);
/* Counters named `name` (NULL: all), in name order, as the latest snapshot sees them. */
List *ReadCatalog(const char *name);
/* The counters one of whose relations (target, totals, log or slots, definition view) is `rel`, in name order. */
List *ReadCatalogOfRelation(Oid rel);
/*
 * The counter one of whose own relations `rel` is (its definition view, the table it created, its totals, log or
 * slots, the view of log and sharded mode; not an existing table that keeps counter-cache columns), or NULL; and what
 * `rel` is to it, for a message.
 */
CatalogEntry *OwnerCounterOf(Oid rel, const char **what);
/* 2BP01 if `rel` is one of a counter's own relations: `command` (DROP, TRUNCATE) would leave the counter wrong. */
void GuardCounterRelation(Oid rel, const char *command);
/* The counter named `name`, or an error (42704). */
CatalogEntry *LookupCounter(const char *name);
/*
 * A counter's catalog row changed (`name`, NULL: no row Citus copies changed): Citus's replica follows, and every
 * backend compiles the counters of `source` (InvalidOid: none left to) again. Every write of the catalog ends so.
 */
void CounterChanged(const char *name, Oid source);
/* SPI_connect, or an error. */
void SpiConnect();
/*
 * Run an SPI query (SPI connected) with the latest snapshot: it sees what committed before the locks the caller holds
 * were granted, whatever the transaction's snapshot. (read_only = false: also the current command's changes.)
 */
int QueryLatest(const char *sql, int nargs, Oid *argtypes, Datum *values, const char *nulls, bool read_only = true);
/* Run a catalog write as the catalog's owner; returns the rows processed. */
uint64 ExecuteAsCatalogOwner(const char *sql, int nargs, Oid *argtypes, Datum *values, const char *nulls, int expected,
                             bool exactly_one);
/*
 * Catalog writes (catalog.cpp), each after checking the caller's rights on every relation the row names: record a
 * counter (returning its source, for the caller to compile it at once), remove it, remove a counter one of whose
 * relations is gone, change its mode and relations, set (or remove, isnull) one entry of its options.
 */
Oid Register(const char *name, Oid query, Oid target, bool owns); /* returns the source */
void Unregister(const CatalogEntry *e);
CatalogEntry *Forget(const char *name);
void SetMode(const char *name, Oid target, Mode mode, Oid totals, Oid log);
/*
 * 0A000 (or 2BP01) unless counter `name` of `source` may leave exact mode for `mode`: what only exact mode keeps
 * (bounds, window thresholds, keep_zero), Citus, views other than `except` reading its table `table`.
 */
void RequireModeAllowed(const char *name, Oid source, Mode mode, Oid table, Oid except);
void SetOption(const char *name, const char *key, Datum value, bool isnull);
/*
 * counters._catalog_row(): a catalog row inserted by another role than the catalog's owner (a restore by the counters'
 * owner): refused unless that role has the privileges of the owner of every relation it names. Returns the row.
 */
HeapTuple CatalogRowInserted(TriggerData *td);
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

/*
 * security.cpp: the one way to run a counter's code. Everything user-controlled -- a definition's expressions (and
 * parsing and planning them), casts and output functions of its key types, threshold callbacks, triggers, policies
 * and constraints of its tables -- runs between EnterOwner and LeaveOwner: as the counter's owner, inside a
 * security-restricted operation, with the settings `pins` names pinned, whoever started the work. A function that
 * reaches SPI or the executor either enters the scope itself or calls RequireOwnerScope first; only catalog.cpp's
 * fixed queries of the catalogs are exempt (test/scripts/entries.sh checks both, function by function).
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
void EnterOwner(OwnerScope *scope, Oid owner, int pins);
void LeaveOwner(OwnerScope *scope);
/* An internal error unless running as `owner` inside a security-restricted operation (between EnterOwner/Leave). */
void RequireOwnerScope(Oid owner);
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
bool MayMaintain(const CatalogEntry *e);
void RequireMaintainer(const CatalogEntry *e);
/* The caller may read the counter (SELECT on its target) or maintain it. */
bool MayRead(const CatalogEntry *e);
/*
 * Whose code a counter runs, the one rule: the owner of the table holding its values (its counter table, the totals
 * of log and sharded mode, or the existing table of counter-cache columns). A counter being declared gets the owner
 * of its target, or the declaring role when it creates its own table.
 */
Oid CounterOwner(const CatalogEntry *e);
Oid OwnerOfTable(Oid target, Oid totals);

/* The columns of a counter as the maintenance statements need them (maintenance.cpp, statements.cpp). */
struct CounterShape {
	const CatalogEntry *e;
	CounterDef *def;
	int ncolumns; /* in definition order */
	bool *is_key;
	const char **def_names;  /* in the definition view */
	const char **read_names; /* in the relation users read (e->target) */
	Oid table;               /* the table holding the values: totals, or the target */
	const char **table_names;
	const char **log_names; /* log or slots (log, sharded mode) */
	int retention_column;   /* -1: no retention */
	bool *digested;         /* key columns the table's key index has by their digest (NULL: none) */
	bool keep_zero;         /* counters.set_keep_zero */
	const char *retention_keep;
	Oid retention_type;
};
CounterShape *BuildShape(const CatalogEntry *e);
char *VerifyStatement(const CounterShape *s);
/* A statement whose parse tells whether `condition` is one expression (nothing injected after it). */
char *ConditionProbe(const char *condition);
char *RebuildConditionCheck(const CounterShape *s, const char *condition);
/* distributed: for a Citus counter table (no ctid); then ZeroRowsStatement deletes the rows of zeros */
char *RebuildStatement(const CounterShape *s, const char *condition, bool distributed);
char *ZeroRowsStatement(const CounterShape *s);
char *KeyColumnList(const CounterShape *s);
/* Fold pending rows into the totals: (rows moved, zero rows' ctids), and with_rows, each folded key's row after. */
char *CompactStatement(const CounterShape *s, bool with_rows);
char *DeleteRowsStatement(Oid rel);
char *DeleteAllStatement(Oid rel);
/*
 * Counters through a parent row: (key as int8, whole row) of the parents whose key is in the int8[] $1, locked FOR
 * SHARE; and of the source's rows whose key column is in $1.
 */
char *ParentRowsStatement(const CounterDef *def);
char *ChildRowsStatement(const CounterDef *def);
char *RetentionStatement(const CounterShape *s, Oid rel, const char **names);

/* Statements for declaring and switching counters (statements.cpp). */
char *DerivedName(const char *base, const char *suffix);
const char *ColumnName(const CounterDef *def, int i);
char *KeyNames(const CounterDef *def);
char *CreateViewStatement(const char *schema, const char *view, const char *definition);
char *CreateCounterTableStatement(const CounterDef *def, const char *schema, const char *table);
/*
 * The counter table's key index, once it is filled: a primary key (or unique constraint) on the keys, or (digest,
 * when a key is of a type DigestedKeyType names) a unique index with such keys by their digest, each with a hash
 * index of its own for readers. KeyIndexElement: a key column as an index element and ON CONFLICT target.
 */
char *CounterKeyStatement(const CounterDef *def, Oid table, bool all_keys_not_null, bool digest);
char *KeyIndexElement(const char *quoted_column, bool digested);
bool DigestsKeys(const CounterDef *def);
char *FillStatement(const CounterDef *def, Oid table, Oid view);
char *ZeroTargetStatement(const CounterDef *def, Oid target);
char *FillTargetStatement(const CounterDef *def, Oid target, Oid view);
char *ReplicaIdentityFullStatement(Oid rel);
char *RenameStatement(Oid rel, const char *name);
char *CreateLikeStatement(const char *schema, const char *name, Oid like);
char *LogIndexStatement(const CounterShape *s, Oid log);
char *AddSlotColumnStatement(Oid log);
char *SlotKeyStatement(const CounterShape *s, Oid log);
char *PendingViewStatement(const CounterShape *s, const char *schema, const char *name, Oid totals, Oid log);
char *GrantSelectStatement(Oid rel, Oid grantee);
char *DropStatement(const char *kind, Oid rel, bool if_exists = false);
char *RenameViewColumnStatement(Oid view, const char *from, const char *to);

/*
 * The capture triggers, in the order attach() creates them; a sink (counters.set_sink) has SINK_TRIGGER,
 * SINK_GUARD_TRIGGER and SINK_END_TRIGGER instead of INSERT_TRIGGER, UPDATE_TRIGGER and DELETE_TRIGGER.
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
	CAPTURE_TRIGGERS
};
const char *CaptureTriggerName(int trigger);
/*
 * The triggers on the parent of counters through a parent row: counters_parent_begin (BEFORE INSERT OR UPDATE OR
 * DELETE, for each statement: loads the library, so that the statement's frame is there), counters_parent_row (AFTER
 * UPDATE OR DELETE, for each row), counters_parent_insert (AFTER INSERT, new table), and counters_parent_truncate
 * (AFTER TRUNCATE).
 */
enum { PARENT_BEGIN_TRIGGER, PARENT_ROW_TRIGGER, PARENT_INSERT_TRIGGER, PARENT_TRUNCATE_TRIGGER, PARENT_TRIGGERS };
const char *ParentTriggerName(int trigger);
char *CreateParentTriggerStatement(int trigger, Oid rel);
char *CreateTriggerStatement(int trigger, Oid rel, bool is_source);
char *DropTriggerStatement(int trigger, Oid rel);
/*
 * The trigger counters_target_key on an existing table that keeps counter-cache columns (BEFORE UPDATE OF the key
 * columns of its counters, for each row), its statements, and the recount it runs for a row's new key.
 */
extern const char *const target_key_trigger;
/* counters_guard (BEFORE TRUNCATE, for each statement) on a counter's own tables, and making sure they have it. */
extern const char *const guard_trigger;
char *CreateGuardTriggerStatement(Oid rel);
void GuardOwnTables(const CatalogEntry *e);
char *CreateTargetKeyTriggerStatement(Oid target, List *columns);
char *DropTargetKeyTriggerStatement(Oid target);
char *KeyRecountStatement(const CounterDef *def, Oid view, Oid target);
/* counters_target_key on `target`, for the key columns of the counters kept in it (dropped when none is). */
void AttachTarget(Oid target);
/* counters_target_key: a row that takes another key takes that key's values (returns the row to store). */
HeapTuple TargetKeyRow(TriggerData *td);
/* The function of trigger `name` on `rel`, or InvalidOid; the OID of counters.capture(). */
Oid TriggerFunction(Oid rel, const char *name);
Oid CaptureFunction();

/*
 * The one way to change a counter (declare.cpp): the caller's right to (the privileges of the owner of every relation
 * it names) checked, the tables whose writes it follows locked in one order (LockCounterSources, in `mode`; NoLock:
 * none) and the catalog read again once they are (a change that committed meanwhile is seen), its own relations
 * locked after them (CounterRelations, in `own`), then the counter's owner's scope entered: whatever the change creates
 * belongs to the owner, and the owner's code it runs runs as the owner. EndChange leaves it.
 */
struct Change {
	CatalogEntry *e;
	OwnerScope scope;
};
CatalogEntry *BeginChange(Change *change, const char *name, LOCKMODE mode, LOCKMODE own);
/*
 * A counter's own relations in the one order every change and maintenance locks them, after its source and parent:
 * the definition view, the relation users read, the log or slots, the totals, the window state. (Compaction takes the
 * log, then writes the totals; writers reach them only through the source, locked first.) Returns how many.
 */
int CounterRelations(const CatalogEntry *e, Oid *rels);
void EndChange(Change *change);

/* Declaring, switching and dropping counters, attaching their triggers (declare.cpp). */
Oid CreateCounter(const char *name, const char *definition, const char *target, const char *mode);
/* CALL counters.create_counter_concurrently: three transactions (SPI connected non-atomic by the caller). */
void CreateCounterConcurrently(const char *name, const char *definition, const char *mode);
void AlterCounter(const char *name, const char *mode, int max_slots);
/*
 * alter_counter(name, definition => ...): the counter dropped and declared again in one transaction (writers of the
 * source wait), in `mode` (NULL: its mode), with its options and SELECT grants.
 */
void AlterDefinition(const char *name, const char *definition, const char *mode);
/*
 * A counter dropped and then declared again from its definition's text, with its mode, options and grants: around a
 * change of a column's type that its definition view would otherwise block (ddl.cpp). The saved state is allocated in
 * CurrentMemoryContext; `why` completes the NOTICE.
 */
void *SaveAndDrop(const CatalogEntry *e);
void DeclareSaved(void *saved, const char *why);
/* CALL counters.alter_counter_concurrently (SPI connected non-atomic). */
void AlterCounterConcurrently(const char *name, const char *definition);
void DropCounter(const char *name);
void Attach(Oid source);
void Detach(Oid source);
/*
 * Sinks (declare.cpp): a table whose inserted rows are counted and not stored. Whether `rel` is one (it has the sink
 * trigger); make it one or a plain source again; refuse (0A000) recounting the counter `e` from its sink.
 */
bool IsSink(Oid rel);
/* Counters through a parent row: the parents of a source's counters, their triggers, whether any counter joins one. */
List *ParentsOfSource(Oid source);
void AttachParent(Oid parent);
void DetachParent(Oid parent);
bool JoinsParent(Oid parent);
void SetSink(Oid source, bool sink);
/* 0A000 if sink `rel` has what a sink cannot keep: a foreign key, row-level security, a generated column. */
void RequireSinkShape(Relation rel);
/*
 * 0A000 if views with a check option read `rel` (directly or through other views), which its being a sink would
 * bypass: when making it a sink, or (making_sink false) after a view was created or changed.
 */
void RefuseCheckOptionViews(Oid rel, bool making_sink);
/* The views with a check option that read `rel`, directly or through other views, as a list, or NULL. */
char *CheckOptionViews(Oid rel);
void RefuseSinkRecount(const CatalogEntry *e, const char *what);
void CopySelectGrants(Oid from, Oid to);
/* The roles other than its owner that hold SELECT on `rel`. */
List *SelectGrantees(Oid rel);
/* The counters whose source is `source`. */
List *ReadCatalogOfSource(Oid source);

/* Bounds, thresholds, retention, top() (options.cpp) and the statements they run (statements.cpp). */
void SetBounds(const char *name, const char *column, Datum min, bool min_null, Datum max, bool max_null);
/* `thresholds` NULL: none (then `every` must be given); `every` NULL: no repeating thresholds. */
void SetThresholds(const char *name, const char *column, ArrayType *thresholds, Oid callback, Datum every,
                   bool every_null);
void SetRetention(const char *name, const char *column, Datum keep, bool keep_null);
void SetTouch(const char *name, const char *column);
void SetKeepZero(const char *name, bool keep);
void Top(const char *name, const char *column, Datum k, bool k_null, const char *filter, FunctionCallInfo fcinfo);
/* top() in the row type `rowtype` of the relation a counter is read from: whole rows of that type. */
void TopRows(Oid rowtype, const char *column, Datum k, bool k_null, const char *filter, FunctionCallInfo fcinfo);
void RequireKeyFilter(const CatalogEntry *e, const CounterShape *s, const char *filter);
char *BoundsViolation(const char *column, Datum min, bool min_null, Datum max, bool max_null);
char *CountWhereStatement(Oid rel, const char *condition);
char *KeyFilterCheckStatement(const CounterShape *s, const char *filter);
/*
 * The top statement: (the key columns..., value numeric) rows, or with `rowtype` (the row type of the relation the
 * counter is read from) that relation's non-dropped columns in order, the values of the counter's columns in their
 * types.
 */
char *TopStatement(const CounterShape *s, int col, const char *limit, const char *filter, TupleDesc rowtype = nullptr);

/*
 * Thresholds on a sliding-window sum: setting them and window_state() (options.cpp); checking every counter's windows
 * (or one's), and, for a statement's write (windows.cpp), the prefixes (keys but the bucket, one array per key column)
 * of its deltas `entries` (NULL: a key type has no array type) and checking those once the deltas are applied (SPI
 * connected).
 */
void SetWindowThresholds(const char *name, const char *column, ArrayType *thresholds, const char *bucket,
                         const char *width, Oid callback);
int64 CheckWindows(const char *name);
/* counters.window_state(name): the window state of one or all counters the caller may read, as their owners read it. */
void WindowState(const char *name, FunctionCallInfo fcinfo);
struct DeltaEntry;
Datum *WindowPrefixes(const CompiledCounter *c, DeltaEntry **entries, uint32 n);
void CheckWrittenWindows(CompiledCounter *c, Datum *prefixes);
/* A counter's window from its catalog row (in CurrentMemoryContext; NULL: none). */
WindowConfig *ReadWindow(const CatalogEntry *e);
/* The window sums of counter `c`'s value columns `columns` per prefix (written: of the prefixes in arrays $1...). */
char *WindowSumsStatement(const CompiledCounter *c, int bucket, const WindowConfig *w, bool written);
/* Record in `crossings` which thresholds each prefix's window sum reached; the crossings, to announce. */
char *WindowStateStatement(Oid crossings);
/*
 * A counter's window state: the table of which thresholds each prefix's window sum is at or above, as announced.
 * WindowCrossings makes `e` have one (window) or none, as its owner, and returns it: created in the schema of its table
 * as <table>_crossings when its window is set, so that it is its owner's and dumped with its tables; dropped with the
 * window. KeepCrossings gives a counter declared again the table set aside (Kept), without the rows of prefixes its new
 * definition no longer has, or drops it if the window did not survive. The statements that create and read it.
 */
Oid WindowCrossings(const CatalogEntry *e, bool window);
void KeepCrossings(const CatalogEntry *e, Oid crossings, const CounterDef *def);
char *CreateCrossingsStatement(const char *schema, const char *table);
char *DeleteCrossingsStatement(Oid crossings);
char *StalePrefixesStatement(Oid crossings);
char *CrossingsStatement(Oid crossings);

/*
 * The maintenance functions (maintenance.cpp). Without a name, compact() and apply_retention() make a round: each
 * counter's steps apart, skipped when busy, bounded by counters.step_timeout, failures reported and noted; so does
 * CompactInRound(name) for one counter (the background worker, a transaction per counter). InitMaintenance: the
 * setting, from _PG_init.
 */
int64 Compact(const char *name);
int64 CompactInRound(const char *name);
void InitMaintenance();
int64 ApplyRetention(const char *name);
int64 Rebuild(const char *name, const char *condition);
/*
 * The concurrent operations (CALL, SPI connected non-atomic): a step's name shown in pg_stat_activity and as a
 * NOTICE (NULL: done); committing a step; making a log-mode counter equal to its definition without blocking writers
 * (one transaction); CALL counters.rebuild_concurrently (three).
 */
void ConcurrentStep(const char *name, const char *step);
void CommitStep();
void RefreshConcurrently(const char *name, const char *step);
void RebuildConcurrently(const char *name);
/*
 * A concurrent declaration or rebuild under way (option "building"): where it is going, the mode and (sharded, > 0)
 * max_slots that rebuild_concurrently() completes it to if it stops after its first step.
 */
void MarkBuilding(const char *name, Mode mode, int max_slots);
void Verify(const char *name, FunctionCallInfo fcinfo);
void RequireReadCommitted(const char *what);
/*
 * Run body(arg) in a subtransaction of its own; an error rolls it back and is returned (NULL: none). A query cancel
 * or a shutdown is not caught: it ends the whole call.
 */
ErrorData *TryInSubtransaction(void (*body)(void *), void *arg);

/* Parse and analyse a definition's text (names resolve with the caller's search_path), with the declaring rules. */
CounterDef *DescribeDefinition(const char *name, const char *definition, Oid owner);
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
/*
 * The unique btree index of `rel` (no predicate) on exactly the key columns `attnums` (nkeys; and `slot` last unless
 * InvalidAttrNumber), each a plain column or counters.key_digest() of one: key_of_column gets each index column's key
 * number and digested (may be NULL) whether key k is indexed by its digest. InvalidOid if there is none.
 */
Oid FindKeyIndexOf(Relation rel, int nkeys, const AttrNumber *attnums, AttrNumber slot, int *key_of_column,
                   bool *digested);
/*
 * The table a definition counts, as the caller's search_path resolves its name, found without analysing it (no code
 * runs): its owner will own the counter. InvalidOid when there is none to find (DescribeDefinition says why).
 */
Oid DefinitionSource(const char *name, const char *definition);
/* A key column's type as the counter table declares it (qualified, with typmod and a non-default collation). */
char *KeyColumnType(const KeyDef *key);
/* The analysed definition of counter `name`, stored as view `view`, planned as the counter's `owner`. */
CounterDef *AnalyzeView(const char *name, Oid view, Oid owner);
/* A relation's schema-qualified, quoted name. */
char *QualifiedName(Oid relid);

/* The event triggers (ddl.cpp): ddl_command_start, ddl_command_end, sql_drop; InitDdl from _PG_init. */
void InitDdl();
void OnDdlStart(EventTriggerData *trigger);
void OnDdlEnd(EventTriggerData *trigger);
void OnSqlDrop();

/*
 * Citus (citus.cpp): counters over hash-distributed and reference tables count in the shards (docs/citus.md). Without
 * the citus extension in the database every function returns at once (false, Local, or nothing refused).
 */
namespace citus {
/* What a table is to Citus, as far as counters is concerned. */
enum class Kind { Local, Distributed, Reference, Other };
/* Where create_counter puts a counter table it creates. */
enum class Placement { Local, Distributed, Reference };
/* The citus extension is installed in this database. */
bool Present();
/* This is a Citus worker node (its group is not the coordinator's). */
bool OnWorker();
/* `relid` is a Citus table (distributed, reference, Citus local) or a shard of one. */
bool IsCitusRelation(Oid relid);
/* What Citus table `relid` is (a shard: Local). */
Kind KindOfTable(Oid relid);
/* The Citus table whose shard `relid` is, or InvalidOid. */
Oid TableOfShard(Oid relid);
/* The relation the counters' catalog is read from on this node: counters.counter, or the replica on a worker. */
const char *CatalogRelation();
/* SET LOCAL what a transaction changing counters of Citus tables needs (unsafe triggers, sequential mode). */
void BeginDistributedChange();
/*
 * Check (0A000) that counter `counter` over def->source into `target` (InvalidOid: a table create_counter creates) can
 * be counted on Citus; say where a created counter table goes: distributed by `column`, co-located with
 * `colocate_with`, or a reference table.
 */
Placement CheckDeclaration(const char *counter, const CounterDef *def, Oid target, Oid *colocate_with,
                           const char **column);
void DistributeCounterTable(Oid table, Placement placement, Oid colocate_with, const char *column);
/*
 * counters.enable_citus(): create counters.counter_replica, a reference table (the catalog's owner, once; the first
 * declaration over a Citus table does it when the caller is that owner).
 */
void EnableCitus(bool explicitly);
/*
 * A row of a copy of counters.counter_replica changed (on every node that holds one): the compiled counters of its
 * source are dropped from the caches of this node's backends.
 */
void ReplicaChanged(TriggerData *td);
/* Copy counter `name`'s catalog row to counters.counter_replica (or remove it), on the coordinator. */
void SyncReplica(const char *name);
/*
 * A Citus table locked on every node too (LOCK TABLE, which Citus propagates): writers connected to a worker wait as
 * well as those writing through the coordinator.
 */
void LockOnEveryNode(Oid rel, LOCKMODE mode);
/* Refuse (0A000) `what` for a counter of a Citus table. */
void RefuseFeature(const char *counter, Oid source, const char *what);
/*
 * The relation that receives counter `counter`'s deltas when its trigger fired on `fired` (a shard, or `source`
 * itself): `rel`, or on a shard its co-located shard on this node. Errors if they are not co-located or the shard is
 * elsewhere: never skipped.
 */
Oid WriteShard(const char *counter, Oid rel, Oid fired, Oid source);
/* Refuse (0A000) the capture trigger firing, without counters, on a Citus table's shard or shell. */
void RefuseCapture(Relation rel);
/*
 * counters.distribute(source, column): distribute a counted local table by `column`, and its counter tables
 * co-located, without counting its rows again.
 */
void Distribute(Oid source, const char *column);
/* In sql_drop: refuse (0A000) a Citus table conversion that drops a counter's source or table. */
void RefuseConversion(List *dropped);
/*
 * The Citus conversion the statement being run would make (its function's name, or "a foreign key to a reference
 * table", which makes Citus convert local tables), or NULL: what drops a counter's relations behind its back.
 */
const char *Conversion();
} // namespace citus

/* The compaction background worker (worker.cpp): GUCs, and workers registered when preloaded. */
void InitWorkers();

/* counters.statement_memory: deltas held per statement before they are applied in a batch (kB). */
extern int statement_memory_kb;

/* Deparse an expression over the source (Vars at `varno`) for error messages. */
char *DeparseSourceExpr(Node *expr, Oid source, Index varno);

} // namespace counters
