/*
 * citus.cpp: the one place that knows Citus (docs/citus.md). Counters over distributed and reference tables count in
 * the shards: the capture trigger fires on the shard a write reaches, maps it to its table, and writes the counter
 * table's shard with the same hash range, on the same node, in the same local transaction. Everything else is
 * refused loudly; nothing is ever counted nowhere.
 *
 * Citus keeps its metadata in catalog tables, read here with SPI: pg_dist_partition (the Citus tables: method, the
 * distribution column, co-location group, replication model), pg_dist_shard (their shards and hash ranges),
 * pg_dist_local_group (this node's group, 0 on the coordinator). The extension is never linked against Citus, and
 * does nothing at all in a database where the citus extension is not installed.
 *
 * The catalog on every node: counters.counter holds OIDs, which differ per node, and Citus cannot distribute an
 * extension's member table. The counters of Citus tables are also kept, by qualified names, in
 * counters.counter_replica, a reference table (a copy on every node, written with two-phase commit, copied to nodes
 * added later) that the coordinator writes in the transaction that changes counters.counter (SyncReplica). A worker's
 * trigger reads it and resolves the names locally: the tables' shells and the definition view, which Citus creates
 * on every node. The declaring transaction switches Citus to sequential mode, so that its later statements reach each
 * node over the connection that wrote the replica and see its rows.
 */
#include "citus/citus.hpp"
#include "model/model.hpp"
#include "compat.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "tcop/tcopprot.h"
#include "utils/formatting.h"
#include "utils/inval.h"
#include "miscadmin.h"
#include "commands/extension.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
}

