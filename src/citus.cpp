/*
 * citus.cpp: the one place that knows Citus. Until distributed sources are supported, counters refuses every Citus
 * table loudly, never counts nothing or counts wrong (docs/citus.md).
 *
 * Citus keeps its metadata in catalog tables (pg_dist_partition: the Citus tables; pg_dist_shard: their shards;
 * pg_dist_local_group: this node's group, 0 on the coordinator), read here with SPI. The extension is never linked
 * against Citus, and does nothing at all in a database where the citus extension is not installed.
 *
 * Refused: declaring a counter on a Citus table (distributed, reference or Citus local table) as source or target, or
 * on a worker node; counting into a table that became a Citus table; the capture trigger firing on a shard (Citus
 * copies a table's triggers to its shards, where no counter is kept) or on the coordinator's shell of a Citus table
 * (its TRUNCATE trigger); and Citus copying the capture triggers to a shard or shell (create_distributed_table,
 * create_reference_table, citus_add_local_table_to_metadata of a counted table), seen by the ddl_command_end trigger.
 */
#include "counters.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
}

namespace counters {
namespace citus {

namespace {

/* A Citus table, or a shard of one, as pg_dist_partition and pg_dist_shard describe it. */
struct CitusRelation {
	const char *name; /* the table users name, qualified */
	bool shard;       /* the relation looked up is one of its shards */
	const char *how;  /* "is distributed by Citus", "is a reference table of Citus", ... */
};

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
QueryRow(const char *sql, Oid argtype, Datum arg, int ncolumns, char **columns)
{
	Oid argtypes[1] = {argtype};
	Datum args[1] = {arg};
	(void)QueryLatest(sql, 1, argtypes, args, nullptr);
	if (SPI_processed == 0)
		return false;
	for (int i = 0; i < ncolumns; i++)
		columns[i] = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1);
	return true;
}

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
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "counters: SPI_connect failed");
	int level = PinSettings(PIN_SEARCH_PATH);
	char *row[4] = {nullptr, nullptr, nullptr, nullptr};
	bool found = QueryRow("SELECT p.partmethod::pg_catalog.text, p.repmodel::pg_catalog.text, p.colocationid "
	                      "  FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1",
	                      REGCLASSOID, ObjectIdGetDatum(relid), 3, row);
	Oid logical = relid;
	bool shard = false;
	if (!found) {
		/* a shard: "<table>_<shardid>" */
		const char *digits = relname + strlen(relname);
		while (digits > relname && digits[-1] >= '0' && digits[-1] <= '9')
			digits--;
		if (*digits != '\0' && digits - relname >= 2 && digits[-1] == '_' && strlen(digits) <= 18) {
			int64 shardid = strtoll(digits, nullptr, 10);
			found = QueryRow(
			    "SELECT p.partmethod::pg_catalog.text, p.repmodel::pg_catalog.text, p.colocationid, "
			    "       s.logicalrelid::pg_catalog.oid::pg_catalog.text "
			    "  FROM pg_catalog.pg_dist_shard s "
			    "  JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid OPERATOR(pg_catalog.=) s.logicalrelid "
			    " WHERE s.shardid OPERATOR(pg_catalog.=) $1",
			    INT8OID, Int64GetDatum(shardid), 4, row);
			if (found) {
				logical = (Oid)strtoul(row[3], nullptr, 10);
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
	const char *how = found ? Describe(row[0], row[1], strtoll(row[2], nullptr, 10)) : nullptr;
	UnpinSettings(level);
	SPI_finish();
	MemoryContextSwitchTo(caller);
	if (found) {
		out->name = QualifiedName(logical);
		out->shard = shard;
		out->how = how;
	}
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

} // namespace

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
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "counters: SPI_connect failed");
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

void
RefuseDeclaration(const char *counter, Oid source, Oid target)
{
	if (!Present())
		return;
	if (OnWorker())
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": counters does not support Citus tables yet", counter),
		                errdetail("This is a worker node of a Citus cluster: its tables are shards and shells of the "
		                          "coordinator's tables."),
		                errhint("Declare counters on the coordinator, over tables that stay local to it; see "
		                        "docs/citus.md.")));
	Oid rels[2] = {source, target};
	for (int i = 0; i < 2; i++) {
		CitusRelation r;
		if (!OidIsValid(rels[i]) || !Lookup(rels[i], &r))
			continue;
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		         errmsg("counter \"%s\": counters does not support Citus tables yet", counter),
		         errdetail("%s %s %s: its rows are written in shards, which the counter's triggers cannot count%s.",
		                   i == 0 ? "Source table" : "Target table", r.name, r.how, i == 0 ? "" : " into"),
		         errhint("Keep the source table and the counter's table local (not distributed, reference or Citus "
		                 "local tables); see docs/citus.md.")));
	}
}

