/*
 * ddl.cpp: following DDL that changes what a counted table holds or is (the ddl_command_start event trigger).
 *
 * Partitions that join or leave a counted table bring or take rows without firing any trigger. Before DROP TABLE of
 * a partition, ALTER TABLE ... ATTACH/DETACH PARTITION, and DROP SCHEMA or DROP OWNED that drop partitions with their
 * schema or owner, count the rows that leave (or join) the source. This runs in the command's transaction: if the
 * command fails, so does the count.
 *
 * Refused, because the counter would go on silently wrong or every later write would fail: a counted table becoming a
 * partition or an inheritance child or parent (writes through the parent, or to the child, would not fire its
 * triggers), DETACH PARTITION CONCURRENTLY of a counted partition (its rows would leave in a second transaction the
 * trigger does not see), and dropping or retyping a counter table's counted columns.
 *
 * On a Citus worker the event triggers do nothing but refuse capture triggers (citus.cpp): Citus applies DDL to its
 * shards there, in parallel connections of one distributed transaction, and the workers hold no counter.
 */
#include "control/control.hpp"
#include "citus/citus.hpp"
#include "compat.hpp"

extern "C" {
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "storage/lmgr.h"
#include "utils/snapmgr.h"
#include "commands/event_trigger.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}

namespace counters {

namespace {

Oid
LookupTable(RangeVar *rv)
{
	return rv ? RangeVarGetRelid(rv, NoLock, true) : InvalidOid;
}

/*
 * The caller may run the command that makes `relid` leave or join its table (PostgreSQL checks it only later): DROP
 * needs the owner of the table or of its schema (DROP SCHEMA, DROP OWNED: the schema's or the role's), ATTACH and
 * DETACH the owner of the table. Checked before anything is locked or counted.
 */
void
RequireAllowed(Oid relid, bool drop)
{
	Oid user = GetUserId();
	if (compat::OwnsRelation(relid, user) || (drop && compat::OwnsNamespace(get_rel_namespace(relid), user)))
		return;
	aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(get_rel_relkind(relid)), get_rel_name(relid));
}

/*
 * Count the rows of a partition that leaves (sign -1) or joins (1) counted table `source`, locked first as the command
 * will lock it: its parent (`parent_mode`), then the partition and its own partitions. A writer still in flight on
 * the partition finishes first, so its rows are counted; a writer that goes through the parent waits for the command
 * instead of locking counter rows first (no deadlock between the two).
 */
void
CountPartitionRows(Oid partition, Oid parent, LOCKMODE parent_mode, Oid source, int sign)
{
	if (GetSourceCounters(source)->ncounters == 0)
		return;
	LockRelationOid(parent, parent_mode);
	LockRelationOid(partition, AccessExclusiveLock);
	List *rels = find_all_inheritors(partition, AccessExclusiveLock, nullptr);
	ListCell *lc;
	foreach (lc, rels) {
		Oid relid = lfirst_oid(lc);
		if (get_rel_relkind(relid) != RELKIND_RELATION)
			continue;
		Relation rel = table_open(relid, NoLock);
		CountRelationRows(rel, source, sign);
		table_close(rel, NoLock);
	}
}

/*
 * The partitions among `rels` that leave a counted table: only the topmost of them (a partition whose ancestor
 * leaves too is counted with it).
 */
List *
TopmostPartitions(List *rels)
{
	List *result = NIL;
	ListCell *lc;
	foreach (lc, rels) {
		Oid relid = lfirst_oid(lc);
		if (!get_rel_relispartition(relid))
			continue;
		bool covered = false;
		List *ancestors = get_partition_ancestors(relid);
		ListCell *la;
		foreach (la, ancestors)
			covered |= list_member_oid(rels, lfirst_oid(la));
		if (!covered)
			result = list_append_unique_oid(result, relid);
	}
	return result;
}

/* The partitions in a schema (DROP SCHEMA), or owned by a role or in its schemas (DROP OWNED ... CASCADE). */
enum class Holder { Schema, Owner };
List *
PartitionsOf(Holder holder, Oid arg)
{
	MemoryContext caller = CurrentMemoryContext;
	SpiConnect();
	Oid argtypes[1] = {OIDOID};
	Datum args[1] = {ObjectIdGetDatum(arg)};
	int ret = SPI_execute_with_args(holder == Holder::Schema
	                                    ? "SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relispartition "
	                                      "AND c.relnamespace OPERATOR(pg_catalog.=) $1"
	                                    : "SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relispartition "
	                                      "AND (c.relowner OPERATOR(pg_catalog.=) $1 OR c.relnamespace IN ("
	                                      "SELECT n.oid FROM pg_catalog.pg_namespace n "
	                                      "WHERE n.nspowner OPERATOR(pg_catalog.=) $1))",
	                                1, argtypes, args, nullptr, true, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "counters: reading pg_class failed: %s", SPI_result_code_string(ret));
	List *rels = NIL;
	MemoryContext old = MemoryContextSwitchTo(caller);
	for (uint64 r = 0; r < SPI_processed; r++) {
		bool isnull;
		rels = lappend_oid(rels,
		                   DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull)));
	}
	MemoryContextSwitchTo(old);
	SPI_finish();
	return rels;
}

