/*
 * declare.cpp: declaring, switching and dropping counters, and attaching their triggers.
 *
 * Each function orchestrates: lock, check, execute the statements declare_statements.cpp generates, record in the
 * catalog (catalog.cpp checks the caller's rights on every relation it records). Names in a definition and a target
 * resolve with the caller's search_path, like any SQL they type; everything else runs with search_path pinned.
 */
#include "control/control.hpp"
#include "citus/citus.hpp"
#include "compat.hpp"

extern "C" {
#include "access/genam.h"
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

/* The locks of a change (BeginChange), and the counter as it is once they are held. */
struct ChangeLocks {
	const char *name;
	LOCKMODE mode;
	LOCKMODE own;
	Counter *e;
};

static void
LockChange(void *arg)
{
	ChangeLocks *l = (ChangeLocks *)arg;
	Counter *e = l->e;
	for (Counter *locked = nullptr; l->mode != NoLock && (locked == nullptr || !SameCounter(locked, e));) {
		/* (taken again if the counter changed while this waited: its source or parent may be others now) */
		LockCounterSources(e, l->mode);
		locked = e;
		e = LookupCounter(l->name);
		RequireMaintainer(e);
	}
	/*
	 * Then its own relations, in the one order (an existing table that keeps counter-cache columns is the user's: no
	 * more than its trigger's change needs).
	 */
	Oid rels[5];
	int n = l->own != NoLock ? CounterRelations(e, rels) : 0;
	for (int i = 0; i < n; i++)
		LockRelationOid(rels[i], rels[i] == e->target && !e->owns_target ? Min(l->own, ShareRowExclusiveLock) : l->own);
	l->e = e;
}

Counter *
BeginChange(Change *change, const char *name, LOCKMODE mode, LOCKMODE own)
{
	ChangeLocks locks = {name, mode, own, LookupCounter(name)};
	RequireMaintainer(locks.e);
	/* (all of them in one attempt: none is held while another is waited for, so writers never queue behind it) */
	if (citus::IsCitusRelation(locks.e->source))
		LockChange(&locks);
	else
		LockPolitely(name, locks.e->source, LockChange, &locks);
	Counter *e = locks.e;
	change->e = e;
	/* (no setting pinned here: each statement pins its own, and a definition the caller typed resolves as theirs) */
	EnterOwner(&change->scope, AuthorizeMaintainer(e), 0);
	return e;
}

void
EndChange(Change *change)
{
	LeaveOwner(&change->scope);
}

Mode
ParseMode(const char *name, const char *mode)
{
	Mode parsed;
	if (LookupModeName(mode, &parsed))
		return parsed;
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
	                errmsg("counter \"%s\": unknown mode %s", name, mode ? quote_literal_cstr(mode) : "<NULL>"),
	                errhint("The modes are 'exact', 'sharded' and 'log'.")));
	pg_unreachable();
}

bool
CounterExists(const char *name)
{
	return ReadCatalog(name) != NIL;
}

/* The relation a target name denotes (InvalidOid if none) and, for one to create, its schema and name. */
static Oid
ResolveTarget(const char *counter, const char *target, char **schema, char **table)
{
	List *names = compat::QualifiedNameList(target);
	if (list_length(names) > 2)
		ereport(ERROR, (errcode(ERRCODE_INVALID_NAME),
		                errmsg("counter \"%s\": invalid target name %s", counter, quote_literal_cstr(target))));
	RangeVar *rv = makeRangeVarFromNameList(names);
	Oid relid = RangeVarGetRelid(rv, NoLock, true);
	if (OidIsValid(relid))
		return relid;
	if (rv->schemaname != nullptr)
		*schema = rv->schemaname;
	else {
		List *path = fetch_search_path(false);
		Oid nsp = path != NIL ? linitial_oid(path) : InvalidOid;
		if (!OidIsValid(nsp))
			ereport(ERROR,
			        (errcode(ERRCODE_INVALID_SCHEMA_NAME),
			         errmsg("counter \"%s\": no schema has been selected to create target %s", counter, target)));
		*schema = get_namespace_name(nsp);
	}
	*table = rv->relname;
	return InvalidOid;
}

/* An index whose first column is the column `arg` (an AttrNumber) points at. */
static bool
LeadsWithColumn(HeapTuple tup, const void *arg)
{
	return ((Form_pg_index)GETSTRUCT(tup))->indkey.values[0] == *(const AttrNumber *)arg;
}

/* The relation a counter's name refers to in its schema, once created. */
Oid
RelationIn(const char *schema, const char *name)
{
	/* (as a statement names it: "pg_temp" stands for the session's temporary schema) */
	return RangeVarGetRelid(makeRangeVar(pstrdup(schema), pstrdup(name), -1), NoLock, false);
}

/*
 * A counter through a parent row: its owner owns the parent too; the source's key column has an index (a parent's
 * change reads its children by it); neither table is a sink or Citus's.
 */
static void
RequireParentShape(const char *name, const CounterDef *def, Oid caller)
{
	RequireOwnerPrivileges(name, def->parent, caller);
	RequireOwnerRights(name, def->parent, GetUserId());
	if (citus::IsCitusRelation(def->parent))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": counters through a parent row do not count Citus tables", name),
		                errdetail("Parent table %s is a Citus table.", QualifiedName(def->parent))));
	if (IsSink(def->source) || IsSink(def->parent))
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("counter \"%s\": a sink cannot be joined", name)));
	bool indexed = AnyIndexOf(def->source, LeadsWithColumn, &def->child_key);
	if (!indexed)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": column \"%s\" of %s needs an index", name,
		                       get_attname(def->source, def->child_key, false), QualifiedName(def->source)),
		                errdetail("A change of a parent row reads its rows by that column."),
		                errhint("CREATE INDEX ON %s (%s);", QualifiedName(def->source),
		                        quote_identifier(get_attname(def->source, def->child_key, false)))));
}