void
RefuseCountingInto(const char *counter, Oid rel)
{
	CitusRelation r;
	if (!Present() || !Lookup(rel, &r))
		return;
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	                errmsg("counter \"%s\": counters does not support Citus tables yet", counter),
	                errdetail("Table %s, which the counter writes, %s.", r.name, r.how),
	                errhint("Keep the counter's table local: drop the counter with counters.drop_counter('%s') and "
	                        "declare it again; see docs/citus.md.",
	                        counter)));
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
	        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("table %s %s; counters cannot count it yet", r.name, r.how),
	         r.shard
	             ? errdetail("The write ran on shard %s, which Citus gave the table's triggers; the table's counters "
	                         "are kept on the coordinator, and no counter is kept for the shard.",
	                         QualifiedName(relid))
	             : errdetail("Its rows are in shards, which its counters on the coordinator cannot count."),
	         errhint("Counters count tables that stay local. Drop the table's counters on the coordinator, or make "
	                 "the table local again; see docs/citus.md.")));
}

void
RefuseCaptureTriggers()
{
	if (!Present())
		return;
	/*
	 * Tables this command created or altered that carry capture triggers: Citus copies a counted table's triggers to
	 * a shard or shell with CREATE TRIGGER, then ALTER TABLE ... ENABLE TRIGGER (the event trigger fires for the
	 * latter) on every node that holds one.
	 */
	MemoryContext caller = CurrentMemoryContext;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "counters: SPI_connect failed");
	int level = PinSettings(PIN_SEARCH_PATH);
	(void)QueryLatest("SELECT DISTINCT t.tgrelid FROM pg_catalog.pg_event_trigger_ddl_commands() d "
	                  "  JOIN pg_catalog.pg_trigger t ON t.tgrelid OPERATOR(pg_catalog.=) d.objid "
	                  "   AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
	                  " WHERE t.tgfoid OPERATOR(pg_catalog.=) 'counters.capture()'::pg_catalog.regprocedure",
	                  0, nullptr, nullptr, nullptr);
	List *rels = NIL;
	MemoryContext old = MemoryContextSwitchTo(caller);
	for (uint64 i = 0; i < SPI_processed; i++) {
		bool isnull;
		rels = lappend_oid(rels,
		                   DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull)));
	}
	MemoryContextSwitchTo(old);
	UnpinSettings(level);
	SPI_finish();
	if (rels == NIL)
		return;
	bool worker = OnWorker();
	ListCell *lc;
	foreach (lc, rels) {
		Oid relid = lfirst_oid(lc);
		CitusRelation r;
		if (!Lookup(relid, &r)) {
			if (!worker)
				continue;
			WorkerGuess(relid, &r);
		}
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("table %s %s; counters cannot count it yet", r.name, r.how),
		                errdetail("Citus is giving %s the triggers of counters: its writes would run where no counter "
		                          "is kept.",
		                          QualifiedName(relid)),
		                errhint("Drop the table's counters with counters.drop_counter() before handing it to Citus, or "
		                        "keep it local; see docs/citus.md.")));
	}
}

} // namespace citus
} // namespace counters
