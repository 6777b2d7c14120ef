/*
 * online.cpp: changing a counter that exists -- its mode (alter_counter, a mode switch folds or creates the log or
 * slots), its definition (declared again with its options, grants and window state), its name -- in one transaction
 * or, concurrently, in steps that let writers go on.
 */
#include "control/control.hpp"
#include "citus/citus.hpp"
#include "compat.hpp"

extern "C" {
#include "commands/comment.h"
#include "access/genam.h"
#include "access/reloptions.h"
#include "pgstat.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/jsonb.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/varlena.h"
}

namespace counters {

namespace {

/* A sharded counter's slots per key (-1: not set, the default), written from the typed options. */
void
SetMaxSlots(const char *name, int max_slots)
{
	CounterOptions o = LockOptions(name);
	o.max_slots_set = max_slots != -1;
	o.max_slots = max_slots != -1 ? max_slots : MAX_SLOTS_DEFAULT;
	WriteOption(name, &o, "max_slots");
}

/* "building": a concurrent declaration or rebuild under way, ending in `mode` (max_slots <= 0: not named), or not. */
void
SetBuilding(const char *name, bool building, Mode mode, int max_slots)
{
	CounterOptions o = LockOptions(name);
	o.building = building;
	o.building_has_mode = true;
	o.building_mode = mode;
	o.building_max_slots = max_slots;
	WriteOption(name, &o, "building");
}

} // namespace

void
AlterCounter(const char *name, const char *mode_text, int max_slots)
{
	(void)ApplyDeferred(); /* (held deltas are applied in the mode they were counted for) */
	Counter *c = LookupCounter(name);
	RequireMaintainer(c);
	Mode mode = mode_text != nullptr ? ParseMode(name, mode_text) : c->mode; /* (NULL: max_slots alone) */
	if (max_slots != -1 && (mode != Mode::Sharded || max_slots < MAX_SLOTS_MIN || max_slots > MAX_SLOTS_MAX))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": max_slots applies to sharded mode, from %d to %d", name, MAX_SLOTS_MIN,
		                       MAX_SLOTS_MAX)));
	if (c->mode == mode) {
		if (max_slots != -1)
			SetMaxSlots(name, max_slots);
		return;
	}
	RequireFeature(c, Feature::LogShardedMode);
	/* (a standby's counters, or a subscriber's that follow their publisher, are written there only) */
	(void)MayWriteHere(c, true, "switch the mode of");
	/* (folding the log or slots after locking writers out must see every delta committed before the lock) */
	RequireReadCommitted("counters.alter_counter()");
	if (HasPending(c->mode) && HasPending(mode))
		AlterCounter(name, "exact", -1);
	/*
	 * Writers wait; the relations of the new mode are created by the counter's owner, whoever switches it: a counter's
	 * code runs as the owner of its tables, and a superuser's switch must not make the superuser that owner.
	 */
	Change change;
	c = BeginChange(&change, name, ShareRowExclusiveLock, AccessExclusiveLock);
	if (c->mode == mode || (HasPending(c->mode) && HasPending(mode))) {
		/* (another transaction switched it while this one waited: from there, or already done) */
		EndChange(&change);
		AlterCounter(name, mode_text, max_slots);
		return;
	}
	/*
	 * Checked on the counter as locked: a switch that committed while this one waited renamed its relations (a row
	 * read before the locks may be older than the relations the checks look at).
	 */
	RequireModeAllowed(c, mode, ValuesTable(c), c->target);
	/* (read under the change's locks too: a switch that committed meanwhile dropped the relations it would read) */
	if (HasPending(c->mode) && LayoutOf(c)->anchored)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\" keeps per-shard partial rows: it stays in log mode", name),
		                errdetail("Its key does not hold the distribution column of %s: each shard counts its own rows "
		                          "under its own anchor, summed on read.",
		                          QualifiedName(c->source)),
		                errhint("For exact or sharded mode, declare it again with the distribution column in its key; "
		                        "see docs/citus.md.")));
	/* (in this context: SPI's goes away with SPI_finish) */
	char *nsp = get_namespace_name(get_rel_namespace(c->target));
	char *rel = get_rel_name(c->target);
	bool distributed = citus::KindOfTable(ValuesTable(c)) == citus::Kind::Distributed;
	if (distributed)
		citus::BeginDistributedChange();
	SpiConnect();
	if (HasPending(mode)) {
		char *totals_name = DerivedName(rel, "_totals");
		char *log_name = DerivedName(rel, mode == Mode::Log ? "_log" : "_slots");
		Oid totals = c->target;
		Execute(RenameStatement(totals, totals_name), SPI_OK_UTILITY);
		Execute(CreateLikeStatement(nsp, log_name, totals), SPI_OK_UTILITY);
		Oid log = RelationIn(nsp, log_name);
		/* (published for logical replication, compaction's deletes need a replica identity) */
		Execute(ReplicaIdentityFullStatement(log), SPI_OK_UTILITY);
		Execute(SetStorageStatement(log, StorageParameters(mode == Mode::Log ? Storage::Log : Storage::Slots)),
		        SPI_OK_UTILITY);
		if (mode == Mode::Log)
			Execute(LogIndexStatement(c, log), SPI_OK_UTILITY);
		else {
			/* the slot number: the column after the definition's (the trigger finds it by position) */
			Execute(AddSlotColumnStatement(log), SPI_OK_UTILITY);
			Execute(SlotKeyStatement(c, log), SPI_OK_UTILITY);
			SetMaxSlots(name, max_slots == -1 ? MAX_SLOTS_DEFAULT : max_slots);
		}
		/* Citus: the log or slots distributed as the totals are, co-located (a key's rows on one node) */
		if (distributed)
			citus::DistributeAlike(log, totals);
		/* Readers see totals plus pending deltas as of their snapshot: exact and transactional, never a cache. */
		Execute(PendingViewStatement(c, nsp, rel, totals, log), SPI_OK_UTILITY);
		Oid view = RelationIn(nsp, rel);
		CopySelectGrants(totals, view);
		SPI_finish();
		SetMode(name, view, mode, totals, log);
		GuardOwnTables(LookupCounter(name));
	} else {
		SPI_finish();
		if (distributed)
			FoldPending(c);
		else
			(void)Compact(name);
		SetMode(name, c->totals, Mode::Exact, InvalidOid, InvalidOid);
		SetMaxSlots(name, -1);
		SpiConnect();
		/* SELECT grants on the view go back to the table that takes its name. */
		CopySelectGrants(c->target, c->totals);
		Execute(DropStatement("VIEW", c->target), SPI_OK_UTILITY);
		Execute(DropStatement("TABLE", c->log), SPI_OK_UTILITY);
		Execute(RenameStatement(c->totals, rel), SPI_OK_UTILITY);
		SPI_finish();
	}
	EndChange(&change);
}

