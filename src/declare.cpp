/*
 * declare.cpp: declaring, switching and dropping counters, and attaching their triggers.
 *
 * Each function orchestrates: lock, check, execute the statements statements.cpp generates, record in the catalog
 * (catalog.cpp checks the caller's rights on every relation it records). Names in a definition and a target resolve
 * with the caller's search_path, like any SQL they type; everything else runs with search_path pinned.
 */
#include "counters.hpp"
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

namespace {

/* The same counter: the same relations in the same mode (a change that committed meanwhile leaves neither). */
bool
SameCounter(const CatalogEntry *a, const CatalogEntry *b)
{
	return a->source == b->source && a->target == b->target && a->query == b->query && a->totals == b->totals &&
	       a->log == b->log && a->mode == b->mode;
}

} // namespace

int
CounterRelations(const CatalogEntry *e, Oid *rels)
{
	int n = 0;
	Oid ordered[5] = {e->query, e->target, e->log, e->totals, e->crossings};
	for (int i = 0; i < 5; i++)
		if (OidIsValid(ordered[i]))
			rels[n++] = ordered[i];
	return n;
}

CatalogEntry *
BeginChange(Change *change, const char *name, LOCKMODE mode, LOCKMODE own)
{
	CatalogEntry *e = LookupCounter(name);
	RequireMaintainer(e);
	for (CatalogEntry *locked = nullptr; mode != NoLock && (locked == nullptr || !SameCounter(locked, e));) {
		/* (taken again if the counter changed while this waited: its source or parent may be others now) */
		LockCounterSources(e, mode);
		locked = e;
		e = LookupCounter(name);
		RequireMaintainer(e);
	}
	/*
	 * Then its own relations, in the one order (an existing table that keeps counter-cache columns is the user's: no
	 * more than its trigger's change needs).
	 */
	Oid rels[5];
	int n = own != NoLock ? CounterRelations(e, rels) : 0;
	for (int i = 0; i < n; i++)
		LockRelationOid(rels[i], rels[i] == e->target && !e->owns_target ? Min(own, ShareRowExclusiveLock) : own);
	change->e = e;
	/* (no setting pinned here: each statement pins its own, and a definition the caller typed resolves as theirs) */
	EnterOwner(&change->scope, CounterOwner(e), 0);
	return e;
}

void
EndChange(Change *change)
{
	LeaveOwner(&change->scope);
}