namespace counters {
namespace citus {

namespace {

/* A Citus table, or a shard of one, as pg_dist_partition and pg_dist_shard describe it. */
struct CitusRelation {
	Oid logical;      /* the table users name */
	const char *name; /* ... qualified */
	bool shard;       /* the relation looked up is one of its shards */
	int64 shardid;
	const char *how; /* "is distributed by Citus", "is a reference table of Citus", ... */
	Kind kind;
	int64 colocation;
	char *column; /* the distribution column (hash-distributed tables), or NULL */
};

Kind
KindOf(const char *partmethod, const char *repmodel, int64 colocationid)
{
	if (strcmp(partmethod, "h") == 0)
		return strcmp(repmodel, "s") == 0 ? Kind::Distributed : Kind::Other;
	if (strcmp(partmethod, "n") == 0 && strcmp(repmodel, "t") == 0)
		return Kind::Reference;
	return Kind::Other;
}

const char *
Describe(const char *partmethod, const char *repmodel, int64 colocationid)
{
	if (strcmp(partmethod, "n") != 0)
		return "is distributed by Citus";
	if (strcmp(repmodel, "t") == 0)
		return "is a reference table of Citus";
	/* single-shard tables (schema-based sharding among them) are co-located; Citus local tables are not */
	return colocationid != 0 ? "is distributed by Citus" : "is a Citus local table";
}

/* One row of a query of Citus's catalogs (SPI connected): its columns as text, or false if there is none. */
bool
QueryRow(const char *sql, int nargs, Oid *argtypes, Datum *args, int ncolumns, char **columns)
{
	(void)QueryLatest(sql, nargs, argtypes, args, nullptr);
	if (SPI_processed == 0)
		return false;
	for (int i = 0; i < ncolumns; i++)
		columns[i] = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1);
	return true;
}

const char *const TABLE_COLUMNS =
    "p.partmethod::pg_catalog.text, p.repmodel::pg_catalog.text, p.colocationid, "
    "CASE WHEN p.partkey IS NOT NULL THEN pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) END";

/*
 * Whether `relid` is a Citus table or a shard of one. A shard is named after its table, with "_<shardid>" appended
 * (the table's name truncated and hashed first when the result would be too long), in the table's schema.
 */
bool
Lookup(Oid relid, CitusRelation *out)
{
	char *relname = get_rel_name(relid);
	if (relname == nullptr)
		return false;
	MemoryContext caller = CurrentMemoryContext;
	SpiConnect();
	int level = PinSettings(PIN_SEARCH_PATH);
	char *row[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
	Oid argtypes[1] = {REGCLASSOID};
	Datum args[1] = {ObjectIdGetDatum(relid)};
	bool found = QueryRow(psprintf("SELECT %s FROM pg_catalog.pg_dist_partition p "
	                               "WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1",
	                               TABLE_COLUMNS),
	                      1, argtypes, args, 4, row);
	Oid logical = relid;
	bool shard = false;
	int64 shardid = 0;
	if (!found) {
		/* a shard: "<table>_<shardid>" */
		const char *digits = relname + strlen(relname);
		while (digits > relname && digits[-1] >= '0' && digits[-1] <= '9')
			digits--;
		if (*digits != '\0' && digits - relname >= 2 && digits[-1] == '_' && strlen(digits) <= 18) {
			shardid = strtoll(digits, nullptr, 10);
			Oid types[1] = {INT8OID};
			Datum values[1] = {Int64GetDatum(shardid)};
			found = QueryRow(psprintf("SELECT %s, s.logicalrelid::pg_catalog.oid::pg_catalog.text "
			                          "  FROM pg_catalog.pg_dist_shard s "
			                          "  JOIN pg_catalog.pg_dist_partition p "
			                          "    ON p.logicalrelid OPERATOR(pg_catalog.=) s.logicalrelid "
			                          " WHERE s.shardid OPERATOR(pg_catalog.=) $1",
			                          TABLE_COLUMNS),
			                 1, types, values, 5, row);
			if (found) {
				logical = (Oid)strtoul(row[4], nullptr, 10);
				const char *table = get_rel_name(logical);
				size_t prefix = (size_t)(digits - 1 - relname);
				/* the same schema, and the table's name, or (truncated) the start of it */
				found = table != nullptr && get_rel_namespace(logical) == get_rel_namespace(relid) &&
				        (strlen(table) == prefix
				             ? strncmp(table, relname, prefix) == 0
				             : strlen(table) > prefix && prefix >= 16 && strncmp(table, relname, 16) == 0);
				shard = found;
			}
		}
	}
	UnpinSettings(level);
	if (found) {
		MemoryContext old = MemoryContextSwitchTo(caller);
		int64 colocation = strtoll(row[2], nullptr, 10);
		out->logical = logical;
		out->shard = shard;
		out->shardid = shard ? shardid : 0;
		out->how = Describe(row[0], row[1], colocation);
		out->kind = KindOf(row[0], row[1], colocation);
		out->colocation = colocation;
		out->column = row[3] != nullptr ? pstrdup(row[3]) : nullptr;
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	if (found)
		out->name = QualifiedName(logical);
	return found;
}

/*
 * On a worker, a relation with capture triggers that Lookup does not know is a shard or shell whose table's metadata
 * has not reached this node yet (Citus creates them first); a shard is named after its table, "<table>_<shardid>".
 */
void
WorkerGuess(Oid relid, CitusRelation *out)
{
	char *relname = pstrdup(get_rel_name(relid));
	char *end = relname + strlen(relname);
	char *digits = end;
	while (digits > relname && digits[-1] >= '0' && digits[-1] <= '9')
		digits--;
	out->shard = digits < end && digits - relname >= 2 && digits[-1] == '_';
	if (out->shard)
		digits[-1] = '\0';
	out->name = out->shard ? quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), relname)
	                       : QualifiedName(relid);
	out->how = out->shard ? "is distributed by Citus" : "is managed by Citus";
}

const char *
KindName(Kind kind)
{
	switch (kind) {
	case Kind::Local:
		return "a local table";
	case Kind::Distributed:
		return "a hash-distributed table";
	case Kind::Reference:
		return "a reference table";
	default:
		return "a Citus table of a kind counters does not count";
	}
}

void
SetLocal(const char *name, const char *value)
{
	(void)set_config_option(name, value, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
}

bool
ReplicaExists()
{
	return OidIsValid(get_relname_relid("counter_replica", get_namespace_oid("counters", false)));
}

} // namespace

/* The key of `def` that is exactly column `column` of its source (a plain column, not an expression), or -1. */
int
DistributionKey(const CounterDef *def, const char *column)
{
	AttrNumber attnum = get_attnum(def->source, column);
	for (int k = 0; k < def->nkeys; k++) {
		Expr *e = def->keys[k].expr;
		if (e != nullptr && IsA(e, Var) && ((Var *)e)->varno == 1 && ((Var *)e)->varattno == attnum)
			return k;
	}
	return -1;
}

void
Init()
{
	integration_hooks.table_of_shard = TableOfShard;
	integration_hooks.catalog_relation = CatalogRelation;
	integration_hooks.on_worker = OnWorker;
	integration_hooks.sync_replica = SyncReplica;
	integration_hooks.lock_on_every_node = LockOnEveryNode;
	integration_hooks.refuse_feature = RefuseFeature;
	integration_hooks.conversion = Conversion;
}

bool
Present()
{
	return OidIsValid(get_extension_oid("citus", true));
}

bool
OnWorker()
{
	if (!Present())
		return false;
	SpiConnect();
	int level = PinSettings(PIN_SEARCH_PATH);
	(void)QueryLatest("SELECT 1 FROM pg_catalog.pg_dist_local_group g WHERE g.groupid OPERATOR(pg_catalog.<>) 0", 0,
	                  nullptr, nullptr, nullptr);
	bool worker = SPI_processed > 0;
	UnpinSettings(level);
	SPI_finish();
	return worker;
}

bool
IsCitusRelation(Oid relid)
{
	CitusRelation r;
	return Present() && Lookup(relid, &r);
}

Kind
KindOfTable(Oid relid)
{
	CitusRelation r;
	if (!Present() || !Lookup(relid, &r) || r.shard)
		return Kind::Local;
	return r.kind;
}

Oid
TableOfShard(Oid relid)
{
	CitusRelation r;
	if (!Present() || !Lookup(relid, &r) || !r.shard)
		return InvalidOid;
	return r.logical;
}

const char *
CatalogRelation()
{
	if (!OnWorker())
		return "counters.counter";
	if (!ReplicaExists())
		return "(SELECT c.* FROM counters.counter c WHERE false)";
	/*
	 * Names that do not resolve on this node give NULL, which the cache refuses. So does a row that no declaration
	 * could have written: its definition view is named after the counter, and its owner (who declared it) has the
	 * privileges of the owners of the source and the counter table (in log and sharded mode: of the log or slots and
	 * the totals too, which the row names under "relations" in its options, SyncReplica).
	 */
	return "(SELECT r.name, pg_catalog.to_regclass(r.source) AS source, pg_catalog.to_regclass(r.target) AS target, "
	       "CASE WHEN v.relname OPERATOR(pg_catalog.=) (r.name OPERATOR(pg_catalog.||) '_definition') "
	       "AND pg_catalog.pg_has_role(v.relowner, s.relowner, 'USAGE') "
	       "AND pg_catalog.pg_has_role(v.relowner, t.relowner, 'USAGE') "
	       "AND (r.options OPERATOR(pg_catalog.?) 'relations') OPERATOR(pg_catalog.=) (r.mode OPERATOR(pg_catalog.<>) "
	       "'exact') AND COALESCE(pg_catalog.pg_has_role(v.relowner, l.relowner, 'USAGE') "
	       "AND pg_catalog.pg_has_role(v.relowner, o.relowner, 'USAGE'), r.mode OPERATOR(pg_catalog.=) 'exact') "
	       "THEN v.oid::pg_catalog.regclass END AS query, r.owns_target, l.oid::pg_catalog.regclass AS log, "
	       "o.oid::pg_catalog.regclass AS totals, r.mode, r.options OPERATOR(pg_catalog.-) 'relations' AS options, "
	       "NULL::pg_catalog.regclass AS crossings "
	       "FROM counters.counter_replica r "
	       "LEFT JOIN pg_catalog.pg_class s ON s.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(r.source) "
	       "LEFT JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(r.target) "
	       "LEFT JOIN pg_catalog.pg_class v ON v.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(r.query) "
	       "LEFT JOIN pg_catalog.pg_class l ON l.oid OPERATOR(pg_catalog.=) "
	       "     pg_catalog.to_regclass(r.options OPERATOR(pg_catalog.#>>) '{relations,log}') "
	       "LEFT JOIN pg_catalog.pg_class o ON o.oid OPERATOR(pg_catalog.=) "
	       "     pg_catalog.to_regclass(r.options OPERATOR(pg_catalog.#>>) '{relations,totals}'))";
}

void
BeginDistributedChange()
{
	/*
	 * Citus refuses triggers on its tables unless told they are safe (the capture triggers write only the co-located
	 * shard); and sequential mode makes this transaction's later statements reach each node over the connection
	 * that wrote counters.counter_replica, so that they see it (and the definition view's DDL allows it).
	 */
	SetLocal("citus.enable_unsafe_triggers", "on");
	SetLocal("citus.multi_shard_modify_mode", "sequential");
}

Placement
CheckDeclaration(const char *counter, const CounterDef *def, Oid target, Oid *colocate_with, const char **column,
                 bool log_mode)
{
	*colocate_with = InvalidOid;
	*column = nullptr;
	if (!Present())
		return Placement::Local;
	if (OnWorker())
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": declare counters on the Citus coordinator", counter),
		                errdetail("This is a worker node of a Citus cluster: its tables are shards and shells of the "
		                          "coordinator's tables."),
		                errhint("Connect to the coordinator and declare the counter there; see docs/citus.md.")));
	CitusRelation s, t;
	bool citus_source = Lookup(def->source, &s);
	bool citus_target = OidIsValid(target) && Lookup(target, &t);
	if (citus_source && s.shard)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": %s is a shard of %s", counter, QualifiedName(def->source), s.name),
		                errhint("Declare the counter over %s.", s.name)));
	if (!citus_source) {
		if (citus_target)
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			                errmsg("counter \"%s\": a local table cannot be counted into a Citus table", counter),
			                errdetail("Target table %s %s; source table %s is local.", t.name, t.how,
			                          QualifiedName(def->source)),
			                errhint("Count a local table into a local table, a distributed table into a co-located "
			                        "distributed table, a reference table into a reference table; see "
			                        "docs/citus.md.")));
		return Placement::Local;
	}
	if (s.kind == Kind::Other)
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		         errmsg("counter \"%s\": counters does not count %s", counter, s.name),
		         errdetail("Source table %s %s, but not as a hash-distributed table with one copy of each shard, or "
		                   "as a reference table.",
		                   s.name, s.how),
		         errhint("Counters count hash-distributed tables (citus.shard_replication_factor = 1) and reference "
		                 "tables; see docs/citus.md.")));
	if (OidIsValid(def->parent))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": counters through a parent row do not count Citus tables", counter),
		                errdetail("Source table %s %s.", s.name, s.how)));
	if (OidIsValid(target) && !citus_target)
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		         errmsg("counter \"%s\": %s cannot be counted into a local table", counter, KindName(s.kind)),
		         errdetail("Source table %s %s; target table %s is local: the shards' writes could not reach it.",
		                   s.name, s.how, QualifiedName(target)),
		         errhint(s.kind == Kind::Reference ? "Make the target a reference table too: SELECT "
		                                             "create_reference_table('%s');"
		                                           : "Distribute the target by the source's distribution column, "
		                                             "co-located: SELECT create_distributed_table('%s', <column>, "
		                                             "colocate_with => '%s');",
		                 QualifiedName(target), s.name)));
	if (s.kind == Kind::Reference) {
		if (citus_target && t.kind != Kind::Reference)
			ereport(ERROR,
			        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			         errmsg("counter \"%s\": a reference table can only be counted into a reference table", counter),
			         errdetail("Source table %s is a reference table; target table %s is %s.", s.name, t.name,
			                   KindName(t.kind)),
			         errhint("Every node applies a reference table's writes to its own copy: the counter "
			                 "table must have a copy on every node too.")));
		*colocate_with = def->source;
		return Placement::Reference;
	}
	/* hash-distributed: the key holds the distribution column, and so does the counter table's distribution */
	int k = DistributionKey(def, s.column);
	if (k < 0 && log_mode && !OidIsValid(target)) {
		/* per-shard partial rows, under an anchor of the distribution column's type (ShardAnchor) */
		Oid type = get_atttype(def->source, get_attnum(def->source, s.column));
		if (type != INT2OID && type != INT4OID && type != INT8OID && type != NUMERICOID && type != TEXTOID &&
		    type != VARCHAROID)
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			                errmsg("counter \"%s\": a key without distribution column \"%s\" of %s needs an integer, "
			                       "numeric or text distribution column",
			                       counter, s.column, s.name),
			                errdetail("Its rows are kept per shard under a value of type %s that falls in each "
			                          "shard's hash range.",
			                          format_type_be(type))));
		*colocate_with = def->source;
		return Placement::Anchored;
	}
	if (k < 0)
		ereport(
		    ERROR,
		    (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		     errmsg("counter \"%s\": the key must include distribution column \"%s\" of %s", counter, s.column, s.name),
		     errdetail("Each shard counts its own rows into the co-located shard of the counter table; a key "
		               "without the distribution column would need rows of other shards."),
		     errhint("Declare it with mode => 'log' (kept as per-shard partial rows, summed on read), or add %s to "
		             "the GROUP BY and the select list; see docs/citus.md.",
		             quote_identifier(s.column))));
	*column = def->keys[k].column_name;
	if (citus_target) {
		char *target_column = t.kind == Kind::Distributed ? t.column : nullptr;
		/* (the target's column named by the key's alias must be its distribution column) */
		if (t.kind != Kind::Distributed || t.colocation != s.colocation || target_column == nullptr ||
		    strcmp(target_column, *column) != 0)
			ereport(ERROR,
			        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			         errmsg("counter \"%s\": target table %s must be distributed by column \"%s\", co-located with "
			                "%s",
			                counter, t.name, *column, s.name),
			         errdetail("Target table %s is %s%s%s; a shard's counts can only be written to the counter "
			                   "table's shard of the same hash range, on the same node.",
			                   t.name, KindName(t.kind), target_column != nullptr ? " distributed by " : "",
			                   target_column != nullptr ? quote_identifier(target_column) : ""),
			         errhint("SELECT create_distributed_table('%s', '%s', colocate_with => '%s');", t.name, *column,
			                 s.name)));
	}
	*colocate_with = def->source;
	return Placement::Distributed;
}

