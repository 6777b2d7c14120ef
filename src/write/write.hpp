/*
 * write.hpp: the hot write path -- one statement's way from rows to counters:
 *
 *   trigger.cpp           which trigger role fired, and what each does: a statement, a sink's rows (counted at the
 *                         statement's end, never stored), a parent's write, a counter-cache key
 *   sink.cpp              a sink's rows, kept per sink and subtransaction until its statement's end counts them
 *   parent.cpp            counters through a parent row: the parents of a statement's rows, read and their keys
 *                         locked; the parent's side, a parent's write moving its children
 *   target_key.cpp        a counter-cache row that takes another key: its counter columns recounted for the new key
 *   capture.cpp           rows of the statement's transition tables -> each counter's deltas (the universal formula),
 *                         collected across the statement's events in one frame
 *   compile.cpp           a counter's executable form in this backend, cached and invalidated; its plans
 *   delta.cpp             the delta table of one counter: summed deltas per key
 *   apply.cpp             the deltas -> the counter's relation, keys in sorted order, one path per mode
 *   direct.cpp            ... adding to existing rows without the executor
 *   decide.cpp            what a new value decides: bounds (an error), thresholds crossed (events, callbacks)
 *   windows.cpp           thresholds on sliding-window sums
 *   write_statements.cpp  the statements they run
 */
#pragma once

#include "model/model.hpp"

extern "C" {
#include "access/xact.h"
#include "executor/execdesc.h"
#include "nodes/execnodes.h"
#include "portability/instr_time.h"
#include "utils/tuplestore.h"
}