namespace {

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
Oid
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

/* A target (an existing table) must have the definition's columns, values of integer or numeric types, and a
 * unique index on exactly the keys. */
void
CheckExistingTarget(const char *name, const CounterDef *def, Oid target)
{
	StringInfoData missing;
	initStringInfo(&missing);
	for (int i = 0; i < def->ncolumns; i++) {
		const char *column = ColumnName(def, i);
		if (get_attnum(target, column) == InvalidAttrNumber)
			appendStringInfo(&missing, "%s%s", missing.len ? ", " : "", quote_identifier(column));
	}
	if (missing.len > 0)
		ereport(ERROR,
		        (errcode(ERRCODE_UNDEFINED_COLUMN),
		         errmsg("counter \"%s\": target table %s has no column %s", name, QualifiedName(target), missing.data),
		         errhint("The key and value aliases of the definition must name columns of the target table.")));
	for (int v = 0; v < def->nvalues; v++) {
		AttrNumber attnum = get_attnum(target, def->values[v].column_name);
		Oid type;
		int32 typmod;
		Oid collation;
		get_atttypetypmodcoll(target, attnum, &type, &typmod, &collation);
		if (type != INT2OID && type != INT4OID && type != INT8OID && type != NUMERICOID)
			appendStringInfo(&missing, "%s%s (%s)", missing.len ? ", " : "",
			                 quote_identifier(def->values[v].column_name), format_type_with_typemod(type, typmod));
	}
	if (missing.len > 0)
		ereport(ERROR,
		        (errcode(ERRCODE_DATATYPE_MISMATCH),
		         errmsg("counter \"%s\": target column %s is not of an integer or numeric type", name, missing.data)));
	/* a valid unique index, without predicate or expressions, on exactly the key columns */
	Relation rel = table_open(target, AccessShareLock);
	List *indexes = RelationGetIndexList(rel);
	bool found = false;
	ListCell *lc;
	foreach (lc, indexes) {
		HeapTuple tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		if (!HeapTupleIsValid(tup))
			continue;
		Form_pg_index index = (Form_pg_index)GETSTRUCT(tup);
		bool ok = index->indisunique && index->indisvalid && index->indnatts == def->nkeys &&
		          heap_attisnull(tup, Anum_pg_index_indpred, nullptr) &&
		          heap_attisnull(tup, Anum_pg_index_indexprs, nullptr);
		for (int k = 0; ok && k < def->nkeys; k++) {
			bool in_index = false;
			AttrNumber attnum = get_attnum(target, def->keys[k].column_name);
			for (int j = 0; j < index->indnatts; j++)
				in_index |= index->indkey.values[j] == attnum;
			ok = in_index;
		}
		ReleaseSysCache(tup);
		found |= ok;
	}
	list_free(indexes);
	table_close(rel, AccessShareLock);
	if (!found)
		ereport(ERROR, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
		                errmsg("counter \"%s\": key columns (%s) are not a unique key of target table %s", name,
		                       KeyNames(def), QualifiedName(target)),
		                errhint("Create a unique index or primary key on exactly the key columns.")));
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
void
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
	Relation rel = table_open(def->source, AccessShareLock);
	List *indexes = RelationGetIndexList(rel);
	table_close(rel, AccessShareLock);
	bool indexed = false;
	ListCell *lc;
	foreach (lc, indexes) {
		HeapTuple tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		if (!HeapTupleIsValid(tup))
			continue;
		Form_pg_index index = (Form_pg_index)GETSTRUCT(tup);
		indexed |= index->indisvalid && index->indkey.values[0] == def->child_key &&
		           heap_attisnull(tup, Anum_pg_index_indpred, nullptr);
		ReleaseSysCache(tup);
	}
	if (!indexed)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": column \"%s\" of %s needs an index", name,
		                       get_attname(def->source, def->child_key, false), QualifiedName(def->source)),
		                errdetail("A change of a parent row reads its rows by that column."),
		                errhint("CREATE INDEX ON %s (%s);", QualifiedName(def->source),
		                        quote_identifier(get_attname(def->source, def->child_key, false)))));
}

/* A target in pg_temp (named so, or the caller's temporary table) would vanish with the session. */
void
RefuseTemporaryTarget(const char *name, Oid target, const char *schema, const char *table)
{
	bool temp = OidIsValid(target) ? get_rel_persistence(target) == RELPERSISTENCE_TEMP
	                               : schema != nullptr && strcmp(schema, "pg_temp") == 0;
	if (temp)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\": target \"%s\" is a temporary table", name,
		                       OidIsValid(target) ? get_rel_name(target) : table),
		                errdetail("A counter is declared for every session; a temporary table belongs to one.")));
}

/* How a declaration resolves the names of its definition. */
enum class Names {
	Caller, /* as the caller resolves them: a definition the caller typed */
	Pinned  /* with search_path = pg_catalog, pg_temp: a stored definition, deparsed with it (every other name
	           qualified), which a role that can create functions in the caller's schemas cannot redirect */
};

/*
 * Create the view, the counter table (or check the existing target), record the counter, fill it and attach the
 * triggers, as the counter's owner `owner` (InvalidOid: a new counter's, the owner of the existing target or the
 * caller), in a security-restricted operation, whoever declares: the definition's code never runs with the caller's
 * rights, and the relations created belong to the owner.
 */