[[noreturn]] void
RefuseStructureChange(const Counter *e, Oid relid, const char *what)
{
	ereport(ERROR,
	        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	         errmsg("counter \"%s\" reads table %s, which cannot %s", e->name, QualifiedName(relid), what),
	         errdetail("Writes to a partition or inheritance child do not fire the parent's statement triggers, and "
	                   "writes through the parent do not fire the child's: the counter would silently miss them."),
	         errhint("Declare the counter on the partitioned table, or drop it first with counters.drop_counter('%s').",
	                 e->name)));
}

/*
 * ALTER COLUMN ... TYPE of a source column a counter's definition reads: PostgreSQL would refuse it (the definition
 * view depends on the column). Each such counter is dropped here and declared again from its definition when the
 * command ends (RetypedEnd), with its mode, options and grants, its values recounted in the new type; the ALTER holds
 * the source's ACCESS EXCLUSIVE lock throughout, and a failure rolls all of it back. A sink's counter cannot be
 * recounted: refused.
 */
MemoryContext retyped_cxt = nullptr; /* under TopTransactionContext, while counters wait to be declared again */
/*
 * Their saved state (SaveAndDrop), each with the subtransaction that dropped it: an ALTER TABLE that fails in a
 * subtransaction (a savepoint rolled back, an exception block) takes its drop back, and its entry with it.
 */
struct Retyped {
	SubTransactionId subxid;
	void *saved;
};
List *retyped = NIL; /* Retyped * */

void
ForgetRetyped(void *)
{
	retyped_cxt = nullptr;
	retyped = NIL;
}

void
RetypedSubXactCallback(SubXactEvent event, SubTransactionId subxid, SubTransactionId parent, void *)
{
	ListCell *lc;
	foreach (lc, retyped) {
		Retyped *r = (Retyped *)lfirst(lc);
		if (r->subxid != subxid)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
			retyped = foreach_delete_current(retyped, lc);
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
			r->subxid = parent;
	}
}

void
RetypeCounters(List *catalog, Oid relid, const char *column)
{
	AttrNumber attnum = get_attnum(relid, column);
	if (attnum == InvalidAttrNumber)
		return;
	ListCell *lc;
	foreach (lc, catalog) {
		Counter *e = (Counter *)lfirst(lc);
		/* (its source's column, or its parent's: a counter through a parent row reads both) */
		if (!OidIsValid(e->query) || !ViewUsesColumn(e->query, relid, attnum))
			continue;
		/* (a level of a chain: the whole counter is declared again, its levels with it) */
		if (e->options->part_of != nullptr) {
			e = LookupCounter(e->options->part_of);
			bool saved = false;
			ListCell *lr;
			foreach (lr, retyped)
				saved |= strcmp(SavedName(((Retyped *)lfirst(lr))->saved), e->name) == 0;
			if (saved)
				continue;
		}
		if (e->source == relid && IsSink(relid))
			ereport(ERROR,
			        (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			         errmsg("counter \"%s\" counts column \"%s\" of sink %s: its type cannot change", e->name, column,
			                QualifiedName(relid)),
			         errdetail("The counter would have to be recounted in the new type, and a sink keeps no rows."),
			         errhint("Drop the counter, change the type, and declare it again (it starts from zero).")));
		MemoryContext old = MemoryContextSwitchTo(TransactionContext(&retyped_cxt, "counters retyped", ForgetRetyped));
		Retyped *r = (Retyped *)palloc(sizeof(Retyped));
		r->subxid = GetCurrentSubTransactionId();
		r->saved = SaveAndDrop(e);
		retyped = lappend(retyped, r);
		MemoryContextSwitchTo(old);
	}
}

/*
 * An unlogged table is emptied by crash recovery, and no other: a counter whose source or values table is unlogged
 * would silently stop matching its source at the next crash (docs/operations.md#durability).
 */
[[noreturn]] void
RefuseUnlogged(const Counter *e, Oid relid, bool source)
{
	ereport(ERROR,
	        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	         errmsg("counter \"%s\" %s %s: it cannot be unlogged", e->name,
	                source ? "counts the rows of" : "keeps its values in", QualifiedName(relid)),
	         errdetail("After a crash PostgreSQL empties every unlogged table and keeps the others: the counter would "
	                   "no longer match its source."),
	         errhint("Drop the counter first with counters.drop_counter('%s').", e->name)));
}

