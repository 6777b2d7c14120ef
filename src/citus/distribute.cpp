/*
 * distribute.cpp: a counted local table made a Citus table (counters.distribute), and the Citus conversions that
 * would drop a counter's relations behind its back, refused.
 */
#include "citus/citus.hpp"
#include "model/model.hpp"
#include "compat.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "tcop/tcopprot.h"
#include "utils/formatting.h"
#include "utils/inval.h"
#include "miscadmin.h"
#include "commands/extension.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
}

namespace counters {
namespace citus {

void
Distribute(Oid source, const char *column)
{
	if (!Present())
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("counters.distribute() needs the citus extension in this database")));
	const char *table = QualifiedName(source);
	if (OnWorker())
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("table %s: distribute counted tables on the Citus coordinator", table)));
	if (IsCitusRelation(source))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("table %s is already a Citus table", table),
		                errhint("Drop its counters (counters.drop_counter) and declare them again.")));
	if (get_rel_relkind(source) != RELKIND_RELATION || get_rel_relispartition(source))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("table %s: counters.distribute() distributes plain tables", table),
		                errdetail("It is partitioned, or a partition.")));
	RequireReadCommitted("counters.distribute()");
	if (!HasOwnerPrivileges(source))
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE), errmsg("must be owner of table %s", table),
		                errdetail("counters.distribute() distributes a table and its counters' tables.")));
	if (IsSink(source))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("table %s is a sink", table)));
	/* every counter of the table must be one counters keeps on Citus; checked before anything changes */
	List *entries = ReadCatalogOfSource(source);
	const char **columns = (const char **)palloc0(sizeof(char *) * (list_length(entries) + 1));
	ListCell *lc;
	int i = 0;
	foreach (lc, entries) {
		Counter *e = (Counter *)lfirst(lc);
		RequireMaintainer(e);
		CounterDef *def = DefinitionOf(e);
		const char *refused = e->mode != Mode::Exact          ? "is in log or sharded mode"
		                      : !e->owns_target               ? "counts into columns of an existing table"
		                      : OidIsValid(def->parent)       ? "counts through a parent row"
		                      : e->options->nthresholds > 0   ? "has thresholds"
		                      : e->options->window != nullptr ? "has window thresholds"
		                                                      : nullptr;
		if (refused != nullptr)
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			                errmsg("counter \"%s\" of table %s %s, which counters does not support on Citus yet",
			                       e->name, table, refused),
			                errhint("Drop the counter (counters.drop_counter), distribute the table, and declare it "
			                        "again; see docs/citus.md.")));
		if (IsCitusRelation(e->target))
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			                errmsg("counter \"%s\": its table %s is already a Citus table", e->name,
			                       QualifiedName(e->target))));
		int k = DistributionKey(def, column);
		if (k < 0)
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			                errmsg("counter \"%s\": the key must include distribution column \"%s\" of %s", e->name,
			                       column, table),
			                errdetail("Each shard counts its own rows into the co-located shard of the counter table."),
			                errhint("Drop the counter, or declare it again with %s in its key, before distributing.",
			                        quote_identifier(column))));
		columns[i++] = def->keys[k].column_name;
	}
	/*
	 * Writers wait until commit; the capture triggers stay off while Citus copies the rows already counted (but the
	 * TRUNCATE trigger, which a copy does not fire: Citus would not propagate enabling it again).
	 */
	LockSource(source, ShareRowExclusiveLock);
	BeginDistributedChange();
	/* (in the caller's context: the list outlives the SPI connection) */
	List *disabled = NIL;
	for (int t = 0; t < CAPTURE_TRIGGERS; t++)
		if (t != TRUNCATE_TRIGGER && t != REPLICA_TRIGGER && t != REPLICA_TRUNCATE_TRIGGER &&
		    TriggerFunction(source, CaptureTriggerName(t)) == CaptureFunction())
			disabled = lappend_int(disabled, t);
	SpiConnect();
	int level = PinSettings(PIN_SEARCH_PATH);
	foreach (lc, disabled) {
		Execute(
		    psprintf("ALTER TABLE %s DISABLE TRIGGER %s", table, quote_identifier(CaptureTriggerName(lfirst_int(lc)))),
		    SPI_OK_UTILITY);
	}
	/* (a Citus table has no replica triggers: attach() creates none) */
	ListCell *rc;
	foreach (rc, find_all_inheritors(source, NoLock, nullptr))
		for (int t = REPLICA_TRIGGER; t <= REPLICA_TRUNCATE_TRIGGER; t++)
			if (TriggerFunction(lfirst_oid(rc), CaptureTriggerName(t)) == CaptureFunction())
				Execute(psprintf("DROP TRIGGER %s ON %s", quote_identifier(CaptureTriggerName(t)),
				                 QualifiedName(lfirst_oid(rc))),
				        SPI_OK_UTILITY);
	Oid argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum args[3] = {CStringGetTextDatum(table), CStringGetTextDatum(column), CStringGetTextDatum(table)};
	if (SPI_execute_with_args("SELECT pg_catalog.create_distributed_table($1::pg_catalog.regclass, $2)", 2, argtypes,
	                          args, nullptr, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "counters: distributing %s failed", table);
	i = 0;
	foreach (lc, entries) {
		Counter *e = (Counter *)lfirst(lc);
		args[0] = CStringGetTextDatum(QualifiedName(e->target));
		args[1] = CStringGetTextDatum(columns[i++]);
		if (SPI_execute_with_args("SELECT pg_catalog.create_distributed_table($1::pg_catalog.regclass, $2, "
		                          "colocate_with => $3)",
		                          3, argtypes, args, nullptr, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "counters: distributing %s failed", QualifiedName(e->target));
	}
	UnpinSettings(level);
	SPI_finish();
	foreach (lc, entries)
		SyncReplica(((Counter *)lfirst(lc))->name);
	SpiConnect();
	level = PinSettings(PIN_SEARCH_PATH);
	foreach (lc, disabled) {
		Execute(
		    psprintf("ALTER TABLE %s ENABLE TRIGGER %s", table, quote_identifier(CaptureTriggerName(lfirst_int(lc)))),
		    SPI_OK_UTILITY);
	}
	UnpinSettings(level);
	SPI_finish();
	CacheInvalidateRelcacheByRelid(source);
}

const char *
Conversion()
{
	if (!Present() || debug_query_string == nullptr)
		return nullptr;
	/*
	 * Citus's table conversions drop the table (and the views over it) and create a new one in its place; adding a
	 * foreign key from a local table to a reference table converts every local table of the foreign key graph into a
	 * Citus local table so.
	 */
	char *query = asc_tolower(debug_query_string, strlen(debug_query_string));
	static const char *const conversions[] = {"alter_distributed_table",
	                                          "undistribute_table",
	                                          "alter_table_set_access_method",
	                                          "citus_add_local_table_to_metadata",
	                                          "create_distributed_table_concurrently",
	                                          "create_reference_table",
	                                          "citus_schema_distribute"};
	for (const char *c : conversions)
		if (strstr(query, c) != nullptr) {
			/*
			 * create_distributed_table_concurrently() converts the table into a Citus local table first, on a
			 * connection of Citus's own to this node: that backend's query names the inner function only.
			 */
			if (strcmp(c, "citus_add_local_table_to_metadata") == 0 && application_name != nullptr &&
			    strncmp(application_name, "citus_internal", strlen("citus_internal")) == 0)
				return "create_distributed_table_concurrently() (through citus_add_local_table_to_metadata())";
			return c;
		}
	if (strstr(query, "alter table") != nullptr && strstr(query, "references") != nullptr)
		return "a foreign key to a reference table";
	return nullptr;
}

void
RefuseConversion(List *dropped)
{
	const char *conversion = Conversion();
	if (conversion == nullptr || strchr(conversion, ' ') != nullptr)
		return;
	ListCell *lc;
	foreach (lc, ReadCatalog(nullptr)) {
		Counter *e = (Counter *)lfirst(lc);
		if (list_member_oid(dropped, e->source) || list_member_oid(dropped, e->target))
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			                errmsg("counter \"%s\": %s() would drop its %s", e->name, conversion,
			                       list_member_oid(dropped, e->source) ? "source table" : "counter table"),
			                errdetail("Citus converts a table by copying it into a new one and dropping the old; "
			                          "the counter would be dropped with it."),
			                errhint("Drop the counter with counters.drop_counter('%s'), convert the table, and "
			                        "declare the counter again.",
			                        e->name)));
	}
}

} // namespace citus
} // namespace counters