/* The sources of a definition being declared, locked against writers until commit. */
static void
LockDeclared(void *arg)
{
	const CounterDef *def = (const CounterDef *)arg;
	LockSource(def->source, ShareRowExclusiveLock);
	if (OidIsValid(def->parent))
		LockSource(def->parent, ShareRowExclusiveLock);
}

/* A target in pg_temp (named so, or the caller's temporary table) would vanish with the session. */
static void
RefuseTemporaryTarget(const char *name, Oid target, const char *schema, const char *table)
{
	bool temp = OidIsValid(target) ? get_rel_persistence(target) == RELPERSISTENCE_TEMP
	                               : schema != nullptr && strcmp(schema, "pg_temp") == 0;
	if (temp)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": target \"%s\" is a temporary table", name,
		                       OidIsValid(target) ? get_rel_name(target) : table),
		                errdetail("A counter is declared for every session; a temporary table belongs to one.")));
	if (OidIsValid(target) && get_rel_persistence(target) == RELPERSISTENCE_UNLOGGED)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": target \"%s\" is an unlogged table", name, get_rel_name(target)),
		                errdetail("After a crash PostgreSQL empties an unlogged table, and its counts would no longer "
		                          "match their source.")));
}

/*
 * Citus, a key without the distribution column (SPI connected, as the owner): declared in log mode at once, its totals
 * and log distributed by ANCHOR_COLUMN co-located with the source; each shard's trigger appends its own partial rows,
 * under an anchor in its hash range (citus::ShardAnchor); the view sums a key's rows over every anchor; the fill
 * goes under one anchor (any row may be under any anchor: Citus places it by its hash).
 */
static void
DeclareAnchored(const char *name, const CounterDef *def, const char *schema, const char *table, Oid view,
                const Authorization &auth, Oid owner, bool fill)
{
	RequireOwnerScope(owner);
	bool all_keys_not_null = true;
	for (int k = 0; k < def->nkeys; k++)
		all_keys_not_null &= def->keys[k].not_null;
	const char *totals_name = DerivedName(table, "_totals");
	const char *log_name = DerivedName(table, "_log");
	Execute(CreateCounterTableStatement(def, schema, totals_name), SPI_OK_UTILITY);
	Oid totals = RelationIn(schema, totals_name);
	Execute(psprintf("ALTER TABLE %s ADD COLUMN %s", QualifiedName(totals), citus::AnchorColumnDefinition(def->source)),
	        SPI_OK_UTILITY);
	Execute(AnchoredKeyStatement(def, totals, all_keys_not_null), SPI_OK_UTILITY);
	if (!all_keys_not_null)
		Execute(ReplicaIdentityFullStatement(totals), SPI_OK_UTILITY);
	Execute(CreateLikeStatement(schema, log_name, totals), SPI_OK_UTILITY);
	Oid log = RelationIn(schema, log_name);
	Execute(ReplicaIdentityFullStatement(log), SPI_OK_UTILITY);
	Execute(SetStorageStatement(log, StorageParameters(Storage::Log)), SPI_OK_UTILITY);
	Execute(AnchoredLogIndexStatement(def, log), SPI_OK_UTILITY);
	citus::DistributeCounterTable(totals, citus::Placement::Distributed, def->source, ANCHOR_COLUMN);
	citus::DistributeCounterTable(log, citus::Placement::Distributed, def->source, ANCHOR_COLUMN);
	Execute(AnchoredViewStatement(def, schema, table, totals, log), SPI_OK_UTILITY);
	Oid target = RelationIn(schema, table);
	Declaration declared = {name, view, target, true, Mode::Log, totals, log, InvalidOid, nullptr, def->source};
	(void)GetSourceCounters(Register(&declared, auth));
	int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT | PIN_ROW_SECURITY);
	int ret = fill ? SPI_execute(FillStatement(def, totals, view), false, 0) : SPI_OK_INSERT;
	UnpinSettings(level);
	if (ret != SPI_OK_INSERT)
		elog(ERROR, "counters: filling counter \"%s\" failed: %s", name, SPI_result_code_string(ret));
	GuardOwnTables(LookupCounter(name));
}

static void Declare(const char *name, const char *definition, const char *target, bool fill, bool exact, Oid owner,
                    Names names, const KeptTable *kept);

/*
 * A relation of another counter that a definition reads (its source, or its parent) must be an exact counter's own
 * table, which changes with the rows that counter counts: its totals, log or slots change when it is compacted.
 */
static void
RequireCountable(const char *name, Oid rel)
{
	const char *what;
	const Counter *other = OwnerCounterOf(rel, &what);
	if (other != nullptr && (other->mode != Mode::Exact || rel != other->target))
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		         errmsg("counter \"%s\": %s holds %s of counter \"%s\"", name, QualifiedName(rel), what, other->name),
		         errdetail("It changes when that counter is compacted or switched, not with the rows it counts: a "
		                   "counter over it would not be exact."),
		         errhint("Count over the table of an exact counter (counters.alter_counter('%s', mode => 'exact')), "
		                 "or over what it counts.",
		                 other->name)));
}

/*
 * A counter through a chain of parent rows: one counter per level (DescribeChain), each declared as any counter is
 * (authorized again, over the level below and one parent), exact, bottom-up, and marked as the counter's part; then
 * the counter itself, over the last one. All belong to the counter's owner.
 */
