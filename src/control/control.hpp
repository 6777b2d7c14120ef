/*
 * control.hpp: the cold control plane -- the SQL API's operations on counters:
 *
 *   declare.cpp              declare and drop counters; attach their triggers; sinks, parents, counter-cache keys
 *   online.cpp               change a counter: its mode, its definition, its name; the concurrent declarations
 *   options.cpp              bounds, thresholds, retention, touch, keep_zero, window thresholds, top()
 *   maintain.cpp             compact, retention, verify, rebuild, the concurrent steps
 *   ddl.cpp                  the event triggers: what DDL does to counters
 *   ddl_counters.cpp         ... and which counters a table's DDL concerns
 *   declare_statements.cpp   the statements that declare, switch and drop
 *   maintain_statements.cpp  the statements of maintenance, bounds and top()
 *
 * Every change of an existing counter starts with BeginChange (the one way to change a counter).
 */
#pragma once

#include "model/model.hpp"
#include "write/write.hpp"

namespace counters {

/*
 * The one way to change a counter (declare.cpp): the caller's right to (the privileges of the owner of every relation
 * it names) checked, the tables whose writes it follows locked in one order (LockCounterSources, in `mode`; NoLock:
 * none) and the catalog read again once they are (a change that committed meanwhile is seen), its own relations
 * locked after them (CounterRelations, in `own`), then the counter's owner's scope entered: whatever the change creates
 * belongs to the owner, and the owner's code it runs runs as the owner. EndChange leaves it.
 */
struct Change {
	Counter *e;
	OwnerScope scope;
};
Counter *BeginChange(Change *change, const char *name, LOCKMODE mode, LOCKMODE own);
void EndChange(Change *change);

/*
 * The statements of maintenance (maintain_statements.cpp), built from a counter's layout (LayoutOf) and definition
 * (DefinitionOf); its options as the row `e` has them.
 */
char *VerifyStatement(const Counter *e);
/* A statement whose parse tells whether `condition` is one expression (nothing injected after it). */
char *ConditionProbe(const char *condition);
char *RebuildConditionCheck(const Counter *e, const char *condition);
/* distributed: for a Citus counter table (no ctid); then ZeroRowsStatement deletes the rows of zeros */
char *RebuildStatement(const Counter *e, const char *condition, bool distributed);
char *ZeroRowsStatement(const Counter *e);
char *KeyColumnList(const Counter *e);
/* Fold pending rows into the totals: (rows moved, zero rows' ctids), and with_rows, each folded key's row after. */
char *CompactStatement(const Counter *e, bool with_rows);
/*
 * Fold every pending row into the totals, as one statement Citus pushes down to co-located shards (no ctid, no row
 * locks): only with writers locked out; then DeleteAllStatement(e->log) and ZeroRowsStatement.
 */
char *FoldAllStatement(const Counter *e);
char *DeleteRowsStatement(Oid rel);
char *DeleteAllStatement(Oid rel);
char *RetentionStatement(const Counter *e, Oid rel, const char **names);

/* Statements for declaring and switching counters (declare_statements.cpp). */
char *CreateViewStatement(const char *schema, const char *view, const char *definition);
char *CreateCounterTableStatement(const CounterDef *def, const char *schema, const char *table);
/*
 * Citus, a key without the distribution column (log mode): the totals' key with ANCHOR_COLUMN, the log's index, and
 * the view summing a key's partial rows over every anchor.
 */
char *AnchoredKeyStatement(const CounterDef *def, Oid table, bool all_keys_not_null);
char *AnchoredLogIndexStatement(const CounterDef *def, Oid log);
char *AnchoredViewStatement(const CounterDef *def, const char *schema, const char *name, Oid totals, Oid log);
/* A derived kind's generated column, as CREATE TABLE or ADD COLUMN writes it, over its accumulators' columns. */
char *DerivedColumnDefinition(const DerivedDef *d, const char *const accumulators[2]);
/*
 * The storage parameters of each kind of table a counter keeps (one place: declare_statements.cpp says why), set
 * when the table is created; a redeclared counter's tables take back what its tables had (StorageStatements: rel's
 * storage parameters reset, then `options` set: up to two statements, each run by itself, as Citus propagates it).
 */
enum class Storage { Counts, Log, Slots };
const char *StorageParameters(Storage kind);
char *SetStorageStatement(Oid rel, const char *parameters);
List *StorageStatements(Oid rel, List *options);
List *StorageOf(Oid rel); /* rel's storage parameters as DefElems (invalid rel: none) */
/*
 * The counter table's key index, once it is filled: a primary key (or unique constraint) on the keys, or (digest,
 * when a key is of a type DigestedKeyType names) a unique index with such keys by their digest, each with a hash
 * index of its own for readers. KeyIndexElement: a key column as an index element and ON CONFLICT target.
 */
char *CounterKeyStatement(const CounterDef *def, Oid table, bool all_keys_not_null, bool digest);
bool DigestsKeys(const CounterDef *def);
char *FillStatement(const CounterDef *def, Oid table, Oid view);
char *ZeroTargetStatement(const CounterDef *def, Oid target);
char *FillTargetStatement(const CounterDef *def, Oid target, Oid view);
char *ReplicaIdentityStatement(Oid rel, bool full);
char *ReplicaIdentityFullStatement(Oid rel);
char *RenameStatement(Oid rel, const char *name);
char *CreateLikeStatement(const char *schema, const char *name, Oid like);
char *LogIndexStatement(const Counter *e, Oid log);
char *AddSlotColumnStatement(Oid log);
char *SlotKeyStatement(const Counter *e, Oid log);
char *PendingViewStatement(const Counter *e, const char *schema, const char *name, Oid totals, Oid log);
char *GrantSelectStatement(Oid rel, Oid grantee);
char *DropStatement(const char *kind, Oid rel, bool if_exists = false);
char *RenameViewColumnStatement(Oid view, const char *from, const char *to);

/* The capture, parent, guard and counter-cache key triggers' statements; making sure a counter's own tables have the
 * guard; counters_target_key on `target` for the key columns of the counters kept in it (dropped when none is). */
char *CreateParentTriggerStatement(int trigger, Oid rel);
char *CreateTriggerStatement(int trigger, Oid rel, bool is_source);
char *DropTriggerStatement(int trigger, Oid rel);
char *EnableReplicaTriggerStatement(int trigger, Oid rel);
char *EnableTriggerStatement(const char *trigger, Oid rel, bool always);
char *CreateGuardTriggerStatement(Oid rel);
void GuardOwnTables(const Counter *e);
char *CreateTargetKeyTriggerStatement(Oid target, List *columns);
char *DropTargetKeyTriggerStatement(Oid target);
void AttachTarget(Oid target);

/* How a declaration resolves the names of its definition. */
enum class Names {
	Caller, /* as the caller resolves them: a definition the caller typed */
	Pinned  /* with search_path = pg_catalog, pg_temp: a stored definition, deparsed with it (every other name
	           qualified), which a role that can create functions in the caller's schemas cannot redirect */
};

/*
 * Declaring (declare.cpp), for the changes of online.cpp: a mode's name checked (22023 naming the counter); whether
 * a counter of that name exists; the relation `name` in `schema`, once created; a counter declared in `mode` as
 * `owner` (InvalidOid: a new counter's), its names resolved as `names` says; the steps of create_counter_concurrently.
 */
Mode ParseMode(const char *name, const char *mode);
bool CounterExists(const char *name);
Oid RelationIn(const char *schema, const char *name);
/*
 * A counter's own table kept through its declaration again (redefine.cpp): the table (an exact counter's, or the
 * totals), and what it was made for: each column's name in the definition, role, and attribute number (by position).
 */
struct KeptTable {
	Oid table;
	int ncolumns;
	const char **def_names;
	bool *is_key;
	AttrNumber *attnums;
	/* the definition's value columns by their number; its derived kinds, and their generated columns (0: none) */
	const char **value_names;
	int nderived;
	const DerivedDef *derived;
	AttrNumber *derived_attnums;
};
/* What a counter's table is now (before its definition view is dropped), in CurrentMemoryContext. */
KeptTable *KeepTable(const Counter *e);
/*
 * The kept table emptied and reshaped for definition `def` (SPI connected, in the owner's scope, the counter out of
 * the catalog): columns the definition no longer has dropped, new ones added after the others, retyped ones retyped.
 * Refused (0A000, 2BP01) before anything changes when the new definition moves a column it keeps, or when something
 * of the user's (an index, a view, a constraint) uses a column that would go or change type. Returns whether the keys
 * changed: the counter's key index was dropped, to be built again once the table is filled.
 */
bool ReshapeTable(const char *name, const KeptTable *kept, const CounterDef *def);
/*
 * What the user made of a counter's table that a new table would not have (indexes but the counter's, triggers but
 * the counters', policies, views over it, publications naming it, renamed columns), as a list for a message, or NULL:
 * what alter_counter_concurrently(), which declares the counter again into new tables, refuses to lose.
 */
char *UserMadeProperties(const Counter *e);
Oid DeclareCounter(const char *name, const char *definition, const char *target, const char *mode, Oid owner,
                   Names names, const KeptTable *kept = nullptr);
void CounterConcurrently(const char *name, const char *definition, const char *mode, Oid owner);

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
void *SaveAndDrop(const Counter *e);
/* The name of a counter SaveAndDrop saved. */
const char *SavedName(const void *saved);
void DeclareSaved(void *saved, const char *why);
/* CALL counters.alter_counter_concurrently (SPI connected non-atomic). */
void AlterCounterConcurrently(const char *name, const char *definition);
/*
 * counters.drop_counter(); keep_triggers: the source keeps its triggers, keep_tables: the counter's tables stay (a
 * counter declared again in this transaction, into the table it keeps).
 */
void DropCounter(const char *name, bool keep_triggers = false, bool keep_tables = false);
/* counters.attach(): Attach for a table that has counters, by a caller with its owner's privileges. */
void AttachCounted(Oid relid);
void Attach(Oid source);
/*
 * The replica triggers of `source` (and its partitions) enabled for the replica role again after ENABLE TRIGGER ALL
 * enabled them for the origin role, where they do nothing (after every ALTER TABLE of a source).
 */
void KeepReplicaTriggers(Oid source);
/* The same for a parent's replica triggers (counters_parent_replica*), which only a restore's ENABLE TRIGGER ALL makes
 * fire on the origin. */
void KeepParentReplicaTriggers(Oid parent);
void Detach(Oid source);

/* Sinks and counters through a parent row: making a table a sink or a plain source again; the parents of a source's
 * counters, their triggers, whether any counter joins one. */
void SetSink(Oid source, bool sink);
List *ParentsOfSource(Oid source);
void SetParentTriggers(Oid parent, bool attach);
bool JoinsParent(Oid parent);

/*
 * 0A000 if views with a check option read `rel` (directly or through other views), which its being a sink would
 * bypass: when making it a sink, or (making_sink false) after a view was created or changed.
 */
void RefuseCheckOptionViews(Oid rel, bool making_sink);
void CopySelectGrants(Oid from, Oid to);
/* The roles other than its owner that hold SELECT on `rel`. */
List *SelectGrantees(Oid rel);

/* Bounds, thresholds, retention, top() (options.cpp) and the statements they run (maintain_statements.cpp). */
void SetBounds(const char *name, const char *column, Datum min, bool min_null, Datum max, bool max_null);
/* `thresholds` NULL: none (then `every` must be given); `every` NULL: no repeating thresholds. */
void SetThresholds(const char *name, const char *column, ArrayType *thresholds, Oid callback, Datum every,
                   bool every_null);
void SetRetention(const char *name, const char *column, Datum keep, bool keep_null);
void SetTouch(const char *name, const char *column);
/* Marks counter `name` as a level of counter `whole` through a chain of parent rows (option part_of). */
void MarkPart(const char *name, const char *whole);
/* Keeps the whole definition of counter `name` through a chain, as declared (option chain: declared again from it). */
void MarkChain(const char *name, const char *declared);
void SetKeepZero(const char *name, bool keep);
void SetDeferred(const char *name, bool deferred);
void Top(const char *name, const char *column, Datum k, bool k_null, const char *filter, FunctionCallInfo fcinfo);
/* top() in the row type `rowtype` of the relation a counter is read from: whole rows of that type. */
void TopRows(Oid rowtype, const char *column, Datum k, bool k_null, const char *filter, FunctionCallInfo fcinfo);
void RequireKeyFilter(const Counter *e, const char *filter);
char *BoundsViolation(const char *column, Datum min, bool min_null, Datum max, bool max_null);
char *CountWhereStatement(Oid rel, const char *condition);
char *KeyFilterCheckStatement(const Counter *e, const char *filter);
/*
 * The top statement: (the key columns..., value numeric) rows, or with `rowtype` (the row type of the relation the
 * counter is read from) that relation's non-dropped columns in order, the values of the counter's columns in their
 * types.
 */
/* distributed: a Citus counter in log or sharded mode (no subquery in its LIMIT: the pending keys are not read first)
 */
char *TopStatement(const Counter *e, int col, const char *limit, const char *filter, TupleDesc rowtype = nullptr,
                   bool distributed = false);

/* Thresholds on a sliding-window sum: setting them, and window_state() (options.cpp). */
void SetWindowThresholds(const char *name, const char *column, ArrayType *thresholds, const char *bucket,
                         const char *width, Oid callback);
/* counters.window_state(name): the window state of one or all counters the caller may read, as their owners read it. */
void WindowState(const char *name, FunctionCallInfo fcinfo);

/*
 * A counter's window state: the table of which thresholds each prefix's window sum is at or above, as announced.
 * WindowCrossings makes `e` have one (window) or none, as its owner, and returns it: created in the schema of its table
 * as <table>_crossings when its window is set, so that it is its owner's and dumped with its tables; dropped with the
 * window. KeepCrossings gives a counter declared again the table set aside (Kept), without the rows of prefixes its new
 * definition no longer has, or drops it if the window did not survive. The statements that create and read it.
 */
Oid WindowCrossings(const Counter *e, bool window);
void KeepCrossings(const Counter *e, Oid crossings, const CounterDef *def);
char *CreateCrossingsStatement(const char *schema, const char *table);
char *DeleteCrossingsStatement(Oid crossings);
char *StalePrefixesStatement(Oid crossings);
char *CrossingsStatement(Oid crossings);

/*
 * The maintenance functions (maintain.cpp). Without a name, compact() and apply_retention() make a round: each
 * counter's steps apart, skipped when busy, bounded by counters.step_timeout, failures reported and noted; so does
 * CompactInRound(name) for one counter (the background worker, a transaction per counter). InitMaintenance: the
 * setting, from _PG_init.
 */
int64 Compact(const char *name);
/* counters.compact_placements(name), on a Citus worker: Compact's fold of this node's placements, reported
 * (CompactionReport) rather than announced. */
char *CompactPlacements(const char *name);
int64 CompactInRound(const char *name);
/* Fold all of a log or sharded counter's pending rows, its writers locked out (mode switches, rebuilds). */
void FoldPending(const Counter *e);
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
/*
 * Run body(arg) in a subtransaction of its own; an error rolls it back and is returned (NULL: none). A query cancel
 * or a shutdown is not caught: it ends the whole call.
 */
ErrorData *TryInSubtransaction(void (*body)(void *), void *arg);

/*
 * The counters of `catalog` (ReadCatalog's rows) a DDL statement on `relid` concerns (ddl_counters.cpp): those whose
 * source is `relid` (or the root it feeds, `source`), or that join it as their parent; the first of those whose source
 * or parent it is, or NULL (writes to such a table must fire its own triggers, so it cannot gain inheritance children
 * or become a partition or a child); the counter whose values it keeps (its own tables, or an existing table with
 * counter-cache columns), or NULL; the counter one of whose columns (a key, value or slot column) `column` is, in its
 * own table or in the columns it keeps in an existing table, or NULL.
 */
List *CountersReading(List *catalog, Oid relid, Oid source);
Counter *CounterOfSource(List *catalog, Oid relid);
const Counter *CounterKeptIn(List *catalog, Oid relid);
const Counter *CounterOfColumn(List *catalog, Oid relid, const char *column);

/* The event triggers (ddl.cpp): ddl_command_start, ddl_command_end, sql_drop; InitDdl from _PG_init. */
void InitDdl();
void OnDdlStart(EventTriggerData *trigger);
void OnDdlEnd(EventTriggerData *trigger);
void OnSqlDrop();

} // namespace counters