namespace {

List *
RelationIndexes(Oid rel)
{
	Relation r = table_open(rel, AccessShareLock);
	List *indexes = RelationGetIndexList(r);
	table_close(r, AccessShareLock);
	return indexes;
}

/*
 * Rename `rel` to `name` (SPI connected), and its indexes named after it ("<old>_..." becomes "<name>_...") or after
 * the counter ("<from>_..." becomes "<to>_...": the totals of a switched counter keep its table's index names).
 */
void
RenameWithIndexes(Oid rel, const char *name, const char *from, const char *to)
{
	const char *old = get_rel_name(rel);
	List *indexes = get_rel_relkind(rel) == RELKIND_RELATION ? RelationIndexes(rel) : NIL;
	Execute(RenameStatement(rel, name), SPI_OK_UTILITY);
	size_t len = strlen(old);
	ListCell *lc;
	foreach (lc, indexes) {
		const char *index = get_rel_name(lfirst_oid(lc));
		if (strncmp(index, old, len) == 0 && index[len] == '_')
			Execute(RenameStatement(lfirst_oid(lc), DerivedName(name, index + len)), SPI_OK_UTILITY);
		else if (strncmp(index, from, strlen(from)) == 0 && index[strlen(from)] == '_')
			Execute(RenameStatement(lfirst_oid(lc), DerivedName(to, index + strlen(from))), SPI_OK_UTILITY);
	}
}

/*
 * Counter `from` takes the name `to` (free): its catalog row and the relations named after it, the relation users
 * read named `table` (and those derived from it after it).
 */
void
RenameCounter(const char *from, const char *to, const char *table)
{
	Counter *e = LookupCounter(from);
	RequireMaintainer(e);
	OwnerScope as;
	EnterOwner(&as, AuthorizeMaintainer(e), PIN_SEARCH_PATH);
	SpiConnect();
	RenameWithIndexes(e->query, DefinitionViewName(to), from, to);
	RenameWithIndexes(e->target, table, from, to);
	if (HasPending(e->mode)) {
		RenameWithIndexes(e->totals, DerivedName(table, "_totals"), from, to);
		RenameWithIndexes(e->log, DerivedName(table, e->mode == Mode::Log ? "_log" : "_slots"), from, to);
	}
	if (OidIsValid(e->crossings))
		RenameWithIndexes(e->crossings, DerivedName(table, "_crossings"), from, to);
	SPI_finish();
	LeaveOwner(&as);
	Oid argtypes[2] = {TEXTOID, TEXTOID};
	Datum args[2] = {CStringGetTextDatum(from), CStringGetTextDatum(to)};
	ExecuteAsCatalogOwner("UPDATE counters.counter SET name = $2 WHERE name OPERATOR(pg_catalog.=) $1", 2, argtypes,
	                      args, nullptr, SPI_OK_UPDATE, true);
	CounterChanged(from, InvalidOid);
	CounterChanged(to, e->source);
}

/*
 * What a counter keeps across a new definition: its options, the SELECT grants of its table, and the table of its
 * window thresholds' state (set aside: the drop leaves it).
 */
struct Kept {
	const CounterOptions *options;
	List *grantees;
	Oid crossings;
	List *counts_storage; /* storage parameters of the table of counts (DefElems; NIL: none, or not its own) */
	List *log_storage;    /* and of the log or slots */
};

/* rel's storage parameters made `options` (rel invalid: nothing) */
void
RestoreStorage(Oid rel, List *options)
{
	if (!OidIsValid(rel))
		return;
	List *statements = StorageStatements(rel, options);
	if (statements == NIL)
		return;
	SpiConnect();
	ListCell *lc;
	foreach (lc, statements)
		Execute((const char *)lfirst(lc), SPI_OK_UTILITY);
	SPI_finish();
}

/*
 * What counter `c` keeps, as BeginChange read it under the change's locks: its options as they are then
 * (AlterDefinition and SaveAndDrop keep those read before going through exact mode instead).
 */
void
Keep(const Counter *c, Kept *k)
{
	k->options = c->options;
	k->counts_storage = StorageOf(c->owns_target ? ValuesTable(c) : InvalidOid);
	k->log_storage = StorageOf(HasPending(c->mode) ? c->log : InvalidOid);
	k->grantees = c->owns_target ? SelectGrantees(c->target) : NIL;
	k->crossings = c->crossings;
	if (OidIsValid(c->crossings))
		SetCrossings(c->name, InvalidOid);
}

void
GiveBack(const char *name, const Kept *k)
{
	Counter *e = LookupCounter(name);
	CounterDef *def = DefinitionOf(e);
	RestoreOptions(name, k->options, def);
	/* (a DBA's fillfactor or autovacuum settings stay; the counter is declared again in the same mode) */
	RestoreStorage(e->owns_target ? ValuesTable(e) : InvalidOid, k->counts_storage);
	if (HasPending(e->mode))
		RestoreStorage(e->log, k->log_storage);
	if (OidIsValid(k->crossings))
		KeepCrossings(e, k->crossings, def);
	if (k->grantees == NIL)
		return;
	SpiConnect();
	ListCell *lc;
	foreach (lc, k->grantees)
		Execute(GrantSelectStatement(e->target, lfirst_oid(lc)), SPI_OK_UTILITY);
	SPI_finish();
}

} // namespace