/*
 * Writes a counter misses from now on, said when it happens: a capture trigger disabled (or made to fire for the
 * replica role only), or a counted table renamed or moved, which the counter follows while a table taking its old
 * name is not counted (a swap: verify() compares with the renamed table and cannot tell).
 */
void
WarnMissedWrites(List *catalog, Oid relid, const char *trigger, bool replica_only)
{
	if (trigger != nullptr && strncmp(trigger, "counters_", 9) != 0 && strncmp(trigger, "zz_counters_", 12) != 0)
		return;
	/* (the replica triggers fire for the replica role only, as attach() creates them) */
	if (replica_only && trigger != nullptr &&
	    (strcmp(trigger, CaptureTriggerName(REPLICA_TRIGGER)) == 0 ||
	     strcmp(trigger, CaptureTriggerName(REPLICA_TRUNCATE_TRIGGER)) == 0 ||
	     strcmp(trigger, ParentTriggerName(PARENT_REPLICA_TRIGGER)) == 0 ||
	     strcmp(trigger, ParentTriggerName(PARENT_REPLICA_TRUNCATE_TRIGGER)) == 0))
		return;
	const char *state = trigger == nullptr ? "its triggers are disabled"
	                                       : psprintf("trigger \"%s\" %s", trigger,
	                                                  replica_only ? "fires for the replica role only" : "is disabled");
	ListCell *lc;
	foreach (lc, CountersReading(catalog, relid, SourceOf(relid))) {
		Counter *e = (Counter *)lfirst(lc);
		ereport(WARNING,
		        (errmsg("counter \"%s\" will miss the writes to %s while %s", e->name, QualifiedName(relid), state),
		         IsSink(e->source) ? errdetail("A sink keeps no rows: what is inserted meanwhile is never counted.")
		                           : errdetail("counters.verify('%s') lists the keys such writes changed, and "
		                                       "counters.rebuild('%s') recounts them.",
		                                       e->name, e->name)));
	}
}

void
WarnRenamed(List *catalog, Oid relid, const char *name, const char *schema)
{
	ListCell *lc;
	foreach (lc, CountersReading(catalog, relid, relid)) {
		Counter *e = (Counter *)lfirst(lc);
		ereport(WARNING,
		        (errmsg("counter \"%s\" follows table %s to its new %s \"%s\"", e->name, QualifiedName(relid),
		                name != nullptr ? "name" : "schema", name != nullptr ? name : schema),
		         errdetail("A table that takes its old name is not counted, and counters.verify() compares the "
		                   "counter with this table."),
		         errhint("After a swap, counters.alter_counter('%s', definition => ...), given the definition naming "
		                 "the new table, declares the counter on it and recounts it.",
		                 e->name)));
	}
}