static void
DeclareChain(const char *name, const ChainPart *parts, int nparts, const char *target, bool fill, bool exact, Oid owner,
             const KeptTable *kept)
{
	/* (create_counter_concurrently declares a chain's levels one after the other: CounterConcurrently) */
	if (!fill)
		elog(ERROR, "counters: counter \"%s\": a chain declared without its fill", name);
	for (int i = 0; i < nparts - 1; i++) {
		Declare(parts[i].name, parts[i].definition, nullptr, fill, true, owner, Names::Pinned, nullptr);
		MarkPart(parts[i].name, name);
	}
	Declare(name, parts[nparts - 1].definition, target, fill, exact, owner, Names::Pinned, kept);
}

/*
 * Create the view, the counter table (or check the existing target), record the counter, fill it and attach the
 * triggers, as the counter's owner `owner` (InvalidOid: a new counter's, the owner of the existing target or the
 * caller), in a security-restricted operation, whoever declares: the definition's code never runs with the caller's
 * rights, and the relations created belong to the owner.
 */
static void
Declare(const char *name, const char *definition, const char *target, bool fill, bool exact, Oid owner, Names names,
        const KeptTable *kept)
{
	if (definition == nullptr)
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("counter \"%s\": the definition is null", name)));
	if (CounterExists(name))
		ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT), errmsg("counter \"%s\" already exists", name)));
	/* The target's name resolves with the caller's search_path, like any SQL they type. */
	char *schema = nullptr;
	char *table = nullptr;
	Oid tgt = target != nullptr ? ResolveTarget(name, target, &schema, &table) : InvalidOid;
	RefuseTemporaryTarget(name, tgt, schema, table);
	Oid caller = GetUserId();
	/*
	 * Authorize, then act: every relation the definition names (found in its raw parse, resolved as its analysis will
	 * resolve them; nothing runs) and the target must be the caller's to declare a counter over, before the definition
	 * is parsed and planned as anyone. A new counter belongs to the owner of the existing table that keeps it, else to
	 * the owner of the table it counts, whoever declares it (as an index belongs to its table's owner): a superuser
	 * declaring a counter over an application's table runs the application's code as the application.
	 */
	Oid counted;
	List *rels = DefinitionRelations(name, definition, names == Names::Pinned, &counted);
	if (OidIsValid(tgt))
		rels = list_append_unique_oid(rels, tgt);
	if (!OidIsValid(owner))
		owner = OidIsValid(tgt) ? RelationOwner(tgt) : OidIsValid(counted) ? RelationOwner(counted) : caller;
	Authorization auth = AuthorizeDeclaration(name, caller, rels, owner);
	OwnerScope scope;
	EnterOwner(&scope, auth, names == Names::Caller ? PIN_CALLER_PATH : PIN_SEARCH_PATH);
	/* Parsing and planning the definition runs its code: as the owner, restricted, the names resolved as above. */
	ChainPart *parts;
	const char *declared;
	int nparts = DescribeChain(name, definition, owner, &parts, &declared);
	if (nparts > 0) {
		LeaveOwner(&scope);
		DeclareChain(name, parts, nparts, target, fill, exact, owner, kept);
		MarkChain(name, declared);
		return;
	}
	const char *stored;
	CounterDef *def = DescribeDefinition(name, definition, owner, &stored);
	if (!list_member_oid(rels, def->source) || (OidIsValid(def->parent) && !list_member_oid(rels, def->parent)))
		elog(ERROR, "counters: counter \"%s\": the definition was analysed over a relation not authorized", name);
	RequireCountable(name, def->source);
	if (OidIsValid(def->parent))
		RequireCountable(name, def->parent);
	Oid colocate_with;
	const char *distribution_column;
	citus::Placement placement = citus::CheckDeclaration(name, def, tgt, &colocate_with, &distribution_column, !exact);
	if (!fill)
		RequireFeatureOf(name, def->source, !OidIsValid(tgt), Mode::Log, tgt, Feature::DeclareConcurrently);
	if (!exact)
		RequireFeatureOf(name, def->source, !OidIsValid(tgt), Mode::Log, tgt, Feature::LogShardedMode);
	for (int v = 0; v < def->nvalues; v++)
		if (ReadsSource(&def->values[v]))
			RequireFeatureOf(name, def->source, !OidIsValid(tgt), exact ? Mode::Exact : Mode::Log, tgt,
			                 def->values[v].kind == ValueKind::Distinct ? Feature::DistinctCount : Feature::Extremes);
	RequireExtremeIndexes(name, def);
	if (placement != citus::Placement::Local)
		citus::BeginDistributedChange();

	/* Only the source's owner may declare (and so lock it), before anything else; its code runs as the owner. */
	RequireOwnerPrivileges(name, def->source, caller);
	RequireOwnerRights(name, def->source, owner);
	if (OidIsValid(def->parent))
		RequireParentShape(name, def, caller);
	/* No write may slip between the initial fill and the trigger: block writers of the source until commit. */
	if (placement != citus::Placement::Local)
		LockDeclared(def);
	else
		LockPolitely(name, def->source, LockDeclared, def);

	bool owns = !OidIsValid(tgt);
	if (OidIsValid(tgt))
		schema = get_namespace_name(get_rel_namespace(tgt));
	else if (kept != nullptr) {
		/* (declared again: in the schema of the table it keeps) */
		schema = get_namespace_name(get_rel_namespace(kept->table));
		table = get_rel_name(kept->table);
	} else if (table == nullptr) {
		schema = get_namespace_name(get_rel_namespace(def->source));
		table = pstrdup(name);
	}

	SpiConnect();
	/*
	 * The definition becomes a view next to the counter table: PostgreSQL tracks what it depends on, renames follow
	 * it, pg_dump dumps it as SQL, and selecting from it recomputes the counter from scratch. (Its names resolve as
	 * they did when it was parsed above.)
	 */
	const char *view_name = DefinitionViewName(name);
	int pinned = stored != definition ? PinSettings(PIN_SEARCH_PATH) : 0;
	int ret = SPI_execute(CreateViewStatement(schema, view_name, stored), false, 0);
	if (pinned != 0)
		UnpinSettings(pinned);
	if (ret != SPI_OK_UTILITY)
		elog(ERROR, "counters: creating the definition view failed: %s", SPI_result_code_string(ret));
	Oid view = RelationIn(schema, view_name);

	if (placement == citus::Placement::Anchored) {
		DeclareAnchored(name, def, schema, table, view, auth, owner, fill);
		SPI_finish();
		Attach(def->source);
		LeaveOwner(&scope);
		return;
	}
	/* The fill reads the source through the definition: every row (row_security off), in fixed output settings. */
	if (owns) {
		bool all_keys_not_null = true;
		for (int k = 0; k < def->nkeys; k++)
			all_keys_not_null &= def->keys[k].not_null;
		/* (declared again: the table it keeps, emptied and reshaped; else a new one) */
		bool keys_change = true;
		if (kept != nullptr) {
			tgt = kept->table;
			keys_change = ReshapeTable(name, kept, def);
		} else {
			Execute(CreateCounterTableStatement(def, schema, table), SPI_OK_UTILITY);
			tgt = RelationIn(schema, table);
		}
		/*
		 * A published table needs a replica identity to publish updates and deletes; NULL keys cannot make one, nor
		 * can an index of keys by their digest. (Citus: no digests, its distribution column must be a plain one.)
		 */
		bool digest = placement == citus::Placement::Local;
		bool full = !all_keys_not_null || (digest && DigestsKeys(def));
		if (keys_change && (full || kept != nullptr))
			Execute(ReplicaIdentityStatement(tgt, full), SPI_OK_UTILITY);
		/* Citus: distributed co-located with the source (or a reference table) before it is filled */
		if (placement != citus::Placement::Local && kept == nullptr)
			citus::DistributeCounterTable(tgt, placement, colocate_with, distribution_column);
		/* (compiled now: anything the trigger could not run fails the declaration, not a later write) */
		Declaration declared = {name,       view,       tgt,        owns,    Mode::Exact,
		                        InvalidOid, InvalidOid, InvalidOid, nullptr, def->source};
		(void)GetSourceCounters(Register(&declared, auth));
		int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT | PIN_ROW_SECURITY);
		ret = fill ? SPI_execute(FillStatement(def, tgt, view), false, 0) : SPI_OK_INSERT;
		UnpinSettings(level);
		if (ret != SPI_OK_INSERT)
			elog(ERROR, "counters: filling counter \"%s\" failed: %s", name, SPI_result_code_string(ret));
		if (keys_change)
			Execute(CounterKeyStatement(def, tgt, all_keys_not_null, digest), SPI_OK_UTILITY);
	} else {
		/*
		 * (Register checks the target's columns and key types; a declaration needs its unique key now; compiled now:
		 * anything the trigger could not run fails the declaration, not a later write)
		 */
		Declaration declared = {name,       view,       tgt,        owns,    Mode::Exact,
		                        InvalidOid, InvalidOid, InvalidOid, nullptr, def->source};
		Oid source = Register(&declared, auth);
		RequireTargetKey(name, def, tgt);
		(void)GetSourceCounters(source);
		int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT | PIN_ROW_SECURITY);
		ret = SPI_execute(ZeroTargetStatement(def, tgt), false, 0);
		if (ret == SPI_OK_UPDATE)
			ret = SPI_execute(FillTargetStatement(def, tgt, view), false, 0);
		UnpinSettings(level);
		if (ret != SPI_OK_UPDATE)
			elog(ERROR, "counters: filling counter \"%s\" failed: %s", name, SPI_result_code_string(ret));
	}
	SPI_finish();
	Attach(def->source);
	LeaveOwner(&scope);
}