void
DistributeCounterTable(Oid table, Placement placement, Oid colocate_with, const char *column)
{
	SpiConnect();
	int level = PinSettings(PIN_SEARCH_PATH);
	Oid argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum args[3] = {CStringGetTextDatum(QualifiedName(table)), CStringGetTextDatum(column != nullptr ? column : ""),
	                 CStringGetTextDatum(OidIsValid(colocate_with) ? QualifiedName(colocate_with) : "default")};
	int ret = placement == Placement::Reference
	              ? SPI_execute_with_args("SELECT pg_catalog.create_reference_table($1::pg_catalog.regclass)", 1,
	                                      argtypes, args, nullptr, false, 0)
	              : SPI_execute_with_args("SELECT pg_catalog.create_distributed_table($1::pg_catalog.regclass, $2, "
	                                      "colocate_with => $3)",
	                                      3, argtypes, args, nullptr, false, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: distributing %s failed: %s", QualifiedName(table), SPI_result_code_string(ret));
	UnpinSettings(level);
	SPI_finish();
}

void
DistributeAlike(Oid table, Oid like)
{
	CitusRelation r;
	if (!Lookup(like, &r) || r.kind != Kind::Distributed || r.shard || r.column == nullptr)
		elog(ERROR, "counters: %s is not a hash-distributed table", QualifiedName(like));
	DistributeCounterTable(table, Placement::Distributed, like, r.column);
}

char *
AnchorColumnDefinition(Oid source)
{
	CitusRelation s;
	if (!Lookup(source, &s) || s.column == nullptr)
		elog(ERROR, "counters: %s is not a hash-distributed table", QualifiedName(source));
	Oid type;
	int32 typmod;
	Oid collation;
	get_atttypetypmodcoll(source, get_attnum(source, s.column), &type, &typmod, &collation);
	return psprintf("%s %s NOT NULL DEFAULT '0'", ANCHOR_COLUMN, format_type_with_typemod(type, typmod));
}

const char *
ShardAnchor(const char *counter, Oid shard)
{
	CitusRelation r;
	if (!Present() || !Lookup(shard, &r) || !r.shard)
		return nullptr;
	Oid type;
	int32 typmod;
	Oid collation;
	get_atttypetypmodcoll(shard, get_attnum(shard, ANCHOR_COLUMN), &type, &typmod, &collation);
	const char *type_name = format_type_with_typemod(type, typmod);
	MemoryContext caller = CurrentMemoryContext;
	SpiConnect();
	int level = PinSettings(PIN_SEARCH_PATH);
	Oid argtypes[1] = {INT8OID};
	Datum args[1] = {Int64GetDatum(r.shardid)};
	char *row[1] = {nullptr};
	/*
	 * The first of 0, 1, 2, ... whose hash falls in the range: about as many tries as there are shards. (In batches: a
	 * set-returning function in FROM is computed whole before its first row is read.)
	 */
	bool found = false;
	for (int64 from = 0, to = 1000; !found && from < 100000000; from = to, to *= 100)
		found = QueryRow(psprintf("SELECT x.v::pg_catalog.text FROM pg_catalog.pg_dist_shard s, "
		                          "pg_catalog.generate_series(" INT64_FORMAT ", " INT64_FORMAT ") g, "
		                          "LATERAL (SELECT g::pg_catalog.text::%s AS v) x "
		                          "WHERE s.shardid OPERATOR(pg_catalog.=) $1 AND pg_catalog.worker_hash(x.v) "
		                          "BETWEEN s.shardminvalue::pg_catalog.int4 AND s.shardmaxvalue::pg_catalog.int4 "
		                          "ORDER BY g LIMIT 1",
		                          from, to - 1, type_name),
		                 1, argtypes, args, 1, row);
	char *anchor = found ? MemoryContextStrdup(caller, row[0]) : nullptr;
	UnpinSettings(level);
	SPI_finish();
	if (anchor == nullptr)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("counter \"%s\": no value of type %s falls in the hash range of shard %s", counter,
		                       type_name, QualifiedName(shard))));
	return anchor;
}