namespace {

/* Whether a counter declared again keeps its table (redefine.cpp): one of its own, not a Citus table's. */
bool
KeepsTable(const Counter *c)
{
	return c->owns_target && !citus::IsCitusRelation(c->source);
}

/*
 * A counter about to be declared again into the table it keeps: in exact mode first (a log or sharded counter folds
 * its pending rows into its totals, which take the table's name back), so that its table is the one it writes.
 */
Counter *
ToExact(const Counter *c)
{
	if (HasPending(c->mode))
		AlterCounter(c->name, "exact", -1);
	return LookupCounter(c->name);
}

} // namespace

void
AlterDefinition(const char *name, const char *definition, const char *mode)
{
	RequireReadCommitted("counters.alter_counter()");
	(void)ApplyDeferred(); /* (held deltas are of the old definition's keys) */
	if (definition == nullptr)
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("counter \"%s\": the definition is null", name)));
	Counter *c = LookupCounter(name);
	RequireMaintainer(c);
	RequireWhole(c, "redefined");
	Mode final_mode = mode != nullptr ? ParseMode(name, mode) : c->mode;
	/* (what going through exact mode forgets: max_slots, the log's or slots' storage settings) */
	const CounterOptions *options = c->options;
	List *log_storage = HasPending(c->mode) ? StorageOf(c->log) : NIL;
	if (KeepsTable(c) && !IsSink(c->source))
		c = ToExact(c);
	/* (writers wait until the transaction ends: the counter is dropped and declared again in it) */
	Change change;
	c = BeginChange(&change, name, ShareRowExclusiveLock, AccessExclusiveLock);
	RequireFeature(c, Feature::Redefine);
	(void)MayWriteHere(c, true, "redefine");
	Kept kept;
	Keep(c, &kept);
	kept.options = options;
	if (log_storage != NIL)
		kept.log_storage = log_storage;
	KeptTable *table = KeepsTable(c) ? KeepTable(c) : nullptr;
	/* (the owner stays: the new definition's code runs as the counter's owner, not as whoever changes it) */
	Oid owner = CounterOwner(c);
	/* (the new definition is parsed with the caller's search_path, resolved as the caller: out of the scope again) */
	Oid source = c->source;
	Oid parent = DefinitionOf(c)->parent;
	EndChange(&change);
	/*
	 * The triggers stay while the counter is declared again (dropping them would lock the source ACCESS EXCLUSIVE,
	 * and readers out); they leave a table the new definition no longer reads. So does its table, reshaped.
	 */
	DropCounter(name, true, table != nullptr);
	DeclareCounter(name, definition, c->owns_target ? nullptr : QualifiedName(c->target), ModeName(final_mode), owner,
	               Names::Caller, table);
	GiveBack(name, &kept);
	/* (a level of a chain it counted through went with its old definition, and its table too) */
	if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(source)) && ReadCatalogOfSource(source) == NIL)
		Detach(source);
	if (OidIsValid(parent) && SearchSysCacheExists1(RELOID, ObjectIdGetDatum(parent)) && !JoinsParent(parent))
		SetParentTriggers(parent, false);
}