void
CheckAlterTable(AlterTableStmt *stmt, List **leaving, List **joining, Oid *parent)
{
	Oid relid = LookupTable(stmt->relation);
	*parent = relid;
	if (!OidIsValid(relid))
		return;
	List *catalog = nullptr;
	ListCell *lc;
	foreach (lc, stmt->cmds) {
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);
		switch (cmd->subtype) {
		case AT_DropColumn:
		case AT_AlterColumnType: {
			if (catalog == nullptr)
				catalog = ReadCatalog(nullptr);
			const Counter *e = CounterOfColumn(catalog, relid, cmd->name);
			if (e != nullptr)
				ereport(ERROR,
				        (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				         errmsg("counter \"%s\" keeps its values in column \"%s\" of %s", e->name, cmd->name,
				                QualifiedName(relid)),
				         errdetail("Every write to the counter's source would fail without it, or write values of "
				                   "the wrong type."),
				         errhint("Drop the counter first with counters.drop_counter('%s') (and declare it again).",
				                 e->name)));
			if (cmd->subtype == AT_AlterColumnType)
				RetypeCounters(catalog, relid, cmd->name);
			break;
		}
		case AT_SetUnLogged: {
			if (catalog == nullptr)
				catalog = ReadCatalog(nullptr);
			List *reading = CountersReading(catalog, relid, SourceOf(relid));
			if (reading != NIL)
				RefuseUnlogged((Counter *)linitial(reading), relid, true);
			const Counter *e = CounterKeptIn(catalog, relid);
			if (e != nullptr)
				RefuseUnlogged(e, relid, false);
			break;
		}
		case AT_DisableTrig:
		case AT_DisableTrigAll:
		case AT_DisableTrigUser:
		case AT_EnableReplicaTrig:
			if (catalog == nullptr)
				catalog = ReadCatalog(nullptr);
			WarnMissedWrites(catalog, relid,
			                 cmd->subtype == AT_DisableTrig || cmd->subtype == AT_EnableReplicaTrig ? cmd->name
			                                                                                        : nullptr,
			                 cmd->subtype == AT_EnableReplicaTrig);
			break;
		case AT_EnableRowSecurity:
		case AT_ForceRowSecurity:
			if (IsSink(relid))
				ereport(ERROR,
				        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				         errmsg("table %s is a sink: row-level security cannot be enabled on it", QualifiedName(relid)),
				         errdetail("Policies check the rows a statement stores; the rows of a sink are never stored, "
				                   "so a writer could count rows the policies refuse."),
				         errhint("counters.set_sink('%s', false) makes it a table that stores its rows again.",
				                 QualifiedName(relid))));
			break;
		case AT_AddInherit: {
			if (catalog == nullptr)
				catalog = ReadCatalog(nullptr);
			Oid inherited = LookupTable((RangeVar *)cmd->def);
			const Counter *e = CounterOfSource(catalog, relid);
			if (e != nullptr)
				RefuseStructureChange(e, relid, "become an inheritance child");
			if (OidIsValid(inherited) && (e = CounterOfSource(catalog, inherited)) != nullptr)
				RefuseStructureChange(e, inherited, "have inheritance children");
			break;
		}
		case AT_AttachPartition:
		case AT_DetachPartition: {
			PartitionCmd *pc = (PartitionCmd *)cmd->def;
			Oid partition = LookupTable(pc->name);
			if (!OidIsValid(partition) || get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
				break;
			if (catalog == nullptr)
				catalog = ReadCatalog(nullptr);
			const Counter *e;
			if (cmd->subtype == AT_AttachPartition && (e = CounterOfSource(catalog, partition)) != nullptr)
				RefuseStructureChange(e, partition, "become a partition");
			if (cmd->subtype == AT_AttachPartition && get_rel_persistence(partition) == RELPERSISTENCE_UNLOGGED &&
			    (e = CounterOfSource(catalog, SourceOf(relid))) != nullptr)
				RefuseUnlogged(e, partition, true);
			if (cmd->subtype == AT_DetachPartition && get_rel_relispartition(partition)) {
				if (pc->concurrent && (e = CounterOfSource(catalog, SourceOf(partition))) != nullptr)
					ereport(ERROR,
					        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					         errmsg("counter \"%s\" counts the rows of %s: it cannot be detached concurrently", e->name,
					                QualifiedName(partition)),
					         errdetail("DETACH PARTITION CONCURRENTLY completes in a second transaction, which the "
					                   "counter cannot follow."),
					         errhint("Detach it without CONCURRENTLY.")));
				*leaving = lappend_oid(*leaving, partition);
			} else if (cmd->subtype == AT_AttachPartition && !get_rel_relispartition(partition))
				*joining = lappend_oid(*joining, partition);
			break;
		}
		default:
			break;
		}
	}
}

void
CheckCreateTable(CreateStmt *stmt)
{
	if (stmt->inhRelations == NIL)
		return;
	List *catalog = ReadCatalog(nullptr);
	if (stmt->partbound != nullptr) {
		/* (a partition of a counted table gets the triggers when it has been created) */
		Oid parent = LookupTable((RangeVar *)linitial(stmt->inhRelations));
		const Counter *e = OidIsValid(parent) ? CounterOfSource(catalog, SourceOf(parent)) : nullptr;
		if (e != nullptr && stmt->relation->relpersistence == RELPERSISTENCE_UNLOGGED)
			RefuseUnlogged(e, parent, true);
		return;
	}
	ListCell *lc;
	foreach (lc, stmt->inhRelations) {
		Oid parent = LookupTable((RangeVar *)lfirst(lc));
		const Counter *e = OidIsValid(parent) ? CounterOfSource(catalog, parent) : nullptr;
		if (e != nullptr)
			RefuseStructureChange(e, parent, "have inheritance children");
	}
}

} // namespace

void
InitDdl()
{
	RegisterSubXactCallback(RetypedSubXactCallback, nullptr);
}

namespace {

/*
 * A Citus conversion into a Citus local table (citus_add_local_table_to_metadata) renames the table into its shard and
 * makes a shell of the old name: the catalog would point at the shard, and every later write to the source would fail
 * until the counter is dropped. Refused for any table a counter writes or reads, naming the conversion.
 */
void
RefuseConvertedAway(Oid relid)
{
	const char *conversion = citus::Conversion();
	if (conversion == nullptr)
		return;
	ListCell *lc;
	foreach (lc, ReadCatalog(nullptr)) {
		Counter *e = (Counter *)lfirst(lc);
		const char *what = relid == e->source                         ? "source table"
		                   : relid == e->target && !e->owns_target    ? "counter-cache table"
		                   : relid == e->target || relid == e->totals ? "counter table"
		                   : relid == e->log                          ? "log"
		                   : relid == e->crossings                    ? "window state table"
		                                                              : nullptr;
		if (what == nullptr)
			continue;
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": %s%s would convert its table with Citus", e->name, conversion,
		                       strchr(conversion, ' ') != nullptr ? "" : "()"),
		                errdetail("Citus renames %s, the counter's %s, into a shard and makes a new table of its name: "
		                          "the counter would keep writing to the shard, and writes to its source would fail.",
		                          QualifiedName(relid), what),
		                errhint("Drop the counter with counters.drop_counter('%s'), convert the table, and declare the "
		                        "counter again; counters.distribute() distributes a counted table with its counters.",
		                        e->name)));
	}
}

} // namespace