List *
LocalShards(Oid rel)
{
	if (!Present())
		return NIL;
	MemoryContext caller = CurrentMemoryContext;
	SpiConnect();
	int level = PinSettings(PIN_SEARCH_PATH);
	Oid argtypes[1] = {OIDOID};
	Datum args[1] = {ObjectIdGetDatum(rel)};
	(void)QueryLatest(
	    "SELECT (SELECT i[pg_catalog.cardinality(i)] "
	    "          FROM pg_catalog.parse_ident(pg_catalog.shard_name(s.logicalrelid, s.shardid)) i) "
	    "  FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_dist_placement p "
	    "    ON p.shardid OPERATOR(pg_catalog.=) s.shardid "
	    " WHERE s.logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
	    "   AND p.groupid OPERATOR(pg_catalog.=) (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g) "
	    " ORDER BY s.shardid",
	    1, argtypes, args, nullptr);
	List *names = NIL;
	MemoryContext old = MemoryContextSwitchTo(caller);
	for (uint64 i = 0; i < SPI_processed; i++)
		names = lappend(names, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	MemoryContextSwitchTo(old);
	UnpinSettings(level);
	SPI_finish();
	/* (by name in the table's schema: Citus hides shards from queries of pg_class; one moved away meanwhile: none) */
	List *shards = NIL;
	ListCell *lc;
	foreach (lc, names) {
		Oid shard = get_relname_relid((const char *)lfirst(lc), get_rel_namespace(rel));
		if (OidIsValid(shard))
			shards = lappend_oid(shards, shard);
	}
	return shards;
}

List *
CompactOnWorkers(const char *name)
{
	if (!Present() || OnWorker())
		return NIL;
	MemoryContext caller = CurrentMemoryContext;
	SpiConnect();
	int level = PinSettings(PIN_SEARCH_PATH);
	Oid argtypes[1] = {TEXTOID};
	Datum args[1] = {CStringGetTextDatum(psprintf("SELECT counters.compact_placements(%s)", quote_literal_cstr(name)))};
	(void)QueryLatest("SELECT w.nodename OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) w.nodeport, w.success, "
	                  "       w.result FROM pg_catalog.run_command_on_workers($1) w",
	                  1, argtypes, args, nullptr, false);
	List *reports = NIL;
	for (uint64 i = 0; i < SPI_processed; i++) {
		HeapTuple row = SPI_tuptable->vals[i];
		bool isnull;
		bool success = DatumGetBool(SPI_getbinval(row, SPI_tuptable->tupdesc, 2, &isnull));
		char *result = SPI_getvalue(row, SPI_tuptable->tupdesc, 3);
		if (!success)
			ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
			                errmsg("counter \"%s\": compaction on worker %s failed: %s", name,
			                       SPI_getvalue(row, SPI_tuptable->tupdesc, 1), result ? result : "no result"),
			                errdetail("Each worker folds the shards placed on it; the others' compactions committed."),
			                errhint("Run SELECT counters.compact('%s') on that worker to see why.", name)));
		if (result == nullptr)
			continue;
		MemoryContext old = MemoryContextSwitchTo(caller);
		reports = lappend(reports, pstrdup(result));
		MemoryContextSwitchTo(old);
	}
	UnpinSettings(level);
	SPI_finish();
	return reports;
}