static void
DeclareErrorContext(void *arg)
{
	errcontext("declaring counter \"%s\"", (const char *)arg);
}

static void
StoppedContext(void *arg)
{
	const char *name = (const char *)arg;
	errcontext("create_counter_concurrently() of counter \"%s\" stopped after its declaration: CALL "
	           "counters.rebuild_concurrently('%s') completes it, SELECT counters.drop_counter('%s') removes it",
	           name, name, name);
}

/* A counter declared in `mode`, as owner `owner` (InvalidOid: a new counter), its names resolved as `names` says. */
Oid
DeclareCounter(const char *name, const char *definition, const char *target, const char *mode, Oid owner, Names names,
               const KeptTable *kept)
{
	RequireReadCommitted("counters.create_counter()");
	CheckCounterName(name);
	/*
	 * Every error of a declaration names the counter: the extension's own in their message, PostgreSQL's (an existing
	 * relation name, a definition that fails on the data during the fill) in their context.
	 */
	ErrorContextCallback context;
	context.callback = DeclareErrorContext;
	context.arg = (void *)name;
	context.previous = error_context_stack;
	error_context_stack = &context;
	Declare(name, definition, target, true, mode == nullptr || ParseMode(name, mode) == Mode::Exact, owner, names,
	        kept);
	AlterCounter(name, mode, -1);
	error_context_stack = context.previous;
	return LookupCounter(name)->target;
}