void
OnDdlStart(EventTriggerData *trigger)
{
	Node *tree = trigger->parsetree;
	/* (a Citus worker holds shards and shells of the coordinator's tables, and no counter) */
	if (citus::OnWorker())
		return;
	/* Names resolve with the caller's search_path, as the command itself will resolve them. */
	List *leaving = NIL;
	List *joining = NIL;
	Oid parent = InvalidOid;
	if (IsA(tree, DropStmt) &&
	    (((DropStmt *)tree)->removeType == OBJECT_TABLE || ((DropStmt *)tree)->removeType == OBJECT_VIEW)) {
		/* A counter's own relations go with drop_counter(), as its columns cannot be dropped by themselves. */
		ListCell *lc;
		foreach (lc, ((DropStmt *)tree)->objects) {
			Oid relid = LookupTable(makeRangeVarFromNameList((List *)lfirst(lc)));
			if (!OidIsValid(relid))
				continue;
			GuardCounterRelation(relid, "drop");
			if (((DropStmt *)tree)->removeType == OBJECT_TABLE)
				leaving = lappend_oid(leaving, relid);
		}
	} else if (IsA(tree, DropStmt) && ((DropStmt *)tree)->removeType == OBJECT_SCHEMA) {
		ListCell *lc;
		foreach (lc, ((DropStmt *)tree)->objects) {
			Oid nsp = get_namespace_oid(strVal(lfirst(lc)), true);
			if (OidIsValid(nsp))
				leaving = list_concat(leaving, PartitionsOf(Holder::Schema, nsp));
		}
	} else if (IsA(tree, DropOwnedStmt)) {
		ListCell *lc;
		foreach (lc, ((DropOwnedStmt *)tree)->roles) {
			Oid role = get_rolespec_oid((RoleSpec *)lfirst(lc), true);
			if (OidIsValid(role))
				leaving = list_concat(leaving, PartitionsOf(Holder::Owner, role));
		}
	} else if (IsA(tree, AlterTableStmt))
		CheckAlterTable((AlterTableStmt *)tree, &leaving, &joining, &parent);
	else if (IsA(tree, RenameStmt) && ((RenameStmt *)tree)->renameType == OBJECT_TABLE) {
		Oid relid = LookupTable(((RenameStmt *)tree)->relation);
		if (OidIsValid(relid))
			RefuseConvertedAway(relid);
		if (OidIsValid(relid))
			WarnRenamed(ReadCatalog(nullptr), relid, ((RenameStmt *)tree)->newname, nullptr);
	} else if (IsA(tree, AlterObjectSchemaStmt) && ((AlterObjectSchemaStmt *)tree)->objectType == OBJECT_TABLE) {
		Oid relid = LookupTable(((AlterObjectSchemaStmt *)tree)->relation);
		if (OidIsValid(relid))
			WarnRenamed(ReadCatalog(nullptr), relid, nullptr, ((AlterObjectSchemaStmt *)tree)->newschema);
	} else if (IsA(tree, CreateStmt))
		CheckCreateTable((CreateStmt *)tree);
	leaving = TopmostPartitions(leaving);
	if (leaving == NIL && joining == NIL)
		return;

	ListCell *lc;
	foreach (lc, leaving) /* (DETACH: the owner of the partitioned table) */
		RequireAllowed(IsA(tree, AlterTableStmt) ? parent : lfirst_oid(lc), !IsA(tree, AlterTableStmt));
	foreach (lc, joining) {
		RequireAllowed(parent, false);
		RequireAllowed(lfirst_oid(lc), false);
	}
	int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT);
	/* (a partition's rows are counted away while it still has them, in before it is attached: see Membership) */
	Membership *enclosing = BeginMembership();
	PG_TRY();
	{
		foreach (lc, leaving)
			CountPartitionRows(lfirst_oid(lc), get_partition_parent(lfirst_oid(lc), false), AccessExclusiveLock,
			                   SourceOf(lfirst_oid(lc)), -1);
		foreach (lc, joining)
			CountPartitionRows(lfirst_oid(lc), parent, ShareUpdateExclusiveLock, SourceOf(parent), 1);
	}
	PG_FINALLY();
	{
		EndMembership(enclosing);
	}
	PG_END_TRY();
	UnpinSettings(level);
}