void
Declare(const char *name, const char *definition, const char *target, bool fill, bool exact, Oid owner, Names names)
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
	if (OidIsValid(tgt))
		RequireOwnerPrivileges(name, tgt);
	/*
	 * A new counter belongs to the owner of the existing table that keeps it, else to the owner of the table it
	 * counts, whoever declares it (as an index belongs to its table's owner): a superuser declaring a counter over an
	 * application's table runs the application's code as the application.
	 */
	Oid counted = InvalidOid;
	if (!OidIsValid(owner) && !OidIsValid(tgt) && names == Names::Caller)
		counted = DefinitionSource(name, definition);
	if (!OidIsValid(owner))
		owner = OidIsValid(tgt) ? RelationOwner(tgt) : OidIsValid(counted) ? RelationOwner(counted) : caller;
	OwnerScope scope;
	EnterOwner(&scope, owner, names == Names::Caller ? PIN_CALLER_PATH : PIN_SEARCH_PATH);
	/* Parsing and planning the definition runs its code: as the owner, restricted, the names resolved as above. */
	CounterDef *def = DescribeDefinition(name, definition, owner);
	Oid colocate_with;
	const char *distribution_column;
	citus::Placement placement = citus::CheckDeclaration(name, def, tgt, &colocate_with, &distribution_column);
	if (!exact)
		citus::RefuseFeature(name, def->source, "log and sharded mode");
	if (placement != citus::Placement::Local)
		citus::BeginDistributedChange();

	/* Only the source's owner may declare (and so lock it), before anything else; its code runs as the owner. */
	RequireOwnerPrivileges(name, def->source, caller);
	RequireOwnerRights(name, def->source, owner);
	if (OidIsValid(def->parent))
		RequireParentShape(name, def, caller);
	/* No write may slip between the initial fill and the trigger: block writers of the source until commit. */
	LockSource(def->source, ShareRowExclusiveLock);
	if (OidIsValid(def->parent))
		LockSource(def->parent, ShareRowExclusiveLock);

	bool owns = !OidIsValid(tgt);
	if (OidIsValid(tgt))
		schema = get_namespace_name(get_rel_namespace(tgt));
	else if (table == nullptr) {
		schema = get_namespace_name(get_rel_namespace(def->source));
		table = pstrdup(name);
	}

	SpiConnect();
	/*
	 * The definition becomes a view next to the counter table: PostgreSQL tracks what it depends on, renames follow
	 * it, pg_dump dumps it as SQL, and selecting from it recomputes the counter from scratch. (Its names resolve as
	 * they did when it was parsed above.)
	 */
	const char *view_name = psprintf("%s_definition", name);
	int ret = SPI_execute(CreateViewStatement(schema, view_name, definition), false, 0);
	if (ret != SPI_OK_UTILITY)
		elog(ERROR, "counters: creating the definition view failed: %s", SPI_result_code_string(ret));
	Oid view = RelationIn(schema, view_name);

	/* The fill reads the source through the definition: every row (row_security off), in fixed output settings. */
	if (owns) {
		bool all_keys_not_null = true;
		for (int k = 0; k < def->nkeys; k++)
			all_keys_not_null &= def->keys[k].not_null;
		Execute(CreateCounterTableStatement(def, schema, table), SPI_OK_UTILITY);
		tgt = RelationIn(schema, table);
		/*
		 * A published table needs a replica identity to publish updates and deletes; NULL keys cannot make one, nor
		 * can an index of keys by their digest. (Citus: no digests, its distribution column must be a plain one.)
		 */
		bool digest = placement == citus::Placement::Local;
		if (!all_keys_not_null || (digest && DigestsKeys(def)))
			Execute(ReplicaIdentityFullStatement(tgt), SPI_OK_UTILITY);
		/* Citus: distributed co-located with the source (or a reference table) before it is filled */
		if (placement != citus::Placement::Local)
			citus::DistributeCounterTable(tgt, placement, colocate_with, distribution_column);
		/* (compiled now: anything the trigger could not run fails the declaration, not a later write) */
		(void)GetSourceCounters(Register(name, view, tgt, owns));
		int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT | PIN_ROW_SECURITY);
		ret = fill ? SPI_execute(FillStatement(def, tgt, view), false, 0) : SPI_OK_INSERT;
		UnpinSettings(level);
		if (ret != SPI_OK_INSERT)
			elog(ERROR, "counters: filling counter \"%s\" failed: %s", name, SPI_result_code_string(ret));
		Execute(CounterKeyStatement(def, tgt, all_keys_not_null, digest), SPI_OK_UTILITY);
	} else {
		CheckExistingTarget(name, def, tgt);
		/* (checks that the key columns have the definition's key types: compared without conversion) */
		/* (compiled now: anything the trigger could not run fails the declaration, not a later write) */
		(void)GetSourceCounters(Register(name, view, tgt, owns));
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

} // namespace