namespace {

/*
 * The caller has the privileges of the owners of the relations a row of the replica names. (Citus allows no subquery
 * in a distributed table's policy: the lookup is a function, on every node.) A new row may name relations this node
 * does not have yet: the coordinator writes the row of a renamed table before Citus renames it on the workers; the
 * workers check every row again when they read it (CatalogRelation).
 */
const char *const MAY_INSERT_ROW = "COALESCE(counters._owns_relation(source), true) AND "
                                   "COALESCE(counters._owns_relation(target), true) AND "
                                   "COALESCE(counters._owns_relation(query), true)";

void
RunAsCatalogOwner(const char *sql, int expected)
{
	ExecuteAsCatalogOwner(sql, 0, nullptr, nullptr, nullptr, expected, false);
}

} // namespace

void
EnableCitus(bool explicitly)
{
	if (!Present())
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("the citus extension is not installed in this database")));
	if (OnWorker())
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counters.enable_citus() runs on the Citus coordinator")));
	if (ReplicaExists())
		return;
	Oid catalog = RangeVarGetRelid(makeRangeVar(pstrdup("counters"), pstrdup("counter"), -1), AccessShareLock, false);
	/*
	 * Citus lets one role modify a reference table's copies in a transaction: the replica is created by the
	 * catalog's owner, and written by the roles that declare counters, in later transactions.
	 */
	if (GetUserId() != RelationOwner(catalog))
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("counters is not set up for Citus tables in this database yet"),
		         errdetail("The counters of Citus tables are kept on every node in counters.counter_replica, which "
		                   "the extension's owner creates once."),
		         errhint("Have role %s run SELECT counters.enable_citus(); in a transaction of its own.",
		                 GetUserNameFromId(RelationOwner(catalog), false))));
	/*
	 * Readable by all, like counters.counter; each role writes the rows of counters whose relations it owns (checked
	 * on every node, where the rows are written), and anyone may delete a row whose relations are gone.
	 */
	RunAsCatalogOwner("CREATE TABLE counters.counter_replica (name text PRIMARY KEY, source text NOT NULL, "
	                  "target text NOT NULL, query text NOT NULL, owns_target boolean NOT NULL, mode text NOT NULL, "
	                  "options jsonb NOT NULL)",
	                  SPI_OK_UTILITY);
	RunAsCatalogOwner("COMMENT ON TABLE counters.counter_replica IS 'the counters of Citus tables, by name, on every "
	                  "node (a reference table written with counters.counter)'",
	                  SPI_OK_UTILITY);
	RunAsCatalogOwner("ALTER TABLE counters.counter_replica ENABLE ROW LEVEL SECURITY", SPI_OK_UTILITY);
	RunAsCatalogOwner("CREATE POLICY readable ON counters.counter_replica FOR SELECT USING (true)", SPI_OK_UTILITY);
	RunAsCatalogOwner(
	    psprintf("CREATE POLICY declared ON counters.counter_replica FOR INSERT WITH CHECK (%s)", MAY_INSERT_ROW),
	    SPI_OK_UTILITY);
	/* (the source's owner may remove any counter of it, as counters.detach() can) */
	RunAsCatalogOwner("CREATE POLICY dropped ON counters.counter_replica FOR DELETE USING "
	                  "(counters._owns_relation(source) OR pg_catalog.to_regclass(source) IS NULL OR "
	                  "pg_catalog.to_regclass(target) IS NULL OR pg_catalog.to_regclass(query) IS NULL)",
	                  SPI_OK_UTILITY);
	RunAsCatalogOwner("GRANT SELECT, INSERT, DELETE ON counters.counter_replica TO PUBLIC", SPI_OK_UTILITY);
	/* (every copy's trigger tells its node's backends to compile the source's counters again) */
	SetLocal("citus.enable_unsafe_triggers", "on");
	RunAsCatalogOwner("CREATE TRIGGER counters_replica_changed AFTER INSERT OR DELETE ON counters.counter_replica "
	                  "FOR EACH ROW EXECUTE FUNCTION counters._replica_changed()",
	                  SPI_OK_UTILITY);
	RunAsCatalogOwner("SELECT pg_catalog.create_reference_table('counters.counter_replica')", SPI_OK_SELECT);
	if (!explicitly)
		ereport(NOTICE, (errmsg("counters keeps the counters of Citus tables in counters.counter_replica on every "
		                        "node from now on")));
}