/* A counter dropped to be declared again (RetypeCounter): what declaring it again takes. */
struct Saved {
	char *name;
	char *definition; /* deparsed with search_path pinned */
	char *target;     /* NULL: a table of its own */
	const char *mode;
	Oid owner;
	Kept kept;
	KeptTable *table; /* the table it keeps (NULL: a new one) */
};

void *
SaveAndDrop(const Counter *e)
{
	RequireMaintainer(e);
	const char *mode = ModeName(e->mode);
	/* (read now, into this memory context, which lives until the counter is declared again: `e` is the caller's) */
	const CounterOptions *options = CurrentOptions(e->name);
	List *log_storage = HasPending(e->mode) ? StorageOf(e->log) : NIL;
	if (KeepsTable(e) && !IsSink(e->source))
		e = ToExact(e);
	Saved *s = (Saved *)palloc0(sizeof(Saved));
	s->name = pstrdup(e->name);
	s->target = e->owns_target ? nullptr : pstrdup(QualifiedName(e->target));
	s->mode = mode;
	s->owner = CounterOwner(e);
	Keep(e, &s->kept);
	s->kept.options = options;
	if (log_storage != NIL)
		s->kept.log_storage = log_storage;
	s->table = KeepsTable(e) && !IsSink(e->source) ? KeepTable(e) : nullptr;
	/* (with search_path pinned: every name the definition uses comes out qualified) */
	int level = PinSettings(PIN_SEARCH_PATH);
	MemoryContext caller = CurrentMemoryContext;
	SpiConnect();
	Oid argtypes[1] = {OIDOID};
	Datum args[1] = {ObjectIdGetDatum(e->query)};
	if (SPI_execute_with_args("SELECT pg_catalog.pg_get_viewdef($1, true)", 1, argtypes, args, nullptr, true, 1) !=
	        SPI_OK_SELECT ||
	    SPI_processed != 1)
		elog(ERROR, "counters: reading the definition of counter \"%s\" failed", e->name);
	s->definition = MemoryContextStrdup(caller, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	SPI_finish();
	/* (a counter through a chain: declared again from its whole definition, its levels with it) */
	if (options->chain != nullptr)
		s->definition = MemoryContextStrdup(caller, options->chain);
	UnpinSettings(level);
	DropCounter(e->name, false, s->table != nullptr);
	return s;
}

const char *
SavedName(const void *saved)
{
	return ((const Saved *)saved)->name;
}

namespace {

void
RedeclareContext(void *arg)
{
	errcontext("declaring counter \"%s\" again for the new type of a column it reads", (const char *)arg);
}

} // namespace

void
DeclareSaved(void *saved, const char *why)
{
	Saved *s = (Saved *)saved;
	ErrorContextCallback context;
	context.callback = RedeclareContext;
	context.arg = (void *)s->name;
	context.previous = error_context_stack;
	error_context_stack = &context;
	/* (as its owner, whoever retyped the column; the text re-read with the search_path it was deparsed with) */
	DeclareCounter(s->name, s->definition, s->target, s->mode, s->owner, Names::Pinned, s->table);
	error_context_stack = context.previous;
	GiveBack(s->name, &s->kept);
	ereport(NOTICE, (errmsg("counter \"%s\" was declared again %s, and recounted", s->name, why)));
}

/*
 * CALL counters.alter_counter_concurrently(name, definition): the new definition is declared concurrently under a
 * temporary name (create_counter_concurrently's three steps, in the counter's mode), then, writers waiting for this
 * last step only, the counter is dropped and the new one takes its name, options and grants.
 */
void
AlterCounterConcurrently(const char *name, const char *definition)
{
	RequireReadCommitted("counters.alter_counter_concurrently()");
	Counter *c = LookupCounter(name);
	RequireMaintainer(c);
	RequireWhole(c, "redefined");
	RequireFeature(c, Feature::RedefineConcurrently);
	/* (its levels would be declared under the temporary name, which the counter alone takes back at the end) */
	if (c->options->chain != nullptr || (definition != nullptr && JoinsThreeTables(name, definition)))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": a counter through a chain of parent rows cannot be redefined "
		                       "concurrently",
		                       name),
		                errhint("Use counters.alter_counter('%s', definition => ...), or drop it and declare it again "
		                        "with counters.create_counter_concurrently().",
		                        name)));
	(void)MayWriteHere(c, true, "redefine");
	/*
	 * The new definition is counted into new tables, which take the counter's names at the end: what the user made
	 * of the old ones (but their name, comment, storage settings and SELECT grants, which are carried) would be lost.
	 */
	char *made = UserMadeProperties(c);
	if (made != nullptr)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\" cannot be redefined concurrently: its table %s has %s", name,
		                       QualifiedName(c->target), made),
		                errdetail("A concurrent redefinition counts into new tables, which would not have them."),
		                errhint("Use counters.alter_counter('%s', definition => ...), which keeps the table as it is "
		                        "(writers wait while it runs); or drop them, and create them again after.",
		                        name)));
	/* (the name's first bytes: the temporary name is a counter name too, at most COUNTER_NAME_MAX_BYTES) */
	const char *prefix = "counters_redefining_";
	char *tmp = psprintf("%s%.*s", prefix,
	                     pg_mbcliplen(name, (int)strlen(name), COUNTER_NAME_MAX_BYTES - (int)strlen(prefix)), name);
	if (CounterExists(tmp))
		ereport(ERROR,
		        (errcode(ERRCODE_DUPLICATE_OBJECT),
		         errmsg("counter \"%s\": counter \"%s\", the name a redefinition is declared under, exists", name, tmp),
		         errdetail("An earlier alter_counter_concurrently() of \"%s\" stopped and left it, unless it is a "
		                   "counter of its own.",
		                   name),
		         errhint("Drop it with counters.drop_counter('%s') if it was left behind, then try again.", tmp)));
	const char *mode = ModeName(c->mode);
	CounterConcurrently(tmp, definition, mode, CounterOwner(c));
	CommitStep();
	ConcurrentStep(name, "4: replacing the counter with the new definition (writers wait)");
	Change change;
	c = BeginChange(&change, name, ShareRowExclusiveLock, AccessExclusiveLock);
	Kept kept;
	Keep(c, &kept);
	/* (the relation users read keeps its name, which may be the counter's or one its owner gave it; and its comment) */
	char *table = pstrdup(get_rel_name(c->target));
	char *comment = GetComment(c->target, RelationRelationId, 0);
	EndChange(&change);
	DropCounter(name);
	RenameCounter(tmp, name, table);
	GiveBack(name, &kept);
	if (comment != nullptr) {
		Counter *e = LookupCounter(name);
		SpiConnect();
		Execute(psprintf("COMMENT ON TABLE %s IS %s", QualifiedName(ValuesTable(e)), quote_literal_cstr(comment)),
		        SPI_OK_UTILITY);
		SPI_finish();
	}
	ConcurrentStep(name, nullptr);
}