Oid
CreateCounter(const char *name, const char *definition, const char *target, const char *mode)
{
	return DeclareCounter(name, definition, target, mode, InvalidOid, Names::Caller);
}

/*
 * counters.create_counter_concurrently: declared in log mode without the fill (writers wait only for the triggers),
 * committed; then filled as of one snapshot while writers log their deltas (RefreshConcurrently); then switched to
 * `mode`. Each step is a transaction of its own.
 */
void
CreateCounterConcurrently(const char *name, const char *definition, const char *mode)
{
	CounterConcurrently(name, definition, mode, InvalidOid);
}

/*
 * A definition through a chain of parent rows, authorized as Declare authorizes it (the caller, for every relation it
 * names) and decomposed as its owner: its levels and the counter (DescribeChain), the owner they all belong to.
 */
static int
AuthorizedChain(const char *name, const char *definition, Oid *owner, ChainPart **parts, const char **declared)
{
	Oid caller = GetUserId();
	Oid counted;
	List *rels = DefinitionRelations(name, definition, false, &counted);
	if (!OidIsValid(*owner))
		*owner = OidIsValid(counted) ? RelationOwner(counted) : caller;
	Authorization auth = AuthorizeDeclaration(name, caller, rels, *owner);
	OwnerScope scope;
	EnterOwner(&scope, auth, PIN_CALLER_PATH);
	int n = DescribeChain(name, definition, *owner, parts, declared);
	LeaveOwner(&scope);
	return n;
}

static void CounterConcurrentlyAs(const char *name, const char *definition, const char *mode, Oid owner, Names names);

/*
 * The steps of create_counter_concurrently, declaring as `owner` (InvalidOid: the caller). A counter through a chain
 * of parent rows: each level's steps, bottom-up (a level is exact before the one above counts its table), then the
 * counter's.
 */
void
CounterConcurrently(const char *name, const char *definition, const char *mode, Oid owner)
{
	CheckCounterName(name);
	if (mode == nullptr)
		mode = "exact";
	(void)ParseMode(name, mode);
	if (definition != nullptr && JoinsThreeTables(name, definition)) {
		ErrorContextCallback context;
		context.callback = DeclareErrorContext;
		context.arg = (void *)name;
		context.previous = error_context_stack;
		error_context_stack = &context;
		ChainPart *parts;
		const char *declared;
		Oid chain_owner = owner;
		int nparts = AuthorizedChain(name, definition, &chain_owner, &parts, &declared);
		error_context_stack = context.previous;
		if (nparts > 0) {
			for (int i = 0; i < nparts - 1; i++) {
				CounterConcurrentlyAs(parts[i].name, parts[i].definition, "exact", chain_owner, Names::Pinned);
				MarkPart(parts[i].name, name);
				CommitStep();
			}
			CounterConcurrentlyAs(name, parts[nparts - 1].definition, mode, chain_owner, Names::Pinned);
			MarkChain(name, declared);
			return;
		}
	}
	CounterConcurrentlyAs(name, definition, mode, owner, Names::Caller);
}

/* The steps of create_counter_concurrently for one counter, its names resolved as `names` says. */
static void
CounterConcurrentlyAs(const char *name, const char *definition, const char *mode, Oid owner, Names names)
{
	ErrorContextCallback context;
	context.callback = DeclareErrorContext;
	context.arg = (void *)name;
	context.previous = error_context_stack;
	error_context_stack = &context;
	ConcurrentStep(name, "1 of 3: declaring in log mode (writers wait for the triggers)");
	Declare(name, definition, nullptr, false, false, owner, names, nullptr);
	AlterCounter(name, "log", -1);
	MarkBuilding(name, ParseMode(name, mode), -1);
	error_context_stack = context.previous;
	CommitStep();
	/* From here on the counter exists: an error says what is left and how to finish it. */
	context.callback = StoppedContext;
	error_context_stack = &context;
	RefreshConcurrently(name, "2 of 3");
	CommitStep();
	ConcurrentStep(name, psprintf("3 of 3: switching to %s mode", mode));
	AlterCounter(name, mode, -1);
	error_context_stack = context.previous;
	ConcurrentStep(name, nullptr);
}