namespace {

void
DeclareErrorContext(void *arg)
{
	errcontext("declaring counter \"%s\"", (const char *)arg);
}

void
StoppedContext(void *arg)
{
	const char *name = (const char *)arg;
	errcontext("create_counter_concurrently() of counter \"%s\" stopped after its declaration: CALL "
	           "counters.rebuild_concurrently('%s') completes it, SELECT counters.drop_counter('%s') removes it",
	           name, name, name);
}

void
CheckCounterName(const char *name)
{
	if (name == nullptr)
		ereport(ERROR, (errcode(ERRCODE_INVALID_NAME), errmsg("invalid counter name NULL"),
		                errdetail("A counter name has 1 to %d bytes.", COUNTER_NAME_MAX_BYTES)));
	/* The definition view is named <name>_definition, an identifier of at most NAMEDATALEN - 1 bytes. */
	if (strlen(name) == 0 || strlen(name) > COUNTER_NAME_MAX_BYTES)
		ereport(ERROR, (errcode(ERRCODE_INVALID_NAME), errmsg("invalid counter name %s", quote_literal_cstr(name)),
		                errdetail("A counter name has 1 to %d bytes (this one has %zu): its tables and views are "
		                          "named after it.",
		                          COUNTER_NAME_MAX_BYTES, strlen(name))));
}

} // namespace

namespace {

/* A counter declared in `mode`, as owner `owner` (InvalidOid: a new counter), its names resolved as `names` says. */
Oid
DeclareCounter(const char *name, const char *definition, const char *target, const char *mode, Oid owner, Names names)
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
	Declare(name, definition, target, true, mode == nullptr || ParseMode(name, mode) == Mode::Exact, owner, names);
	AlterCounter(name, mode, -1);
	error_context_stack = context.previous;
	return LookupCounter(name)->target;
}

void CounterConcurrently(const char *name, const char *definition, const char *mode, Oid owner);

} // namespace

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