void
ConcurrentStep(const char *name, const char *step)
{
	if (step == nullptr) {
		pgstat_report_activity(STATE_RUNNING, "counters: finishing");
		return;
	}
	/* (pg_stat_activity.query shows the step while it runs) */
	pgstat_report_activity(STATE_RUNNING, psprintf("counters: counter \"%s\": step %s", name, step));
	ereport(NOTICE, (errmsg("counter \"%s\": step %s", name, step)));
}

void
CommitStep()
{
	SPI_commit();
	SPI_start_transaction();
}

/*
 * A log-mode counter made equal to its definition without blocking writers: as of one snapshot S, the totals become
 * the definition's rows and the logged deltas S sees are deleted (they are in those rows); deltas logged by
 * transactions S does not see stay pending. Compaction waits meanwhile; writers only append to the log.
 */
void
RefreshConcurrently(const char *name, const char *step)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	if (e->mode != Mode::Log)
		elog(ERROR, "counters: counter \"%s\" is not in log mode", name);
	ConcurrentStep(name,
	               psprintf("%s: counting the source as of one snapshot; writers log their deltas meanwhile", step));
	/*
	 * Compaction waits (it takes the log in this mode). No lock on the totals: writers preparing the counter's
	 * statements lock them in ROW EXCLUSIVE mode. A retention running meanwhile may leave expired buckets in the
	 * totals, for its next round.
	 */
	LockRelationOid(e->log, ShareUpdateExclusiveLock);
	const CounterDef *def = DefinitionOf(e);
	/* (the log's rows go with this snapshot's fill, as a compaction folds them: counters.stats.oldest_pending) */
	NoteCompactionStart(e->query);
	Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
	const char *statements[3] = {DeleteAllStatement(e->totals), FillStatement(def, e->totals, e->query),
	                             DeleteAllStatement(e->log)};
	uint64 processed[3];
	SpiConnect();
	OwnerScope owner;
	EnterOwner(&owner, AuthorizeMaintainer(e), PIN_SEARCH_PATH | PIN_OUTPUT | PIN_ROW_SECURITY);
	for (int i = 0; i < 3; i++) {
		SPIPlanPtr plan = SPI_prepare(statements[i], 0, nullptr);
		if (plan == nullptr)
			elog(ERROR, "counters: preparing \"%s\" failed: %s", statements[i], SPI_result_code_string(SPI_result));
		/*
		 * (AFTER triggers the owner put on its tables fire at the end of each statement, in this scope: a procedure's
		 * step runs in a transaction of its own, with no outer query to queue them for)
		 */
		int ret = SPI_execute_snapshot(plan, nullptr, nullptr, snapshot, InvalidSnapshot, false, true, 0);
		if (ret != (i == 1 ? SPI_OK_INSERT : SPI_OK_DELETE))
			elog(ERROR, "counters: refreshing counter \"%s\" failed: %s", name, SPI_result_code_string(ret));
		processed[i] = SPI_processed;
	}
	LeaveOwner(&owner);
	SPI_finish();
	UnregisterSnapshot(snapshot);
	SetBuilding(name, false, Mode::Exact, -1);
	ereport(NOTICE, (errmsg("counter \"%s\": %llu keys counted; %llu logged deltas were already in them, the others "
	                        "stay pending",
	                        name, (unsigned long long)processed[1], (unsigned long long)processed[2])));
	const char *columns[1] = {"rebuilt_at"};
	Oid types[1] = {TIMESTAMPTZOID};
	Datum values[1] = {TimestampTzGetDatum(GetCurrentTimestamp())};
	NoteMaintenance(e->name, 1, columns, types, values, nullptr);
}