namespace {

/* The OIDs in the first column of a query of the catalogs (SPI connected), in the caller's memory. */
List *
OidsOf(MemoryContext cxt, const char *sql)
{
	/* (the latest snapshot: also counters declared after a REPEATABLE READ snapshot, and the command's changes) */
	(void)QueryLatest(sql, 0, nullptr, nullptr, nullptr, false);
	List *oids = NIL;
	MemoryContext old = MemoryContextSwitchTo(cxt);
	for (uint64 r = 0; r < SPI_processed; r++) {
		bool isnull;
		Datum d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
			oids = lappend_oid(oids, DatumGetObjectId(d));
	}
	MemoryContextSwitchTo(old);
	return oids;
}

} // namespace

namespace {

/* CREATE TABLE ... PARTITION OF, or ALTER TABLE ... ATTACH PARTITION. */
bool
AddsPartition(Node *parsetree)
{
	if (IsA(parsetree, CreateStmt))
		return ((CreateStmt *)parsetree)->partbound != nullptr;
	if (!IsA(parsetree, AlterTableStmt))
		return false;
	ListCell *lc;
	foreach (lc, ((AlterTableStmt *)parsetree)->cmds)
		if (((AlterTableCmd *)lfirst(lc))->subtype == AT_AttachPartition)
			return true;
	return false;
}

} // namespace

/*
 * After CREATE TABLE ... PARTITION OF and ATTACH PARTITION: new partitions of a counted table get the triggers. After
 * a column of an existing target was renamed: the definition's alias that named it follows. After DETACH PARTITION:
 * the table that left loses the triggers (looked for only when the command altered a counted table: any other ALTER
 * TABLE leaves triggers alone, as during a restore the triggers exist before the catalog rows are loaded).
 */