void
ReplicaChanged(TriggerData *td)
{
	HeapTuple row = td->tg_trigtuple; /* (the inserted or the deleted row) */
	bool isnull;
	Datum source = heap_getattr(row, 2, RelationGetDescr(td->tg_relation), &isnull);
	if (isnull)
		return;
	/* (a qualified, quoted name; one this node does not have has no compiled counters) */
	List *names = compat::QualifiedNameList(TextDatumGetCString(source));
	Oid relid = RangeVarGetRelid(makeRangeVarFromNameList(names), NoLock, true);
	if (OidIsValid(relid))
		CacheInvalidateRelcacheByRelid(relid);
}

namespace {

/* `text` as a JSON string literal. */
char *
JsonString(const char *text)
{
	StringInfoData out;
	initStringInfo(&out);
	escape_json(&out, text);
	return out.data;
}

} // namespace

void
SyncReplica(const char *name)
{
	if (!Present() || OnWorker())
		return;
	/* (the counter as the model reads it: none when it was dropped) */
	List *entries = ReadCatalog(name);
	const Counter *e = entries != NIL ? (const Counter *)linitial(entries) : nullptr;
	bool citus_source = e != nullptr && IsCitusRelation(e->source);
	if (!ReplicaExists()) {
		if (!citus_source)
			return;
		EnableCitus(false);
	}
	/*
	 * Written as the caller (who has the privileges of the counter's owners, or nothing would have been changed):
	 * Citus lets one role modify reference tables in a transaction, and the caller's statements modify them too.
	 */
	Oid argtypes[7] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, BOOLOID, TEXTOID, JSONBOID};
	Datum args[7] = {CStringGetTextDatum(name)};
	SpiConnect();
	int level = PinSettings(PIN_SEARCH_PATH);
	if (SPI_execute_with_args("DELETE FROM counters.counter_replica WHERE name OPERATOR(pg_catalog.=) $1", 1, argtypes,
	                          args, nullptr, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "counters: updating counters.counter_replica failed");
	/*
	 * The names as every node resolves them: qualified, quoted; the options as the model writes them (a counter's own
	 * state, building and last_rebuild, stays on the coordinator). Inserted with VALUES: Citus copies an INSERT ...
	 * SELECT with COPY, which row-level security does not allow.
	 */
	if (citus_source) {
		args[1] = CStringGetTextDatum(QualifiedName(e->source));
		args[2] = CStringGetTextDatum(QualifiedName(e->target));
		args[3] = CStringGetTextDatum(QualifiedName(e->query));
		args[4] = BoolGetDatum(e->owns_target);
		args[5] = CStringGetTextDatum(ModeName(e->mode));
		args[6] = OptionsJsonb(e->options);
		/* (log and sharded mode: the log or slots and the totals, by name, under a key the options never have) */
		if (HasPending(e->mode))
			args[6] = DirectFunctionCall2(
			    jsonb_concat, args[6],
			    DirectFunctionCall1(jsonb_in, CStringGetDatum(psprintf("{\"relations\": {\"log\": %s, \"totals\": %s}}",
			                                                           JsonString(QualifiedName(e->log)),
			                                                           JsonString(QualifiedName(e->totals))))));
		if (SPI_execute_with_args("INSERT INTO counters.counter_replica VALUES ($1, $2, $3, $4, $5, $6, $7)", 7,
		                          argtypes, args, nullptr, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "counters: updating counters.counter_replica failed");
	}
	UnpinSettings(level);
	SPI_finish();
	CommandCounterIncrement();
}

void
LockOnEveryNode(Oid rel, LOCKMODE mode)
{
	if (!Present() || OnWorker() || KindOfTable(rel) == Kind::Local)
		return;
	const char *name = mode == ShareLock ? "SHARE" : mode == ShareRowExclusiveLock ? "SHARE ROW EXCLUSIVE" : nullptr;
	if (name == nullptr)
		elog(ERROR, "counters: no LOCK TABLE mode for lock mode %d", mode);
	SpiConnect();
	int level = PinSettings(PIN_SEARCH_PATH);
	Execute(psprintf("LOCK TABLE %s IN %s MODE", QualifiedName(rel), name), SPI_OK_UTILITY);
	UnpinSettings(level);
	SPI_finish();
}

bool
RefuseFeature(const char *counter, Oid source, const char *what, bool distributed)
{
	CitusRelation r;
	if (!Present() || !Lookup(source, &r))
		return false;
	if (distributed && r.kind == Kind::Distributed && !r.shard)
		return true;
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	                errmsg("counter \"%s\": counters does not support %s on Citus tables yet", counter, what),
	                errdetail("Source table %s %s; its counters count in the shards, in exact mode.", r.name, r.how),
	                errhint("See docs/citus.md for what counters does on Citus.")));
}