namespace {

/*
 * Where a concurrent declaration or rebuild is going (its "building" option, which step 1 sets and step 2 removes):
 * the mode it ends in and, sharded, its max_slots; or, when none is under way, the counter's own. As `e` was just
 * read (LookupCounter: with the latest snapshot).
 */
void
ReadDestination(const Counter *e, Mode *mode, int *max_slots)
{
	const CounterOptions *options = e->options;
	*mode = options->building && options->building_has_mode ? options->building_mode : e->mode;
	*max_slots = -1;
	if (*mode == Mode::Sharded)
		*max_slots = options->building && options->building_max_slots > 0 ? options->building_max_slots
		             : options->max_slots_set                             ? options->max_slots
		                                                                  : -1;
}

} // namespace

void
MarkBuilding(const char *name, Mode mode, int max_slots)
{
	SetBuilding(name, true, mode, max_slots);
}

void
RebuildConcurrently(const char *name)
{
	Counter *e = LookupCounter(name);
	RequireMaintainer(e);
	RequireReadCommitted("counters.rebuild_concurrently()");
	RequireFeature(e, Feature::RebuildConcurrently);
	(void)MayWriteHere(e, true, "rebuild");
	/* (a rebuild or declaration that stopped after step 1 left the counter in log mode: it is completed to its mode) */
	Mode mode;
	int max_slots;
	ReadDestination(e, &mode, &max_slots);
	if (e->mode != Mode::Log) {
		/* (refused before the first step, naming this procedure's way through log mode) */
		RequireModeAllowed(e, Mode::Log, ValuesTable(e), e->target,
		                   "counters.rebuild_concurrently() passes through log mode: drop the views first, or use "
		                   "counters.rebuild(), which recounts the counter in its own mode.");
		ConcurrentStep(name, "1 of 3: switching to log mode (writers wait for the switch)");
		AlterCounter(name, "log", -1);
	}
	MarkBuilding(name, mode, max_slots);
	CommitStep();
	RefreshConcurrently(name, "2 of 3");
	CommitStep();
	if (mode != Mode::Log) {
		ConcurrentStep(name, psprintf("3 of 3: switching back to %s mode", ModeName(mode)));
		AlterCounter(name, ModeName(mode), mode == Mode::Sharded ? max_slots : -1);
	}
	ConcurrentStep(name, nullptr);
}