void
OnDdlEnd(EventTriggerData *trigger)
{
	if (citus::OnWorker())
		return;
	/*
	 * A trigger of counters created on a table the catalog has no counter of (nor a counter joining it): a restore
	 * creates the triggers after loading the data, and the counters its views describe are declared again now, as
	 * their views' owners could declare them, not at the first write. (Resolved with the statement's search_path.)
	 */
	if (IsA(trigger->parsetree, CreateTrigStmt)) {
		CreateTrigStmt *stmt = (CreateTrigStmt *)trigger->parsetree;
		Oid rel = RangeVarGetRelid(stmt->relation, NoLock, true);
		/*
		 * (a source's trigger on a table no counter counts, or a parent's trigger on a table no counter joins: a
		 * table may be both, e.g. the middle of a chain that another counter counts, and have one role adopted first)
		 */
		bool parent_trigger = false;
		for (int t = 0; t < PARENT_TRIGGERS; t++)
			parent_trigger |= strcmp(stmt->trigname, ParentTriggerName(t)) == 0;
		/*
		 * (without waiting for another adopter, who may need this table, locked by this statement: a parallel
		 * restore's other session adopting the level below a chain's; the next trigger, or the first write, adopts)
		 */
		bool busy;
		if (OidIsValid(rel) && TriggerFunction(rel, stmt->trigname) == CaptureFunction() &&
		    (parent_trigger ? ReadCountersOf(rel, true) == NIL : ReadCatalogOfSource(SourceOf(rel)) == NIL))
			(void)TryAdopt(rel, &busy);
		return;
	}
	/*
	 * The ALTER TABLE that changed a counted column's type is done: its counters are declared again. (The DROP
	 * statements that removed them ran, and ended, inside the same ALTER TABLE.)
	 */
	if (retyped != NIL && IsA(trigger->parsetree, AlterTableStmt)) {
		List *saved = retyped;
		retyped = NIL;
		ListCell *lc;
		foreach (lc, saved)
			DeclareSaved(((Retyped *)lfirst(lc))->saved, "for the new type of a column it reads");
	}
	MemoryContext caller = CurrentMemoryContext;
	int level = PinSettings(PIN_SEARCH_PATH);
	/* (the counters as the model reads them; the queries below ask the catalogs only which relations changed) */
	List *counters = ReadCatalog(nullptr);
	SpiConnect();
	List *changed =
	    OidsOf(caller, "SELECT d.objid FROM pg_catalog.pg_event_trigger_ddl_commands() d "
	                   " WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass");
	/* counted tables that the command changed, or one of whose partitions it changed */
	List *sources = NIL;
	List *ancestors = NIL;
	if (counters != NIL && changed != NIL)
		ancestors = OidsOf(caller, "SELECT DISTINCT a.relid FROM pg_catalog.pg_event_trigger_ddl_commands() d "
		                           "  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.objid "
		                           "   AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
		                           " CROSS JOIN LATERAL pg_catalog.pg_partition_ancestors(c.oid) a");
	bool source_changed = false;
	List *changed_sources = NIL;
	List *renames = NIL;
	ListCell *lc;
	foreach (lc, counters) {
		const Counter *e = (const Counter *)lfirst(lc);
		MemoryContext spi = MemoryContextSwitchTo(caller);
		if (list_member_oid(ancestors, e->source))
			sources = list_append_unique_oid(sources, e->source);
		if (list_member_oid(changed, e->source))
			changed_sources = list_append_unique_oid(changed_sources, e->source);
		MemoryContextSwitchTo(spi);
		source_changed = source_changed || list_member_oid(changed, e->source);
		if (e->owns_target || !list_member_oid(changed, e->target))
			continue;
		/* renamed columns of an existing target: the view's column of the old name, and the new name */
		Oid argtypes[2] = {OIDOID, OIDOID};
		Datum args[2] = {ObjectIdGetDatum(e->target), ObjectIdGetDatum(e->query)};
		(void)QueryLatest(
		    "SELECT DISTINCT va.attname::pg_catalog.text, ta.attname::pg_catalog.text "
		    "  FROM pg_catalog.pg_event_trigger_ddl_commands() d "
		    "  JOIN pg_catalog.pg_attribute ta ON ta.attrelid OPERATOR(pg_catalog.=) d.objid "
		    "   AND ta.attnum OPERATOR(pg_catalog.=) d.objsubid "
		    "  JOIN pg_catalog.pg_attribute va ON va.attrelid OPERATOR(pg_catalog.=) $2 AND va.attnum > 0 "
		    " WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objsubid > 0 "
		    "   AND d.objid OPERATOR(pg_catalog.=) $1 "
		    "   AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute x WHERE x.attrelid OPERATOR(pg_catalog.=) $1 "
		    "                      AND x.attname OPERATOR(pg_catalog.=) va.attname AND NOT x.attisdropped)",
		    2, argtypes, args, nullptr, false);
		spi = MemoryContextSwitchTo(caller);
		for (uint64 r = 0; r < SPI_processed; r++)
			renames = lappend(renames, RenameViewColumnStatement(
			                               e->query, SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1),
			                               SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2)));
		MemoryContextSwitchTo(spi);
	}
	List *leftovers = NIL;
	if (source_changed) {
		/* tables carrying capture triggers that feed no counter and are no partition, which the caller owns */
		List *carrying =
		    OidsOf(caller, "SELECT DISTINCT t.tgrelid FROM pg_catalog.pg_trigger t "
		                   "  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.tgrelid "
		                   " WHERE t.tgfoid OPERATOR(pg_catalog.=) 'counters.capture()'::pg_catalog.regprocedure "
		                   "   AND NOT c.relispartition AND pg_catalog.pg_has_role(c.relowner, 'USAGE')");
		ListCell *rc;
		foreach (rc, carrying) {
			bool feeds = false;
			foreach (lc, counters)
				feeds = feeds || ((const Counter *)lfirst(lc))->source == lfirst_oid(rc);
			MemoryContext old = MemoryContextSwitchTo(caller);
			if (!feeds)
				leftovers = lappend_oid(leftovers, lfirst_oid(rc));
			MemoryContextSwitchTo(old);
		}
	}
	/* a view created or changed: none with a check option may read a sink (the sinks, then the views) */
	List *sinks = NIL;
	List *views = OidsOf(caller, "SELECT c.oid FROM pg_catalog.pg_event_trigger_ddl_commands() d "
	                             "  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.objid "
	                             "   AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
	                             " WHERE c.relkind OPERATOR(pg_catalog.=) 'v'");
	if (views != NIL)
		sinks = OidsOf(caller, "SELECT DISTINCT t.tgrelid FROM pg_catalog.pg_trigger t "
		                       " WHERE t.tgname OPERATOR(pg_catalog.=) 'zz_counters_sink' "
		                       "   AND t.tgfoid OPERATOR(pg_catalog.=) 'counters.capture()'::pg_catalog.regprocedure");
	/* a schema renamed (ALTER SCHEMA ... RENAME): the descriptions of counters with a relation in it, below */
	List *schemas = counters != NIL ? OidsOf(caller, "SELECT d.objid FROM pg_catalog.pg_event_trigger_ddl_commands() d "
	                                                 " WHERE d.classid OPERATOR(pg_catalog.=) "
	                                                 "       'pg_catalog.pg_namespace'::pg_catalog.regclass")
	                                : NIL;
	foreach (lc, renames)
		Execute((const char *)lfirst(lc), SPI_OK_UTILITY);
	SPI_finish();
	foreach (lc, sinks)
		RefuseCheckOptionViews(lfirst_oid(lc), false);
	/*
	 * New partitions get the triggers: after CREATE TABLE ... PARTITION OF and ATTACH PARTITION only. Any other DDL on
	 * a partition leaves triggers alone: a restore creates each partition's triggers itself, one statement at a time
	 * (ALTER TABLE ... ENABLE REPLICA TRIGGER between them), and must not find the next one made already.
	 */
	if (AddsPartition(trigger->parsetree))
		foreach (lc, sources)
			Attach(lfirst_oid(lc));
	foreach (lc, changed_sources)
		KeepReplicaTriggers(lfirst_oid(lc));
	/* (a parent's too: pg_restore --disable-triggers enables every trigger of the tables it loads, parents included) */
	if (IsA(trigger->parsetree, AlterTableStmt))
		foreach (lc, changed)
			if (get_rel_relkind(lfirst_oid(lc)) == RELKIND_RELATION && ReadCountersOf(lfirst_oid(lc), true) != NIL)
				KeepParentReplicaTriggers(lfirst_oid(lc));
	/*
	 * (a table whose counter a restore has not declared again yet keeps them, for it: a view that reads it carries
	 * its description -- e.g. the table of a chain's level, counted by the level above, whose own description waits
	 * for the primary key of its parent, another restore session's)
	 */
	foreach (lc, leftovers)
		if (!citus::IsCitusRelation(lfirst_oid(lc)) && /* (Citus's shards and shells are Citus's to change) */
		    !Described(lfirst_oid(lc)))
			Detach(lfirst_oid(lc));
	/* Citus's replica and the description in the definition view name the relations: a renamed one is named anew */
	foreach (lc, counters) {
		Counter *e = (Counter *)lfirst(lc);
		if (citus::Present() && (list_member_oid(changed, e->source) || list_member_oid(changed, e->target) ||
		                         list_member_oid(changed, e->query)))
			citus::SyncReplica(e->name);
		Oid named[4] = {e->target, e->totals, e->log, e->crossings};
		bool renamed = false;
		for (int i = 0; i < 4; i++)
			renamed = renamed || (OidIsValid(named[i]) && (list_member_oid(changed, named[i]) ||
			                                               list_member_oid(schemas, get_rel_namespace(named[i]))));
		if (renamed)
			Describe(e->name);
	}
	UnpinSettings(level);
}