/* DropCounter of counter `name`; `whole`: as a level of that counter, dropped with it (else NULL). */
static void
DropOne(const char *name, bool keep_triggers, bool keep_tables, const char *whole)
{
	/* (writers in flight apply their deltas first, to the relations dropped here) */
	Change change;
	Counter *c = BeginChange(&change, name, ShareRowExclusiveLock, AccessExclusiveLock);
	const char *part_of = c->options->part_of;
	if (part_of != nullptr && (whole == nullptr || strcmp(whole, part_of) != 0) && CounterExists(part_of))
		ereport(ERROR,
		        (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
		         errmsg("counter \"%s\" is a level of counter \"%s\"", name, part_of),
		         errdetail("Counter \"%s\" counts through a chain of parent rows, one counter per level.", part_of),
		         errhint("Drop counter \"%s\": its levels go with it.", part_of)));
	/* (its levels, top-down: each after the one that counts its table) */
	List *parts = whole == nullptr && c->options->chain != nullptr ? ChainParts(c) : NIL;
	/* (a counter over this one's table: PostgreSQL would refuse for its definition view; name the counter instead) */
	List *readers = keep_tables || !c->owns_target ? NIL : ReadCatalogOfSource(c->target);
	if (readers != NIL) {
		const char *reader = ((const Counter *)linitial(readers))->name;
		ereport(ERROR,
		        (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
		         errmsg("counter \"%s\": counter \"%s\" counts its table %s", name, reader, QualifiedName(c->target)),
		         errhint("Drop counter \"%s\" first: counters.drop_counter('%s').", reader, reader)));
	}
	if (citus::IsCitusRelation(c->source))
		citus::BeginDistributedChange();
	Oid parent = CounterParent(c);
	Unregister(c);
	ForgetCounterStats(c->query);
	/* (DROP TRIGGER locks the table ACCESS EXCLUSIVE: a counter declared again in this transaction keeps them) */
	if (!keep_triggers && ReadCatalogOfSource(c->source) == NIL)
		Detach(c->source);
	if (!c->owns_target)
		AttachTarget(c->target);
	if (OidIsValid(parent)) {
		/* (the parent's triggers stay while another counter joins it, whose cache must forget this one) */
		CacheInvalidateRelcacheByRelid(parent);
		if (!keep_triggers && !JoinsParent(parent))
			SetParentTriggers(parent, false);
	}
	SpiConnect();
	CreatedRelation own[COUNTER_RELATIONS];
	int n = CreatedRelations(c, own);
	for (int i = 0; i < n; i++)
		if (!keep_tables || strcmp(own[i].kind, "TABLE") != 0)
			Execute(DropStatement(own[i].kind, own[i].rel), SPI_OK_UTILITY);
	SPI_finish();
	EndChange(&change);
	for (int i = list_length(parts) - 1; i >= 0; i--)
		DropOne(((const Counter *)list_nth(parts, i))->name, false, false, name);
}

void
DropCounter(const char *name, bool keep_triggers, bool keep_tables)
{
	(void)ApplyDeferred(); /* (a counter dropped holds nothing for the commit) */
	DropOne(name, keep_triggers, keep_tables, nullptr);
}

List *
SelectGrantees(Oid rel)
{
	HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(rel));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", rel);
	bool isnull;
	Datum acl_datum = SysCacheGetAttr(RELOID, tup, Anum_pg_class_relacl, &isnull);
	Oid owner = ((Form_pg_class)GETSTRUCT(tup))->relowner;
	List *grantees = NIL;
	if (!isnull) {
		Acl *acl = DatumGetAclPCopy(acl_datum);
		AclItem *items = ACL_DAT(acl);
		for (int i = 0; i < ACL_NUM(acl); i++)
			if ((ACLITEM_GET_PRIVS(items[i]) & ACL_SELECT) && items[i].ai_grantee != owner)
				grantees = list_append_unique_oid(grantees, items[i].ai_grantee);
	}
	ReleaseSysCache(tup);
	return grantees;
}

void
CopySelectGrants(Oid from, Oid to)
{
	List *grantees = SelectGrantees(from);
	ListCell *lc;
	foreach (lc, grantees)
		Execute(GrantSelectStatement(to, lfirst_oid(lc)), SPI_OK_UTILITY);
}

/*
 * The capture triggers on a source and (a partitioned table) every partition, since statement triggers of a parent
 * do not fire for statements that name a partition: INSERT, UPDATE and DELETE with transition tables, counters_begin
 * before the statement, and TRUNCATE (after it on the source, emptying the counters; before it on a leaf partition,
 * subtracting its rows). A sink has the sink triggers instead of counters_begin, INSERT, UPDATE and DELETE.
 * Idempotent.
 */
void
Attach(Oid source)
{
	/* the parents of its counters through a parent row get their triggers, and the tables of its counter caches */
	ListCell *pc;
	foreach (pc, ParentsOfSource(source))
		SetParentTriggers(lfirst_oid(pc), true);
	foreach (pc, ReadCatalogOfSource(source)) {
		Counter *e = (Counter *)lfirst(pc);
		if (!e->owns_target)
			AttachTarget(e->target);
		else
			GuardOwnTables(e);
		/* (counters declared before their rows were described: ALTER EXTENSION UPDATE attaches every source) */
		Describe(e->name);
	}
	bool sink = IsSink(source);
	bool citus_source = citus::IsCitusRelation(source);
	if (citus_source)
		citus::BeginDistributedChange();
	List *rels = find_all_inheritors(source, NoLock, nullptr);
	SpiConnect();
	ListCell *lc;
	foreach (lc, rels) {
		Oid rel = lfirst_oid(lc);
		for (int t = 0; t < CAPTURE_TRIGGERS; t++) {
			bool sink_trigger = t == SINK_TRIGGER || t == SINK_GUARD_TRIGGER || t == SINK_END_TRIGGER;
			bool row_trigger = t == INSERT_TRIGGER || t == UPDATE_TRIGGER || t == DELETE_TRIGGER;
			bool replica_trigger = t == REPLICA_TRIGGER || t == REPLICA_TRUNCATE_TRIGGER;
			if ((t == TRUNCATE_TRIGGER || replica_trigger) && get_rel_relkind(rel) != RELKIND_RELATION)
				continue; /* a partitioned table has no rows of its own: its leaves' triggers fire */
			/*
			 * (a sink's row trigger loads the library before the statement's AFTER triggers: no counters_begin; a sink
			 * stores no row to replicate, and Citus replicates its own way: no replica triggers)
			 */
			bool wanted = sink ? !row_trigger && !replica_trigger && t != BEGIN_TRIGGER
			                   : !sink_trigger && !(replica_trigger && citus_source);
			char enabled;
			Oid function = TriggerFunction(rel, CaptureTriggerName(t), &enabled);
			bool present = function == CaptureFunction();
			if (wanted && !OidIsValid(function))
				Execute(CreateTriggerStatement(t, rel, rel == source), SPI_OK_UTILITY);
			else if (!wanted && present)
				Execute(DropTriggerStatement(t, rel), SPI_OK_UTILITY);
			else if (present && replica_trigger && enabled == TRIGGER_FIRES_ON_ORIGIN)
				Execute(EnableReplicaTriggerStatement(t, rel), SPI_OK_UTILITY);
			/* (a sink's row trigger fires for every role: under the replica role it counts each row at once) */
			else if (present && t == SINK_TRIGGER && enabled == TRIGGER_FIRES_ON_ORIGIN)
				Execute(EnableTriggerStatement(CaptureTriggerName(t), rel, true), SPI_OK_UTILITY);
		}
	}
	SPI_finish();
}