Oid
WindowCrossings(const Counter *e, bool window)
{
	if (window == OidIsValid(e->crossings))
		return e->crossings;
	/* (dropping: out of the catalog first, since a counter's own table is guarded against DROP) */
	if (!window)
		SetCrossings(e->name, InvalidOid);
	Oid nsp = get_rel_namespace(e->target);
	char *schema = get_namespace_name(nsp);
	char *table = DerivedName(get_rel_name(e->target), "_crossings");
	Oid rel = InvalidOid;
	OwnerScope as;
	EnterOwner(&as, AuthorizeMaintainer(e), PIN_SEARCH_PATH);
	SpiConnect();
	if (window) {
		if (OidIsValid(get_relname_relid(table, nsp)))
			ereport(ERROR,
			        (errcode(ERRCODE_DUPLICATE_TABLE),
			         errmsg("counter \"%s\": relation \"%s.%s\" already exists", e->name, schema, table),
			         errdetail("A counter with window thresholds keeps which of them each prefix is at or above in "
			                   "a table of that name, beside its own."),
			         errhint("Rename or drop that relation, then set the window thresholds again.")));
		Execute(CreateCrossingsStatement(schema, table), SPI_OK_UTILITY);
		rel = RelationIn(schema, table);
		Execute(CreateGuardTriggerStatement(rel), SPI_OK_UTILITY);
	} else
		Execute(DropStatement("TABLE", e->crossings), SPI_OK_UTILITY);
	SPI_finish();
	LeaveOwner(&as);
	if (window)
		SetCrossings(e->name, rel);
	return rel;
}