namespace {

/* The steps of create_counter_concurrently, declaring as `owner` (InvalidOid: the caller). */
void
CounterConcurrently(const char *name, const char *definition, const char *mode, Oid owner)
{
	CheckCounterName(name);
	if (mode == nullptr)
		mode = "exact";
	(void)ParseMode(name, mode);
	ErrorContextCallback context;
	context.callback = DeclareErrorContext;
	context.arg = (void *)name;
	context.previous = error_context_stack;
	error_context_stack = &context;
	ConcurrentStep(name, "1 of 3: declaring in log mode (writers wait for the triggers)");
	Declare(name, definition, nullptr, false, false, owner, Names::Caller);
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

} // namespace

void
AlterCounter(const char *name, const char *mode_text, int max_slots)
{
	CatalogEntry *c = LookupCounter(name);
	RequireMaintainer(c);
	Mode mode = mode_text != nullptr ? ParseMode(name, mode_text) : c->mode; /* (NULL: max_slots alone) */
	if (mode != c->mode)
		RequireModeAllowed(name, c->source, mode, c->mode == Mode::Exact ? c->target : c->totals, c->target);
	if (max_slots != -1 && (mode != Mode::Sharded || max_slots < MAX_SLOTS_MIN || max_slots > MAX_SLOTS_MAX))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("counter \"%s\": max_slots applies to sharded mode, from %d to %d", name, MAX_SLOTS_MIN,
		                       MAX_SLOTS_MAX)));
	if (c->mode == mode) {
		if (max_slots != -1)
			SetOption(name, "max_slots", MaxSlotsJsonb(max_slots), false);
		return;
	}
	if (!c->owns_target)
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		         errmsg("counter \"%s\": a counter kept in columns of an existing table can only be exact", name)));
	/* (folding the log or slots after locking writers out must see every delta committed before the lock) */
	RequireReadCommitted("counters.alter_counter()");
	if (c->mode != Mode::Exact && mode != Mode::Exact)
		AlterCounter(name, "exact", -1);
	/*
	 * Writers wait; the relations of the new mode are created by the counter's owner, whoever switches it: a counter's
	 * code runs as the owner of its tables, and a superuser's switch must not make the superuser that owner.
	 */
	Change change;
	c = BeginChange(&change, name, ShareRowExclusiveLock, AccessExclusiveLock);
	if (c->mode == mode || (c->mode != Mode::Exact && mode != Mode::Exact)) {
		/* (another transaction switched it while this one waited: from there, or already done) */
		EndChange(&change);
		AlterCounter(name, mode_text, max_slots);
		return;
	}
	/* (in this context: SPI's goes away with SPI_finish) */
	char *nsp = get_namespace_name(get_rel_namespace(c->target));
	char *rel = get_rel_name(c->target);
	SpiConnect();
	if (mode != Mode::Exact) {
		CounterShape *s = BuildShape(c);
		char *totals_name = DerivedName(rel, "_totals");
		char *log_name = DerivedName(rel, mode == Mode::Log ? "_log" : "_slots");
		Oid totals = c->target;
		Execute(RenameStatement(totals, totals_name), SPI_OK_UTILITY);
		Execute(CreateLikeStatement(nsp, log_name, totals), SPI_OK_UTILITY);
		Oid log = RelationIn(nsp, log_name);
		/* (published for logical replication, compaction's deletes need a replica identity) */
		Execute(ReplicaIdentityFullStatement(log), SPI_OK_UTILITY);
		if (mode == Mode::Log)
			Execute(LogIndexStatement(s, log), SPI_OK_UTILITY);
		else {
			/* the slot number: the column after the definition's (the trigger finds it by position) */
			Execute(AddSlotColumnStatement(log), SPI_OK_UTILITY);
			Execute(SlotKeyStatement(s, log), SPI_OK_UTILITY);
			SetOption(name, "max_slots", MaxSlotsJsonb(max_slots == -1 ? MAX_SLOTS_DEFAULT : max_slots), false);
		}
		/* Readers see totals plus pending deltas as of their snapshot: exact and transactional, never a cache. */
		Execute(PendingViewStatement(s, nsp, rel, totals, log), SPI_OK_UTILITY);
		Oid view = RelationIn(nsp, rel);
		CopySelectGrants(totals, view);
		SPI_finish();
		SetMode(name, view, mode, totals, log);
		GuardOwnTables(LookupCounter(name));
	} else {
		SPI_finish();
		(void)Compact(name);
		SetMode(name, c->totals, Mode::Exact, InvalidOid, InvalidOid);
		SetOption(name, "max_slots", (Datum)0, true);
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

/* Counter `from` takes the name `to` (free): its catalog row and the relations named after it. */
void
RenameCounter(const char *from, const char *to)
{
	CatalogEntry *e = LookupCounter(from);
	RequireMaintainer(e);
	OwnerScope as;
	EnterOwner(&as, CounterOwner(e), PIN_SEARCH_PATH);
	SpiConnect();
	RenameWithIndexes(e->query, psprintf("%s_definition", to), from, to);
	RenameWithIndexes(e->target, to, from, to);
	if (e->mode != Mode::Exact) {
		RenameWithIndexes(e->totals, DerivedName(to, "_totals"), from, to);
		RenameWithIndexes(e->log, DerivedName(to, e->mode == Mode::Log ? "_log" : "_slots"), from, to);
	}
	if (OidIsValid(e->crossings))
		RenameWithIndexes(e->crossings, DerivedName(to, "_crossings"), from, to);
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
};

void
Keep(const CatalogEntry *c, Kept *k)
{
	k->options = CurrentOptions(c->name);
	k->grantees = c->owns_target ? SelectGrantees(c->target) : NIL;
	k->crossings = c->crossings;
	if (OidIsValid(c->crossings))
		SetCrossings(c->name, InvalidOid);
}

void
GiveBack(const char *name, const Kept *k)
{
	CatalogEntry *e = LookupCounter(name);
	CounterDef *def = BuildShape(e)->def;
	RestoreOptions(name, k->options, def);
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

void
AlterDefinition(const char *name, const char *definition, const char *mode)
{
	RequireReadCommitted("counters.alter_counter()");
	if (definition == nullptr)
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("counter \"%s\": the definition is null", name)));
	/* (writers wait until the transaction ends: the counter is dropped and declared again in it) */
	Change change;
	CatalogEntry *c = BeginChange(&change, name, ShareRowExclusiveLock, AccessExclusiveLock);
	if (IsSink(c->source))
		RefuseSinkRecount(c, "redefined");
	Kept kept;
	Keep(c, &kept);
	/* (the owner stays: the new definition's code runs as the counter's owner, not as whoever changes it) */
	Oid owner = CounterOwner(c);
	/* (the new definition is parsed with the caller's search_path, resolved as the caller: out of the scope again) */
	EndChange(&change);
	DropCounter(name);
	DeclareCounter(name, definition, c->owns_target ? nullptr : QualifiedName(c->target),
	               mode != nullptr ? mode : ModeName(c->mode), owner, Names::Caller);
	GiveBack(name, &kept);
}