void
AttachCounted(Oid relid)
{
	/*
	 * counters.attach(): the triggers of a table's counters, again. Only a table that has counters, for a caller who
	 * may change them (its owner's privileges): triggers on a table without one count for nobody, and only stand ready
	 * for a forged description to be adopted.
	 */
	Oid source = SourceOf(relid);
	if (!HasOwnerPrivileges(source))
		ereport(ERROR,
		        (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE), errmsg("must be owner of table %s", QualifiedName(source))));
	if (ReadCatalogOfSource(source) == NIL)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("table %s has no counter", QualifiedName(source)),
		                errdetail("counters.attach() re-creates the triggers of a table's counters; a table without "
		                          "counters has none."),
		                errhint("Declare a counter with counters.create_counter(), which attaches its triggers.")));
	Attach(source);
}

void
KeepReplicaTriggers(Oid source)
{
	List *rels = find_all_inheritors(source, NoLock, nullptr);
	SpiConnect();
	ListCell *lc;
	foreach (lc, rels)
		for (int t = REPLICA_TRIGGER; t <= REPLICA_TRUNCATE_TRIGGER; t++) {
			char enabled;
			if (TriggerFunction(lfirst_oid(lc), CaptureTriggerName(t), &enabled) == CaptureFunction() &&
			    enabled == TRIGGER_FIRES_ON_ORIGIN)
				Execute(EnableReplicaTriggerStatement(t, lfirst_oid(lc)), SPI_OK_UTILITY);
		}
	SPI_finish();
}

void
KeepParentReplicaTriggers(Oid parent)
{
	SpiConnect();
	for (int t = PARENT_REPLICA_TRIGGER; t <= PARENT_REPLICA_TRUNCATE_TRIGGER; t++) {
		char enabled;
		if (TriggerFunction(parent, ParentTriggerName(t), &enabled) == CaptureFunction() &&
		    enabled == TRIGGER_FIRES_ON_ORIGIN)
			Execute(EnableTriggerStatement(ParentTriggerName(t), parent, false), SPI_OK_UTILITY);
	}
	SPI_finish();
}

void
Detach(Oid source)
{
	if (IsSink(source))
		ereport(NOTICE,
		        (errmsg("table %s is no longer a sink: rows inserted into it are stored", QualifiedName(source)),
		         errdetail("No counter is declared on it any more.")));
	if (citus::IsCitusRelation(source))
		citus::BeginDistributedChange();
	List *rels = find_all_inheritors(source, NoLock, nullptr);
	SpiConnect();
	ListCell *lc;
	foreach (lc, rels)
		for (int t = 0; t < CAPTURE_TRIGGERS; t++)
			if (TriggerFunction(lfirst_oid(lc), CaptureTriggerName(t)) == CaptureFunction())
				Execute(DropTriggerStatement(t, lfirst_oid(lc)), SPI_OK_UTILITY);
	SPI_finish();
}

/* Whether any counter reads `parent` as the parent of its rows. */
bool
JoinsParent(Oid parent)
{
	ListCell *lc;
	foreach (lc, ReadCatalog(nullptr)) {
		Counter *e = (Counter *)lfirst(lc);
		if (e->source != parent && CounterParent(e) == parent)
			return true;
	}
	return false;
}

List *
ParentsOfSource(Oid source)
{
	List *parents = NIL;
	ListCell *lc;
	foreach (lc, ReadCatalogOfSource(source)) {
		Oid parent = CounterParent((Counter *)lfirst(lc));
		if (OidIsValid(parent))
			parents = list_append_unique_oid(parents, parent);
	}
	return parents;
}

void
GuardOwnTables(const Counter *e)
{
	Oid tables[4] = {e->owns_target && e->mode == Mode::Exact ? e->target : InvalidOid, e->totals, e->log,
	                 e->crossings};
	SpiConnect();
	for (int i = 0; i < 4; i++)
		if (OidIsValid(tables[i]) && !OidIsValid(TriggerFunction(tables[i], guard_trigger)))
			Execute(CreateGuardTriggerStatement(tables[i]), SPI_OK_UTILITY);
	SPI_finish();
}

/*
 * counters_target_key on an existing table that keeps counter-cache columns, for the key columns of every counter
 * kept there (their union), replaced whenever they change; dropped when no counter is kept there any more.
 */