void
KeepCrossings(const Counter *e, Oid crossings, const CounterDef *def)
{
	const WindowOptions *w = LookupCounter(e->name)->options->window;
	if (w != nullptr && w->ncolumns == 0)
		w = nullptr;
	OwnerScope as;
	EnterOwner(&as, AuthorizeMaintainer(e), PIN_SEARCH_PATH);
	SpiConnect();
	if (w == nullptr)
		Execute(DropStatement("TABLE", crossings), SPI_OK_UTILITY);
	else {
		/* the prefixes: the key columns but the bucket, in byte order (as the statement sorts a prefix's keys) */
		Datum *names = (Datum *)palloc(sizeof(Datum) * Max(def->nkeys, 1));
		int n = 0;
		for (int k = 0; k < def->nkeys; k++)
			if (w->bucket == nullptr || strcmp(def->keys[k].column_name, w->bucket) != 0) {
				int at = n++;
				while (at > 0 && strcmp(TextDatumGetCString(names[at - 1]), def->keys[k].column_name) > 0) {
					names[at] = names[at - 1];
					at--;
				}
				names[at] = CStringGetTextDatum(def->keys[k].column_name);
			}
		Oid argtypes[1] = {TEXTARRAYOID};
		Datum args[1] = {n > 0 ? PointerGetDatum(construct_array(names, n, TEXTOID, -1, false, TYPALIGN_INT))
		                       : (Datum)0};
		char nulls[1] = {n > 0 ? ' ' : 'n'};
		if (SPI_execute_with_args(StalePrefixesStatement(crossings), 1, argtypes, args, nulls, false, 0) !=
		    SPI_OK_DELETE)
			elog(ERROR, "counters: keeping the window state of counter \"%s\" failed", e->name);
	}
	SPI_finish();
	LeaveOwner(&as);
	if (w != nullptr)
		SetCrossings(e->name, crossings);
}

} // namespace counters