/* A counter dropped to be declared again (RetypeCounter): what declaring it again takes. */
struct Saved {
	char *name;
	char *definition; /* deparsed with search_path pinned */
	char *target;     /* NULL: a table of its own */
	const char *mode;
	Oid owner;
	Kept kept;
};

void *
SaveAndDrop(const CatalogEntry *e)
{
	RequireMaintainer(e);
	Saved *s = (Saved *)palloc0(sizeof(Saved));
	s->name = pstrdup(e->name);
	s->target = e->owns_target ? nullptr : pstrdup(QualifiedName(e->target));
	s->mode = ModeName(e->mode);
	s->owner = CounterOwner(e);
	Keep(e, &s->kept);
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
	UnpinSettings(level);
	DropCounter(e->name);
	return s;
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
	DeclareCounter(s->name, s->definition, s->target, s->mode, s->owner, Names::Pinned);
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
	CatalogEntry *c = LookupCounter(name);
	RequireMaintainer(c);
	citus::RefuseFeature(name, c->source,
	                     "alter_counter_concurrently() (it goes through log mode; alter_counter() works)");
	if (IsSink(c->source))
		RefuseSinkRecount(c, "redefined");
	if (!c->owns_target)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("counter \"%s\" cannot be redefined concurrently: it is kept in columns of %s", name,
		                       QualifiedName(c->target)),
		                errhint("Use counters.alter_counter('%s', definition => ...): it locks writers out while it "
		                        "runs.",
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
	EndChange(&change);
	DropCounter(name);
	RenameCounter(tmp, name);
	GiveBack(name, &kept);
	ConcurrentStep(name, nullptr);
}

void
DropCounter(const char *name)
{
	/* (writers in flight apply their deltas first, to the relations dropped here) */
	Change change;
	CatalogEntry *c = BeginChange(&change, name, ShareRowExclusiveLock, AccessExclusiveLock);
	if (citus::IsCitusRelation(c->source))
		citus::BeginDistributedChange();
	Oid parent = OidIsValid(c->query) && SearchSysCacheExists1(RELOID, ObjectIdGetDatum(c->query))
	                 ? AnalyzeView(c->name, c->query, CounterOwner(c))->parent
	                 : InvalidOid;
	Unregister(c);
	if (ReadCatalogOfSource(c->source) == NIL)
		Detach(c->source);
	if (!c->owns_target)
		AttachTarget(c->target);
	if (OidIsValid(parent)) {
		/* (the parent's triggers stay while another counter joins it, whose cache must forget this one) */
		CacheInvalidateRelcacheByRelid(parent);
		if (!JoinsParent(parent))
			DetachParent(parent);
	}
	SpiConnect();
	Execute(DropStatement("VIEW", c->query), SPI_OK_UTILITY);
	if (c->mode != Mode::Exact) {
		Execute(DropStatement("VIEW", c->target), SPI_OK_UTILITY);
		Execute(DropStatement("TABLE", c->log), SPI_OK_UTILITY);
		Execute(DropStatement("TABLE", c->totals), SPI_OK_UTILITY);
	} else if (c->owns_target)
		Execute(DropStatement("TABLE", c->target), SPI_OK_UTILITY);
	if (OidIsValid(c->crossings))
		Execute(DropStatement("TABLE", c->crossings), SPI_OK_UTILITY);
	SPI_finish();
	EndChange(&change);
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
		AttachParent(lfirst_oid(pc));
	foreach (pc, ReadCatalogOfSource(source)) {
		CatalogEntry *e = (CatalogEntry *)lfirst(pc);
		if (!e->owns_target)
			AttachTarget(e->target);
		else
			GuardOwnTables(e);
	}
	bool sink = IsSink(source);
	if (citus::IsCitusRelation(source))
		citus::BeginDistributedChange();
	List *rels = find_all_inheritors(source, NoLock, nullptr);
	SpiConnect();
	ListCell *lc;
	foreach (lc, rels) {
		Oid rel = lfirst_oid(lc);
		for (int t = 0; t < CAPTURE_TRIGGERS; t++) {
			bool sink_trigger = t == SINK_TRIGGER || t == SINK_GUARD_TRIGGER || t == SINK_END_TRIGGER;
			bool row_trigger = t == INSERT_TRIGGER || t == UPDATE_TRIGGER || t == DELETE_TRIGGER;
			if (t == TRUNCATE_TRIGGER && get_rel_relkind(rel) != RELKIND_RELATION)
				continue; /* a partitioned table has no rows of its own: its leaves' triggers fire */
			/* (a sink's row trigger loads the library before the statement's AFTER triggers: no counters_begin) */
			bool wanted = sink ? !row_trigger && t != BEGIN_TRIGGER : !sink_trigger;
			bool present = TriggerFunction(rel, CaptureTriggerName(t)) == CaptureFunction();
			if (wanted && !OidIsValid(TriggerFunction(rel, CaptureTriggerName(t))))
				Execute(CreateTriggerStatement(t, rel, rel == source), SPI_OK_UTILITY);
			else if (!wanted && present)
				Execute(DropTriggerStatement(t, rel), SPI_OK_UTILITY);
		}
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
		CatalogEntry *e = (CatalogEntry *)lfirst(lc);
		if (e->source == parent || !OidIsValid(e->query) || !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(e->query)))
			continue;
		if (AnalyzeView(e->name, e->query, CounterOwner(e))->parent == parent)
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
		CatalogEntry *e = (CatalogEntry *)lfirst(lc);
		if (!OidIsValid(e->query) || !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(e->query)))
			continue;
		Oid parent = AnalyzeView(e->name, e->query, CounterOwner(e))->parent;
		if (OidIsValid(parent))
			parents = list_append_unique_oid(parents, parent);
	}
	return parents;
}