Oid
WriteShard(const char *counter, Oid rel, Oid fired, Oid source)
{
	if (!Present())
		return rel;
	CitusRelation f, s, w;
	bool fired_shard = Lookup(fired, &f) && f.shard;
	bool citus_source = Lookup(source, &s);
	bool citus_rel = Lookup(rel, &w);
	Kind source_kind = citus_source ? s.kind : Kind::Local;
	Kind rel_kind = citus_rel ? w.kind : Kind::Local;
	bool matches = source_kind == rel_kind && source_kind != Kind::Other &&
	               (source_kind != Kind::Distributed || s.colocation == w.colocation);
	if (!matches)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": source table %s is %s, but its counter table %s is %s", counter,
		                       QualifiedName(source), KindName(source_kind), QualifiedName(rel), KindName(rel_kind)),
		                errdetail("Counters count a local table into a local table, a distributed table into a "
		                          "co-located distributed table, a reference table into a reference table."),
		                errhint("Drop the counter with counters.drop_counter('%s') and declare it again; "
		                        "counters.distribute() distributes a counted table with its counters; see "
		                        "docs/citus.md.",
		                        counter)));
	if (!fired_shard)
		return rel; /* the table itself (a TRUNCATE of its shell) writes the counter table as a whole */
	/* the counter table's shard with the fired shard's hash range (a reference table's only shard), on this node */
	MemoryContext caller = CurrentMemoryContext;
	SpiConnect();
	int level = PinSettings(PIN_SEARCH_PATH);
	Oid argtypes[2] = {INT8OID, OIDOID};
	Datum args[2] = {Int64GetDatum(f.shardid), ObjectIdGetDatum(rel)};
	char *row[1] = {nullptr};
	bool found = QueryRow("SELECT (SELECT i[pg_catalog.cardinality(i)] "
	                      "        FROM pg_catalog.parse_ident(pg_catalog.shard_name(t.logicalrelid, t.shardid)) i) "
	                      "FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_dist_shard t "
	                      "ON t.logicalrelid OPERATOR(pg_catalog.=) $2::pg_catalog.regclass "
	                      "AND t.shardminvalue IS NOT DISTINCT FROM s.shardminvalue "
	                      "AND t.shardmaxvalue IS NOT DISTINCT FROM s.shardmaxvalue "
	                      "WHERE s.shardid OPERATOR(pg_catalog.=) $1",
	                      2, argtypes, args, 1, row);
	UnpinSettings(level);
	char *shard_name = found ? MemoryContextStrdup(caller, row[0]) : nullptr;
	SPI_finish();
	/* (by name in the table's schema: Citus hides shards from queries of pg_class) */
	Oid shard = found ? get_relname_relid(shard_name, get_rel_namespace(rel)) : InvalidOid;
	if (!found)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("counter \"%s\": counter table %s has no shard for the hash range of shard %s", counter,
		                       QualifiedName(rel), QualifiedName(fired)),
		                errhint("Source and counter table must stay co-located; see docs/citus.md.")));
	if (!OidIsValid(shard))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("counter \"%s\": shard %s of counter table %s is not on this node", counter, shard_name,
		                       QualifiedName(rel)),
		                errdetail("The write ran on shard %s here.", QualifiedName(fired)),
		                errhint("Source and counter table must stay co-located: move their shards together; see "
		                        "docs/citus.md.")));
	return shard;
}

void
RefuseCapture(Relation rel)
{
	if (!Present())
		return;
	CitusRelation r;
	Oid relid = RelationGetRelid(rel);
	if (!Lookup(relid, &r)) {
		if (!OnWorker())
			return;
		WorkerGuess(relid, &r);
	}
	ereport(ERROR,
	        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	         errmsg("table %s %s, and has no counter declared for its shards", r.name, r.how),
	         r.shard ? errdetail("The write ran on shard %s, which Citus gave the table's triggers; the table's "
	                             "counters were declared while it was local, and count only local rows.",
	                             QualifiedName(relid))
	                 : errdetail("Its rows are in shards, which counters declared on the local table cannot count."),
	         errhint("Distribute a counted table with counters.distribute(), not create_distributed_table(); to "
	                 "repair, drop the table's counters on the coordinator and declare them again; see "
	                 "docs/citus.md.")));
}

} // namespace citus
} // namespace counters