/*
 * When a source, counter table or definition view is dropped (DROP TABLE ... CASCADE, ALTER TABLE ... DROP COLUMN
 * ... CASCADE, DROP TABLE of the counter table), the counter goes with it: its catalog row, what remains of its view
 * and of the tables it created, and the triggers once no counter of the source is left. This runs as the role that
 * dropped: what that role may not drop stays, and is reported.
 */
void
OnSqlDrop()
{
	if (citus::OnWorker())
		return;
	MemoryContext caller = CurrentMemoryContext;
	int level = PinSettings(PIN_SEARCH_PATH);
	SpiConnect();
	List *dropped = OidsOf(caller, "SELECT d.objid FROM pg_catalog.pg_event_trigger_dropped_objects() d "
	                               " WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
	                               "   AND d.objsubid OPERATOR(pg_catalog.=) 0");
	SPI_finish();
	if (dropped == NIL) {
		UnpinSettings(level);
		return;
	}
	citus::RefuseConversion(dropped);
	List *catalog = ReadCatalog(nullptr);
	ListCell *lc;
	foreach (lc, catalog) {
		Counter *c = (Counter *)lfirst(lc);
		Oid rels[COUNTER_RELATIONS];
		int n = RequiredRelations(c, rels);
		bool hit = false;
		for (int i = 0; i < n; i++)
			hit |= list_member_oid(dropped, rels[i]);
		if (!hit)
			continue;
		(void)Forget(c->name);
		/* what is left of it, views first */
		CreatedRelation left[COUNTER_RELATIONS];
		int nleft = CreatedRelations(c, left);
		SpiConnect();
		for (int i = 0; i < nleft; i++) {
			Oid rel = left[i].rel;
			if (list_member_oid(dropped, rel) || !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(rel)))
				continue;
			if (HasOwnerPrivileges(rel))
				Execute(DropStatement(left[i].kind, rel, true), SPI_OK_UTILITY);
			else
				ereport(NOTICE, (errmsg("counter \"%s\": %s %s is left in place: it belongs to another role", c->name,
				                        strcmp(left[i].kind, "VIEW") == 0 ? "view" : "table", QualifiedName(rel))));
		}
		SPI_finish();
		if (!list_member_oid(dropped, c->source) && SearchSysCacheExists1(RELOID, ObjectIdGetDatum(c->source)) &&
		    ReadCatalogOfSource(c->source) == NIL && HasOwnerPrivileges(c->source))
			Detach(c->source);
		/* (an existing table that kept its columns: its trigger follows the counters still kept there) */
		if (!c->owns_target && !list_member_oid(dropped, c->target) &&
		    SearchSysCacheExists1(RELOID, ObjectIdGetDatum(c->target)) && HasOwnerPrivileges(c->target))
			AttachTarget(c->target);
		ereport(NOTICE, (errmsg("counter \"%s\" was dropped with the objects it depends on", c->name)));
	}
	UnpinSettings(level);
}

} // namespace counters