void
GuardOwnTables(const CatalogEntry *e)
{
	Oid tables[4] = {ApplyModeOf(e) == ApplyMode::Exact ? e->target : InvalidOid, e->totals, e->log, e->crossings};
	SpiConnect();
	for (int i = 0; i < 4; i++)
		if (OidIsValid(tables[i]) && !OidIsValid(TriggerFunction(tables[i], guard_trigger)))
			Execute(CreateGuardTriggerStatement(tables[i]), SPI_OK_UTILITY);
	SPI_finish();
}

Oid
WindowCrossings(const CatalogEntry *e, bool window)
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
	EnterOwner(&as, CounterOwner(e), PIN_SEARCH_PATH);
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
KeepCrossings(const CatalogEntry *e, Oid crossings, const CounterDef *def)
{
	WindowConfig *w = ReadWindow(LookupCounter(e->name));
	OwnerScope as;
	EnterOwner(&as, CounterOwner(e), PIN_SEARCH_PATH);
	SpiConnect();
	if (w == nullptr)
		Execute(DropStatement("TABLE", crossings), SPI_OK_UTILITY);
	else {
		/* the prefixes: the key columns but the bucket, in byte order (as the statement sorts a prefix's keys) */
		Datum *names = (Datum *)palloc(sizeof(Datum) * Max(def->nkeys, 1));
		int n = 0;
		for (int k = 0; k < def->nkeys; k++)
			if (strcmp(def->keys[k].column_name, w->bucket) != 0) {
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
		CatalogEntry *e = (CatalogEntry *)lfirst(lc);
		if (e->owns_target || e->target != target || !OidIsValid(e->query) ||
		    !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(e->query)))
			continue;
		CounterDef *def = AnalyzeView(e->name, e->query, CounterOwner(e));
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
AttachParent(Oid parent)
{
	SpiConnect();
	for (int t = 0; t < PARENT_TRIGGERS; t++)
		if (!OidIsValid(TriggerFunction(parent, ParentTriggerName(t))))
			Execute(CreateParentTriggerStatement(t, parent), SPI_OK_UTILITY);
	SPI_finish();
}

void
DetachParent(Oid parent)
{
	SpiConnect();
	for (int t = 0; t < PARENT_TRIGGERS; t++)
		if (TriggerFunction(parent, ParentTriggerName(t)) == CaptureFunction())
			Execute(psprintf("DROP TRIGGER %s ON %s", ParentTriggerName(t), QualifiedName(parent)), SPI_OK_UTILITY);
	SPI_finish();
}

bool
IsSink(Oid rel)
{
	return TriggerFunction(rel, CaptureTriggerName(SINK_TRIGGER)) == CaptureFunction();
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
	if (ReadCatalogOfSource(source) == NIL)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("table %s cannot be a sink: no counter is declared on it", name),
		                errhint("Declare its counters first: a sink's rows are counted, then dropped.")));
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
	EnterOwner(&owner, RelationOwner(source), PIN_ROW_SECURITY);
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

void
RefuseSinkRecount(const CatalogEntry *e, const char *what)
{
	ereport(ERROR,
	        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	         errmsg("counter \"%s\" cannot be %s: its source %s is a sink", e->name, what, QualifiedName(e->source)),
	         errdetail("The rows a sink counted were never stored: there is nothing to recount them from.")));
}

Oid
TriggerFunction(Oid rel, const char *name)
{
	Relation triggers = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData keys[2];
	ScanKeyInit(&keys[0], Anum_pg_trigger_tgrelid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(rel));
	ScanKeyInit(&keys[1], Anum_pg_trigger_tgname, BTEqualStrategyNumber, F_NAMEEQ, CStringGetDatum(name));
	SysScanDesc scan = systable_beginscan(triggers, TriggerRelidNameIndexId, true, nullptr, 2, keys);
	HeapTuple tup = systable_getnext(scan);
	Oid function = HeapTupleIsValid(tup) ? ((Form_pg_trigger)GETSTRUCT(tup))->tgfoid : InvalidOid;
	systable_endscan(scan);
	table_close(triggers, AccessShareLock);
	return function;
}

Oid
CaptureFunction()
{
	List *name = list_make2(makeString(pstrdup("counters")), makeString(pstrdup("capture")));
	return LookupFuncName(name, 0, nullptr, false);
}

} // namespace counters
