/*
 * citus.hpp: the Citus integration -- citus.cpp (what a table is to Citus, the replica of the catalog, placing and
 * writing counter tables, refusals) and distribute.cpp (distribute(), conversions).
 */
#pragma once

#include "counters.hpp"

namespace counters {

/*
 * Citus (citus.cpp): counters over hash-distributed and reference tables count in the shards (docs/citus.md). Without
 * the citus extension in the database every function returns at once (false, Local, or nothing refused).
 */
namespace citus {
/* What a table is to Citus, as far as counters is concerned. */
enum class Kind { Local, Distributed, Reference, Other };
/* Where create_counter puts a counter table it creates. */
/*
 * Where create_counter puts a counter table it creates; Anchored: a key without the distribution column, in log mode,
 * its totals and log distributed by ANCHOR_COLUMN (per-shard partial rows summed on read).
 */
enum class Placement { Local, Distributed, Reference, Anchored };
/*
 * Fill the model's integration hooks (IntegrationHooks, model.hpp) with this file's functions: called from _PG_init,
 * as PostgreSQL's own hooks are registered.
 */
void Init();
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
                           const char **column, bool log_mode);
/* Anchored: ANCHOR_COLUMN's definition, of the source's distribution column's type (its default: the fill's anchor). */
char *AnchorColumnDefinition(Oid source);
/*
 * A value of ANCHOR_COLUMN's type (as text) that Citus hashes into the range of `shard` (a shard of a cross-shard
 * counter's log): the anchor of that shard's partial rows.
 */
const char *ShardAnchor(const char *counter, Oid shard);
void DistributeCounterTable(Oid table, Placement placement, Oid colocate_with, const char *column);
/* Distribute `table` as `like` is (the same column, co-located): a log or slots table beside its totals. */
void DistributeAlike(Oid table, Oid like);
/* The shards of Citus table `rel` placed on this node. */
List *LocalShards(Oid rel);
/*
 * On the coordinator: counters.compact_placements(name) on every worker, over connections of its own (each worker
 * folds its own placements, and commits); returns their reports (text: the rows folded and the crossings found,
 * CompactionReport). Elsewhere (or without Citus): NIL.
 */
List *CompactOnWorkers(const char *name);
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
/*
 * Refuse (0A000) `what` for a counter of a Citus table (`distributed`: but a hash-distributed one); true when `source`
 * is a hash-distributed table (and `distributed`).
 */
bool RefuseFeature(const char *counter, Oid source, const char *what, bool distributed);
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
/* The key of `def` that is exactly column `column` of its source (a plain column, not an expression), or -1. */
int DistributionKey(const CounterDef *def, const char *column);
/* In sql_drop: refuse (0A000) a Citus table conversion that drops a counter's source or table. */
void RefuseConversion(List *dropped);
/*
 * The Citus conversion the statement being run would make (its function's name, or "a foreign key to a reference
 * table", which makes Citus convert local tables), or NULL: what drops a counter's relations behind its back.
 */
const char *Conversion();
} // namespace citus

} // namespace counters