void
AttachTarget(Oid target)
{
	List *columns = NIL;
	ListCell *lc;
	foreach (lc, ReadCatalogOfRelation(target)) {
		Counter *e = (Counter *)lfirst(lc);
		if (e->owns_target || e->target != target || !OidIsValid(e->query) ||
		    !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(e->query)))
			continue;
		CounterDef *def = DefinitionOf(e);
		for (int k = 0; k < def->nkeys; k++) {
			bool known = false;
			ListCell *c;
			foreach (c, columns)
				known |= strcmp((const char *)lfirst(c), def->keys[k].column_name) == 0;
			if (!known)
				columns = lappend(columns, (void *)def->keys[k].column_name);
		}
	}
	SpiConnect();
	if (TriggerFunction(target, target_key_trigger) == CaptureFunction())
		Execute(DropTargetKeyTriggerStatement(target), SPI_OK_UTILITY);
	if (columns != NIL)
		Execute(CreateTargetKeyTriggerStatement(target, columns), SPI_OK_UTILITY);
	SPI_finish();
}

void
SetParentTriggers(Oid parent, bool attach)
{
	SpiConnect();
	for (int t = 0; t < PARENT_TRIGGERS; t++) {
		char enabled;
		Oid function = TriggerFunction(parent, ParentTriggerName(t), &enabled);
		bool replica = t == PARENT_REPLICA_TRIGGER || t == PARENT_REPLICA_TRUNCATE_TRIGGER;
		if (attach && !OidIsValid(function))
			Execute(CreateParentTriggerStatement(t, parent), SPI_OK_UTILITY);
		else if (attach && replica && function == CaptureFunction() && enabled == TRIGGER_FIRES_ON_ORIGIN)
			Execute(EnableTriggerStatement(ParentTriggerName(t), parent, false), SPI_OK_UTILITY);
		else if (!attach && function == CaptureFunction())
			Execute(psprintf("DROP TRIGGER %s ON %s", ParentTriggerName(t), QualifiedName(parent)), SPI_OK_UTILITY);
	}
	SPI_finish();
}

void
RefuseCheckOptionViews(Oid rel, bool making_sink)
{
	char *views = CheckOptionViews(rel);
	if (views == nullptr)
		return;
	const char *name = QualifiedName(rel);
	const char *detail = "A view's check option checks the rows stored through it; the rows of a sink are never "
	                     "stored, so a writer could count rows the view refuses.";
	if (making_sink)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("table %s cannot be a sink: views with a check option read it: %s", name, views),
		                errdetail("%s", detail),
		                errhint("Remove the check options (ALTER VIEW ... RESET (check_option)) first.")));
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	                errmsg("views with a check option cannot read sink %s: %s", name, views), errdetail("%s", detail),
	                errhint("Create or change the view without WITH CHECK OPTION.")));
}

/*
 * counters.set_sink(source, sink): the rows inserted into a sink are counted by its counters and never stored
 * (SINK_TRIGGER counts each row and returns NULL); UPDATE and DELETE are refused (SINK_GUARD_TRIGGER). Only an
 * empty table with counters, no partition, no foreign key and no generated column becomes one.
 */
void
SetSink(Oid source, bool sink)
{
	const char *name = QualifiedName(source);
	if (!HasOwnerPrivileges(source))
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE), errmsg("must be owner of table %s", name)));
	RequireReadCommitted("counters.set_sink()");
	/* Writers wait: the table is checked empty and its triggers switched in one step. */
	LockRelationOid(source, ShareRowExclusiveLock);
	if (IsSink(source) == sink)
		return;
	if (!sink) {
		/* (Attach keeps the triggers of a sink: the sink trigger goes first) */
		SpiConnect();
		Execute(DropTriggerStatement(SINK_TRIGGER, source), SPI_OK_UTILITY);
		SPI_finish();
		Attach(source);
		return;
	}
	List *counters = ReadCatalogOfSource(source);
	if (counters == NIL)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("table %s cannot be a sink: no counter is declared on it", name),
		                errhint("Declare its counters first: a sink's rows are counted, then dropped.")));
	ListCell *lc;
	foreach (lc, counters) {
		const Counter *e = (const Counter *)lfirst(lc);
		const CounterDef *def = DefinitionOf(e);
		for (int v = 0; v < def->nvalues; v++)
			if (def->values[v].kind == ValueKind::Distinct)
				ereport(ERROR,
				        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				         errmsg("table %s cannot be a sink: counter \"%s\" counts distinct values", name, e->name),
				         errdetail("Whether a value is new to a key is read from the rows stored.")));
	}
	if (get_rel_relkind(source) != RELKIND_RELATION || has_subclass(source) || get_rel_relispartition(source) ||
	    has_superclass(source))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("table %s cannot be a sink: it is partitioned, a partition, or inherits", name),
		                errdetail("A sink stores no rows; it has none to partition.")));
	if (citus::IsCitusRelation(source))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("table %s cannot be a sink: it is a Citus table", name)));
	Relation rel = table_open(source, NoLock);
	RequireSinkShape(rel);
	table_close(rel, NoLock);
	RefuseCheckOptionViews(source, true);
	SpiConnect();
	/* (as its owner: a rule or policy of the table is the owner's code) */
	OwnerScope owner;
	EnterOwner(&owner, AuthorizeTableOwner(source), PIN_ROW_SECURITY);
	if (QueryLatest(psprintf("SELECT 1 FROM ONLY %s LIMIT 1", name), 0, nullptr, nullptr, nullptr) != SPI_OK_SELECT)
		elog(ERROR, "counters: reading %s failed", name);
	LeaveOwner(&owner);
	bool empty = SPI_processed == 0;
	if (empty)
		Execute(CreateTriggerStatement(SINK_TRIGGER, source, true), SPI_OK_UTILITY);
	SPI_finish();
	if (!empty)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("table %s cannot be a sink: it has rows", name),
		                errdetail("A sink stores no rows; its counters count the rows inserted from now on."),
		                errhint("Move the rows elsewhere first (DELETE counts them out of the counters).")));
	Attach(source);
}

} // namespace counters