namespace counters {

/*
 * The prepared statements of a counter (write_statements.cpp writes them; compile.cpp prepares them and keeps them
 * with the compiled counter). The statements that apply deltas are prepared when the counter is compiled, those its
 * mode has; the others when first used (FetchPlan).
 */
enum Plan {
	PLAN_APPLY,       /* one key: upsert (exact, sharded), UPDATE (target), INSERT (log) */
	PLAN_BULK,        /* many keys passed as arrays, in order (exact, log; none if a key type has no array type) */
	PLAN_UPDATE,      /* add to an existing row of one key (exact, when the table has CHECK constraints) */
	PLAN_DELETE,      /* delete an all-zero row by ctid (exact, sharded) */
	PLAN_BULK_DELETE, /* delete all-zero rows by ctid array (exact) */
	PLAN_TRUNCATE,    /* empty the counter (exact, log, sharded) or zero its columns (target) */
	PLAN_EXTREMES,    /* set a row's min() and max() columns re-read from the source, by ctid (exact, target) */
	NUM_APPLY_PLANS,
	PLAN_WINDOW_SUMS = NUM_APPLY_PLANS, /* the window sums of the prefixes a statement wrote */
	PLAN_WINDOW_STATE,                  /* record which thresholds each prefix reached; what changed */
	PLAN_PARENT_ROWS,                   /* a counter through a parent row: its parents by key, FOR SHARE */
	PLAN_CHILD_ROWS,                    /* ... and the source's rows by key (a parent's write counts them) */
	PLAN_KEY_RECOUNT,                   /* a counter-cache row's values recounted for its new key (target_key.cpp) */
	NUM_PLANS
};
/* The compiled, per-backend form of one counter. */
struct CompiledCounter {
	/*
	 * The counter, as the model holds it (its catalog row: name, relations, mode and kind of table, typed options);
	 * what follows is what this backend derives from it to execute: the analysed definition, where deltas go, plans.
	 */
	const Counter *counter;
	CounterDef *def;
	/* logical replication: the subscription that brings its tables (FollowedSubscription), and which; NULL: none */
	const char *followed;
	Oid followed_table;
	/*
	 * Where this backend writes deltas -- the one place that decides it: the counter table, the existing target,
	 * the log or the slots (WriteRelation in compile.cpp). `totals` is the log and sharded modes' folded table.
	 */
	Oid write_rel;
	Oid totals;
	/*
	 * Citus, a key without the distribution column (log mode): the log row's anchor, a value of the distribution
	 * column's type whose hash is in the fired shard's range (citus::ShardAnchor), as a literal (NULL: none), a
	 * datum, and the log's column (ANCHOR_COLUMN) it goes in
	 */
	const char *anchor;
	Datum anchor_value;
	AttrNumber anchor_attnum;
	int max_slots;          /* sharded mode: write_rel holds up to max_slots rows per key, */
	AttrNumber slot_attnum; /* numbered in this column */
	/* owner of write_rel: deltas are applied, definitions evaluated, with its privileges (AuthorizedByCatalog) */
	Authorization auth;
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
	bool key_index_sorted; /* index key_eq_index is a btree in the order SortDeltas sorts keys (DirectMergeBegin) */
	SPIPlanPtr plans[NUM_PLANS];
	/*
	 * The definition's expressions as a statement evaluates them (StartRun initialises them per statement): a counter
	 * through a parent row reads the parent's columns (varno 2) from the inner slot (INNER_VAR); the WHERE clause and
	 * each value's FILTER (NIL: none) as implicit-AND lists. parent_attrs: the parent's columns it reads (offset by
	 * FirstLowInvalidHeapAttributeNumber; NULL: not through a parent row): an update of a parent that changes none of
	 * them changes nothing.
	 */
	List *quals;
	Expr **key_exprs;
	Expr **arg_exprs;
	List **filters;
	Bitmapset *parent_attrs;
	const char *touch_column; /* counter-cache counters: a timestamp column of the target set when values change */
	bool has_check;           /* write_rel has CHECK constraints */
	bool keep_zero;           /* counters.set_keep_zero: rows whose values are all zero stay */
	bool has_rls;             /* write_rel has row-level security enabled */
	bool deferrable;          /* its deltas may wait for the commit (deferred.cpp): not a Citus table's */
	/*
	 * counters.set_window_thresholds, of an exact counter with a table of its own (its window -- bucket, width,
	 * columns and their thresholds -- is counter->options->window; its state table counter->crossings): the bucket's
	 * key number (-1: no window); per window column, its thresholds as a numeric[] (the statements' parameter; NULL:
	 * the window has no column) and its callback (InvalidOid if none; missing: set, but no longer exists); what
	 * windows.cpp's direct check found, once (NULL until then)
	 */
	int window_bucket;
	Datum *window_thresholds;
	Oid *window_callbacks;
	bool *window_callback_missing;
	struct WindowDirect *window_direct;
	/* min() and max() columns (extremes.cpp): per value column; NULL when the counter keeps none */
	struct ExtremeColumn *extremes;
};

/*
 * A value column that keeps min() or max() (extremes.cpp). A key's delta keeps the most extreme value its rows added
 * and the most extreme they removed; applying it writes the more extreme of the stored value and the added one
 * (GREATEST or LEAST, in the row version the other columns' deltas write anyway), and a removal that reaches the
 * value now stored re-reads the key's rows through an index on (keys..., argument) of the source, with a snapshot
 * taken once the key's row is locked (docs/aggregates.md says why that is exact under concurrency).
 */
struct ExtremeColumn {
	bool kept;     /* this value column keeps an extreme (the others: false) */
	bool distinct; /* ... or count(DISTINCT x): its changed (key, x) pairs are read again (PairDelta) */
	int direction; /* 1: max, -1: min (a distinct count: -1, its values in ascending order) */
	FmgrInfo cmp;  /* the btree comparison of its type, of the aggregate's operator family */
	Oid collation;
	int16 typlen;
	bool byval;
	/* the source's index that serves the re-read (found when first needed; InvalidOid: none, a scan reads) */
	bool probed;
	Oid index;
};
struct DeltaEntry;
/*
 * A changed (key, value) pair of a distinct count: the key's entry (by its block, DeltaEntry.key: the hash table moves
 * its entries when it grows, not their blocks), the column, its net change in rows, the value.
 */
struct PairChange {
	Datum *key;
	int v;
	int64 net;
	Datum x;
};
/* A removal DeltaAddExtreme may take back (CounterRun.undo). */
struct ExtremeUndo {
	bool armed;
	Datum *key;  /* the entry's block (DeltaEntry.key) */
	bool had;    /* the entry held a removal before it */
	Datum prev;  /* ... this one */
	Datum value; /* (a by-reference one copied into the delta context) */
};
/* Compile counter `c`'s extremes (NULL when it has none), as its owner. */
void CompileExtremes(CompiledCounter *c);
/* Value `a` of extreme column `v` against `b`: > 0 beyond it (greater for max, less for min), 0 equal, < 0 short of it.
 */
int ExtremeCompare(const CompiledCounter *c, int v, Datum a, Datum b);
struct CounterRun;
struct DeltaEntry;
/*
 * Reading the source again, once the caller holds the key's row lock: SourceSnapshot makes this statement's writes
 * visible and takes the latest snapshot (registered: UnregisterSnapshot it). ReadExtreme: the extreme of column `v` of
 * the key of delta entry `e` now, false when no row has one (the aggregate is NULL). PairDelta: what the key's rows
 * with value `x` in distinct column `v`, which the statement changed by `net` rows, do to its distinct count (1: the
 * value is new to the key, -1: its last row went, 0). As the counter's owner.
 */
Snapshot SourceSnapshot();
bool ReadExtreme(CounterRun *r, int v, const DeltaEntry *e, Snapshot snapshot, Datum *value);
int PairDelta(CounterRun *r, int v, const DeltaEntry *e, Datum x, int64 net, Snapshot snapshot);

/* A prepared statement's text and parameter types. */
struct PlanStatement {
	char *sql;
	int nargs;
	Oid *argtypes;
};
/* The text of plan `plan` of counter `c` (write_statements.cpp), or sql = NULL when its mode has none. */
PlanStatement ApplyStatement(const CompiledCounter *c, Plan plan);
/*
 * Plan `plan` of counter `c`, prepared (a generic plan, kept with the compiled counter) when first used, with the
 * parameter types given, inside the counter's owner's scope: the one place a counter's plans are made.
 */
SPIPlanPtr FetchPlan(CompiledCounter *c, Plan plan, int nargs, Oid *argtypes);

/*
 * Adding deltas to existing rows of a counter table without the executor (direct.cpp). DirectBegin returns NULL
 * when the counter's table needs the SPI upsert (see direct.cpp); DirectAdd takes the keys then the deltas (int8 or
 * numeric) in `params` and reports Missing when the key has no row, for the caller to insert it (sharded mode: no
 * slot row it could lock without waiting; *free_slot says which slot to insert, or wait for).
 */
struct DirectTarget;
enum class DirectResult { Applied, Missing };
DirectTarget *DirectBegin(CompiledCounter *c);
/* (absent: the key was just seen to have no row, by DirectMergeAdd: its row is inserted without looking first) */
DirectResult DirectAdd(DirectTarget *d, Datum *params, char *nulls, int *free_slot, bool absent);
/*
 * Exact mode, a statement that writes many of a counter's keys (n, sorted): DirectMergeBegin starts one ordered scan
 * of the key index, if it can serve; then DirectMergeAdd, key by key in the same order, updates the key's row where
 * that scan finds it (Applied); else the caller DirectAdds the key: Absent when the scan found no row of it, Unknown
 * when it found one it could not update (being changed by another transaction, changed since it was read).
 */
enum class MergeResult { Applied, Absent, Unknown };
bool DirectMergeBegin(DirectTarget *d, uint32 n);
MergeResult DirectMergeAdd(DirectTarget *d, Datum *params, char *nulls);
/*
 * The version of the key's row the last DirectAdd or DirectMergeAdd that Applied wrote (its tts_tid, its values at
 * value_attnums), or NULL when it deleted the row: a counter with extremes settles them from it (apply.cpp).
 */
TupleTableSlot *DirectWritten(DirectTarget *d);
/* Log mode (DirectBegin of a log counter): append the key's delta row. */
void DirectAppend(DirectTarget *d, Datum *params, char *nulls);
/* Whether rows were written: the caller makes them visible (CommandCounterIncrement) before reading them again. */
bool DirectEnd(DirectTarget *d);

/*
 * All counters fed by one relation (a source table or one of its partitions), in name order; or those whose rows join
 * it as their parent, or that keep counter-cache columns in it.
 */
struct SourceCounters {
	Oid relid;  /* the relation the trigger fired on */
	Oid source; /* the declared source (the partitioned root when relid is a partition; relid for the others) */
	bool valid;
	MemoryContext cxt;
	int ncounters;
	CompiledCounter *counters;
	int nfollowed; /* counters that follow their publisher (CompiledCounter.followed) */
};

/* Look up (building when needed) the counters fed by relation `relid`. Never returns NULL. */
SourceCounters *GetSourceCounters(Oid relid);
/* ... and the counters through a parent row whose parent is `relid` (their source is another table). */
SourceCounters *GetParentCounters(Oid relid);
/* ... and the counters kept in counter-cache columns of existing table `relid`. */
SourceCounters *GetTargetCounters(Oid relid);
/* The compiled form of counter `e` in this backend (compiled now if needed). */
CompiledCounter *CompiledOf(const Counter *e);
/*
 * The unique index on exactly the key columns of counter `c`'s table `rel` (exact: the counter table; sharded: the
 * slots, the slot column last), found when first needed (DirectBegin) and kept with the compiled counter (key_index,
 * key_of_column), checked to still be there at each use; InvalidOid if there is none. KeyIndexProcs: the equality
 * functions of its columns, `index` opened (key_eq_procs), and whether its order is SortDeltas' (key_index_sorted),
 * looked up once per compiled counter and index.
 */
Oid KeyIndexOf(CompiledCounter *c, Relation rel);
void KeyIndexProcs(CompiledCounter *c, Relation index);

/* Register the relcache invalidation callback (from _PG_init). */
void InitCache();

/*
 * counters.capture(), the trigger function of every trigger counters creates (trigger.cpp): the role of the trigger
 * that fired, from its name, decides what it does. Returns the row a row trigger returns (NULL for a sink's row: it
 * is not stored).
 */
HeapTuple Fire(TriggerData *td);
void InitCapture();
/*
 * A command that changes which relations hold a source's rows (TRUNCATE of partitions; a partition detached, dropped or
 * attached): CountRelationRows counts a relation's rows away while they are still in it, or in before it is attached,
 * and notes it here, so that a min(), max() or count(DISTINCT) read again afterwards (ReadSource) sees the source as
 * counted so far: without the relations counted away, with those counted in. BeginMembership starts a command's notes
 * and returns the enclosing command's, which EndMembership puts back (on error too: PG_FINALLY).
 */
struct Membership {
	List *away; /* (in TopTransactionContext) */
	List *in;
};
Membership *BeginMembership();
void EndMembership(Membership *enclosing);
/* The notes of the running command (NULL: none). */
const Membership *CurrentMembership();
/* Add (sign 1) or subtract (-1) the rows `rel` holds now to the counters of `source` (rel or its partitioned root). */
void CountRelationRows(Relation rel, Oid source, int sign);

/*
 * A sink's rows (sink.cpp): SinkRow checks the row the sink trigger fired for and keeps it, unstored, until
 * CountSinkRows (counters_sink_end) counts the statement's rows (under the replica role it counts the row at once); the
 * transaction callbacks forget the rows of a subtransaction that aborts, and fail a commit that leaves rows uncounted.
 * RequireSinkShape: 0A000 if sink `rel` has what a sink cannot keep: a foreign key, row-level security, a generated
 * column.
 */
void SinkRow(TriggerData *td);
void CountSinkRows(Relation rel, SourceCounters *sc);
void SinkXactCallback(XactEvent event, void *arg);
void SinkSubXactCallback(SubXactEvent event, SubTransactionId subxid, SubTransactionId parent, void *arg);
void RequireSinkShape(Relation rel);

/*
 * counters_target_key (target_key.cpp): a row of an existing table that keeps counter-cache columns, updated to another
 * key, with its counter columns recounted for the new key; the row the trigger returns.
 */
HeapTuple TargetKeyRow(TriggerData *td);

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
 * Log and sharded counters cross them when compaction folds their pending rows (maintain.cpp).
 */
inline bool
CrossesAtWrite(const CompiledCounter *c)
{
	return !HasPending(c->counter->mode);
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

/* Counters through a parent row: (key as int8, whole row) of the parents whose key is in the int8[] $1, locked FOR
 * SHARE; and of the source's rows whose key column is in $1. */
char *ParentRowsStatement(const CounterDef *def);
char *ChildRowsStatement(const CounterDef *def);

/* The recount counters_target_key runs for a row that takes another key (target_key.cpp). */
char *KeyRecountStatement(const CounterDef *def, Oid view, Oid target);

/*
 * Window thresholds on a statement's write (windows.cpp): the prefixes (keys but the bucket, one array per key column)
 * of its deltas `entries` (NULL: a key type has no array type), checked once the deltas are applied (SPI connected);
 * CheckWindows: every counter's windows (or one's).
 */
int64 CheckWindows(const char *name);
struct DeltaEntry;
/*
 * The prefixes (keys but the bucket) a statement wrote to a counter with a window, from its sorted nonzero deltas
 * (kept, not copied: they live as long as the statement's deltas), checked once every counter is applied.
 */
struct WrittenPrefixes;
WrittenPrefixes *WindowPrefixes(const CompiledCounter *c, DeltaEntry **entries, uint32 n);
void CheckWrittenWindows(CompiledCounter *c, WrittenPrefixes *prefixes);
/* The window sums of counter `c`'s window columns per prefix (written: of the prefixes in arrays $1...). */
char *WindowSumsStatement(const CompiledCounter *c, bool written);
/* Record in `crossings` which thresholds each prefix's window sum reached; the crossings, to announce. */
char *WindowStateStatement(Oid crossings);

/* counters.statement_memory: deltas held per statement before they are applied in a batch (kB). */
extern int statement_memory_kb;
/* counters.suspend: this session's writes are not counted, for a data load by the counters' owner (capture.cpp). */
extern bool counting_suspended;

/* A key of a counter: one value and null flag per key column, in definition order; the flags follow the values. */
struct DeltaKey {
	Datum *values;
	bool *nulls; /* == (bool *)(values + nkeys) */
};

/*
 * The summed delta of one key of one counter: 16 bytes in the hash table, pointing into one block of the delta
 * context laid out as
 *
 *     int128 ints[nvalues] | Datum numerics[nvalues] | Datum key[nkeys] | bool nulls[nkeys]
 *
 * Int64 columns sum in `ints` (128-bit: intermediate sums may exceed bigint), Numeric columns in `numerics` (NULL
 * datum = zero).
 */
struct DeltaEntry {
	Datum *key; /* the key's values */
	uint32 hash;
	char status; /* (the hash table's) */

	bool *
	KeyNulls(int nkeys) const
	{
		return (bool *)(key + nkeys);
	}
	Datum *
	Numerics(int nvalues) const
	{
		return key - nvalues;
	}
	/*
	 * An extreme column's delta takes its integer sum's 16 bytes: the most extreme value added, then removed; its
	 * numeric's word holds which of the two there are (EXTREME_ADDED, EXTREME_REMOVED).
	 */
	Datum *
	Extremes(int nvalues, int v) const
	{
		return (Datum *)&Ints(nvalues)[v];
	}
	int128 *
	Ints(int nvalues) const
	{
		return (int128 *)((char *)key - nvalues * (sizeof(int128) + sizeof(Datum)));
	}
};

struct deltas_hash; /* delta.cpp: a simplehash table of DeltaEntry */

/* One counter's state during a statement. */
struct CounterRun {
	CompiledCounter *c;
	ExprState *quals;
	ExprState **key_exprs;
	ExprState **arg_exprs;
	ExprState **filter_exprs;
	DeltaKey row_key;        /* the key of the row being counted */
	MemoryContext delta_cxt; /* the deltas (shared by the counters of one source) */
	deltas_hash *deltas;
	char *arena; /* the entries' keys and sums are carved from blocks of delta_cxt */
	Size arena_left;
	Size arena_next; /* the size of the next block: growing, so that a statement of one row takes little memory */
	/*
	 * A counter through a parent row (def->parent): the parent rows of the rows being counted, by key (int64 -> a
	 * HeapTuple of the parent), the slot the expressions read the parent from (INNER_VAR), and a parent row given
	 * instead (when the parent's own write counts its children).
	 */
	HTAB *parents;
	TupleTableSlot *parent_slot;
	HeapTuple fixed_parent;
	TupleTableSlot *child_slot; /* the source's rows, when the parent's write counts its children */
	/*
	 * Extremes (NULL: none): per value column, its last removal, until the column's next delta. An addition of an
	 * equal value to the same key takes it back (an UPDATE's old and new versions, read in step, that keep the key and
	 * the value leave the key's values as they were: nothing to write, nothing to read again).
	 */
	struct ExtremeUndo *undo;
	/*
	 * Reading the source again (extremes.cpp), per value column: its relations, the index of each that serves it and
	 * their readers, found once per batch of deltas (in the delta context); NULL until needed.
	 */
	struct ReadPlan **read_plans;
	/* count(DISTINCT x): the statement's changed pairs (DeltaAddPair), in the delta context; summed by SumPairs */
	PairChange *pairs;
	uint32 npairs;
	uint32 maxpairs;
	/* statistics (stats.cpp): keys written and time spent writing them, over the statement's batches */
	int64 keys_written;
	instr_time apply_time;
};

/* delta.cpp */
void DeltaStart(CounterRun *r);           /* a new, empty table in r->delta_cxt */
DeltaEntry *DeltaOfRowKey(CounterRun *r); /* r->row_key's entry, added (with a copy of the key) if new */
void DeltaAddNumeric(CounterRun *r, DeltaEntry *e, int v, int sign, Datum value);
void DeltaAddExtreme(CounterRun *r, DeltaEntry *e, int v, int sign, Datum value);
/*
 * count(DISTINCT x): DeltaAddPair notes that a row with value `x` of distinct column `v` came (sign 1) or went (-1) for
 * entry `e`'s key. SumPairs, before the deltas are applied: the net change of each (key, value) pair, the pairs that
 * cancel out dropped; an entry whose pairs all cancel has nothing to apply for the column. PairsOf: the entry's pairs
 * of column `v` that changed, as (value, net) (*n of them).
 */

void DeltaAddPair(CounterRun *r, DeltaEntry *e, int v, int sign, Datum x);
void SumPairs(CounterRun *r);
const PairChange *PairsOf(const CounterRun *r, const DeltaEntry *e, int v, uint32 *n);
constexpr Datum EXTREME_ADDED = 1;
constexpr Datum EXTREME_REMOVED = 2;
/*
 * An extreme column's added (or removed) value in the entry, false when there is none: TakeExtreme takes it out;
 * ForgetRemovals takes out every removal, once the key's rows settled them.
 */
bool ExtremeOf(const CounterDef *def, const DeltaEntry *e, int v, Datum flag, Datum *value);
bool TakeExtreme(const CounterDef *def, DeltaEntry *e, int v, Datum flag, Datum *value);
/* (and the pairs of its distinct columns: the key's rows read them) */
void ForgetRemovals(const CounterDef *def, DeltaEntry *e);
uint32 DeltaCount(const CounterRun *r);
DeltaEntry **NonzeroDeltas(CounterRun *r, uint32 *n);           /* in no particular order */
void SortDeltas(CounterRun *r, DeltaEntry **entries, uint32 n); /* by key, in the keys' btree order, NULLS LAST */
/* The order SortDeltas sorts key `i`'s values in (<0, 0, >0); as the counter's owner. */
int CompareKeyValues(const CompiledCounter *c, int i, Datum a, bool anull, Datum b, bool bnull);
bool DeltaIsZero(const CounterDef *def, const DeltaEntry *e);
/* Whether two entries' keys are equal, their key `skip` aside (a window's prefixes); as the counter's owner. */
bool SameKeysBut(const CompiledCounter *c, const DeltaEntry *a, const DeltaEntry *b, int skip);
/* Whether r->row_key (the key of the row being read) is entry `e`'s key; as the counter's owner. */
bool RowKeyIs(const CounterRun *r, const DeltaEntry *e);
int64 TakeInt64(const CounterDef *def, DeltaEntry *e, int v);
Datum TakeNumeric(const CounterDef *def, DeltaEntry *e, int v, Datum zero);

/* apply.cpp: apply the deltas of `n` counters in the order given, then announce their threshold crossings. */
void ApplyCounters(CounterRun **list, int n);
/* qsort's comparison of CounterRun pointers by counter name: the order counters are applied in (capture.cpp). */
int CompareCounterNames(const void *a, const void *b);

/*
 * Deferred counters (deferred.cpp). counters.apply: APPLY_DEFAULT (each counter's own setting), APPLY_DEFERRED or
 * APPLY_IMMEDIATE (every counter). Deferred: whether counter `c`'s deltas wait for the commit in this transaction, now.
 * SettleCounters: a statement's deltas of `n` counters (name order) applied, or held until the commit for the deferred
 * ones. DeltaMerge (delta.cpp): a statement's deltas `from` added to held ones `into`. ApplyDeferred: every held delta
 * applied now (the keys written); ApplySwitched: those of counters no longer deferred; ApplyBeforeUtility: before a
 * utility statement that may change what counters read or hold; ApplyBeforeTargetWrite: before a statement that
 * writes the counter-cache table of a counter with held deltas.
 */
enum ApplySetting { APPLY_DEFAULT, APPLY_DEFERRED, APPLY_IMMEDIATE };
extern int apply_setting;
bool Deferred(const CompiledCounter *c);
void SettleCounters(CounterRun **list, int n);
void DeltaMerge(CounterRun *into, CounterRun *from);
int64 ApplyDeferred();
void ApplySwitched();
void ApplyBeforeUtility(Node *stmt);
void ApplyBeforeTargetWrite(QueryDesc *query);
void InitDeferred();

/*
 * decide.cpp (CheckBounds and NoteCrossings are declared above: direct.cpp decides too). Crossings noted
 * while a statement's deltas are applied are collected in a list of their own: StartCrossings opens it and returns
 * the enclosing one (a callback's statement collects its own), TakeCrossings closes it, returning its crossings and
 * putting the enclosing list back.
 */
List *StartCrossings();
List *TakeCrossings(List *enclosing);
void AnnounceCrossings(List *crossings);
/*
 * Crossings found on one node and announced on another (Citus: a worker's compaction finds them, the coordinator's
 * announces them). CompactionReport renders the rows a compaction folded and its crossings as JSON ({"folded": n,
 * "crossings": [{"column", "key", "old", "new", "threshold", "direction", "every", "crossed"}, ...]}; the keys rendered
 * as the owner);
 * ReportedCompaction reads such a report of counter `counter` back: the rows folded, and (`c` not NULL: the counter
 * compiled with its thresholds) the crossings, for AnnounceCrossings, validated as data (ERRCODE_DATA_CORRUPTED
 * unless each one names a value column of `c` and a key of its key columns).
 */
char *CompactionReport(int64 folded, List *crossings);
List *ReportedCompaction(const char *counter, CompiledCounter *c, const char *report, int64 *folded);
/*
 * The one announcer of crossings -- listed, repeating and window thresholds: NOTIFY "counters.<counter>" naming the
 * counter and `column` (NotifyCrossing), then the column's callback (InvalidOid: none; missing: set, but gone, which
 * is an error), as the owner: PrepareCallback checks it (kind: "threshold" or "window", for messages) and says
 * whether there is one to call, InvokeCallback calls it inside the owner's scope with the crossing's fields (counter,
 * key, column, old, new, threshold, direction, every, crossed; nulls[] per field).
 */
void NotifyCrossing(const char *counter, const char *column);
bool PrepareCallback(const CompiledCounter *c, const char *kind, const char *column, Oid callback, bool missing,
                     FmgrInfo *flinfo);
void InvokeCallback(const CompiledCounter *c, FmgrInfo *flinfo, const Datum *fields, const bool *nulls);
void InitDecisions();

/*
 * One statement's run over the counters of one source (capture.cpp), shared with the trigger roles (trigger.cpp,
 * sink.cpp, parent.cpp): StatementRun is the statement frame's run of `sc`'s source (started by its first event), or
 * outside any frame a run of its own, which EndStatementRun applies at once; StatementCommand is the command whose
 * writes the statement made. StartRun and FinishRun make and apply a run of their own; a RowReader turns rows of the
 * source (or a partition) into the slot the definitions read; CountTuplestores counts a statement's old (-1) and new
 * (+1) rows, CountSlot one row, CountRowWithParent one row (in `slot`) for one counter through a parent row with the
 * parent row given (the parent's write moving its children); InitFrames installs the executor and utility hooks that
 * open frames.
 */
struct Run {
	Oid source;              /* the source whose counters these are */
	MemoryContext cxt;       /* compiled expressions of this statement */
	MemoryContext delta_cxt; /* the deltas: reset whenever they are applied */
	uint64 rows;
	ExprContext *econtext;
	int ncounters;
	CounterRun *runs;
	int64 *row_ints; /* scratch contributions of one row */
	Datum *row_numerics;
	bool *row_present;
	int counting;  /* the counter whose definition is being evaluated on a row, or -1 */
	bool has_join; /* a counter through a parent row is among runs */
	/* statistics: time of the statement's row passes (shared by its counters), and when the current pass began */
	instr_time pass_time;
	instr_time pass_start;
};

/* A parent row of a counter through a parent row, by key. */
struct ParentEntry {
	int64 key;
	HeapTuple tuple;
};

/* Slots to read rows of `rel` and, for a partition, to convert them to the source's row type. */
struct RowReader {
	TupleTableSlot *slot;      /* rows as stored in rel */
	TupleTableSlot *root_slot; /* rows as the source sees them (== slot unless converting) */
	AttrMap *map;
};

Run *StatementRun(SourceCounters *sc);
void EndStatementRun(Run *run);
CommandId StatementCommand();
Run *StartRun(SourceCounters *sc, MemoryContext parent);
void FinishRun(Run *run);
void InitReader(RowReader *rd, Relation rel, Oid source, const TupleTableSlotOps *ops);
void DropReader(RowReader *rd);
void CountSlot(Run *run, RowReader *rd, int sign);
void CountTuplestores(Run *run, RowReader *rd, Tuplestorestate *old_rows, Tuplestorestate *new_rows);
void CountRowWithParent(Run *run, CounterRun *r, TupleTableSlot *slot, HeapTuple parent, int sign);
void PushCountContext(ErrorContextCallback *context, Run *run);
/* An int2, int4 or int8 join key as int64; qsort's comparison of int64 keys. */
int64 IntegerDatum(Oid type, Datum d);
int CompareInt64(const void *a, const void *b);
void InitFrames();
/* A statement's transition tables (either may be NULL) of `rel`, one of `sc`'s relations, counted. */
void CountTransitionTables(Relation rel, SourceCounters *sc, Tuplestorestate *old_rows, Tuplestorestate *new_rows);
/*
 * What the trigger roles check before they count: RequireCounters, 55000 when relation `rel`, which carries the capture
 * triggers, feeds no counter (`sc` has none; parent: `rel` is the parent of counters through a parent row); Suspended,
 * whether counters.suspend leaves a write to `sc`'s relations uncounted (noted in counters.maintenance; 42501 for a
 * role without the privileges of each counter's owner).
 */
void RequireCounters(Relation rel, SourceCounters *sc, bool parent = false);
bool Suspended(SourceCounters *sc);

/*
 * Counters through a parent row (parent.cpp). A source's statement: PrefetchParents, the parents of the rows in its
 * transition tables, for each counter through a parent row (into its CounterRun's parents), read and their keys locked
 * before the rows are counted. The parent's side: ParentCounters, the counters that join `rel` as the parent of their
 * rows (adopted from their descriptions when there are none, else 55000); ParentInserted, a statement's new parent
 * rows, whose children count in; ParentRow (counters_parent_row), a parent row updated or deleted, whose children move
 * to the new row or away.
 */
void PrefetchParents(Run *run, RowReader *rd, Tuplestorestate *old_rows, Tuplestorestate *new_rows);
SourceCounters *ParentCounters(Relation rel);
void ParentInserted(Relation rel, SourceCounters *pc, Tuplestorestate *new_rows);
void ParentRow(TriggerData *td);

/*
 * Logical replication on a subscriber (replica.cpp). CountsHere: whether `sc`'s counters count a write to `rel` on this
 * node (replica: fired by a replica trigger), or an error when a counter follows its publisher and the write would
 * conflict. ReplicaTriggerFires: whether rel's replica trigger for `ev` fires under the replica role (then a statement
 * trigger enabled ALWAYS leaves the counting to it). CountReplicaRow: the row a replica trigger fired for.
 */
bool CountsHere(Relation rel, SourceCounters *sc, bool replica);
bool ReplicaTriggerFires(Relation rel, TriggerEvent ev);
void CountReplicaRow(TriggerData *td, SourceCounters *sc);

} // namespace counters
