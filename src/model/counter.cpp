/*
 * counter.cpp: what a counter's row says beyond its options (options.cpp): its mode by name, its relations and their
 * order, whether it may write here, the names it derives (definition view, relations, triggers, columns) and the
 * trigger functions that say what a table is (a sink).
 */
#include "model/model.hpp"

#include "model/model.hpp"

extern "C" {
#include "access/genam.h"
#include "catalog/pg_type.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "access/stratnum.h"
#include "access/xlog.h"
#include "utils/rel.h"
#include "access/table.h"
#include "catalog/pg_subscription.h"
#include "catalog/pg_subscription_rel.h"
#include "catalog/pg_trigger.h"
#include "mb/pg_wchar.h"
#include "parser/parse_func.h"
#include "utils/fmgroids.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/regproc.h"
}

namespace counters {

/* The modes by name: the one table (counters.counter.mode, alter_counter's argument, "building"). */
namespace {
const struct {
	Mode mode;
	const char *name;
} MODES[] = {{Mode::Exact, "exact"}, {Mode::Log, "log"}, {Mode::Sharded, "sharded"}};
} // namespace

const char *
ModeName(Mode mode)
{
	for (const auto &m : MODES)
		if (m.mode == mode)
			return m.name;
	return "exact";
}

bool
LookupModeName(const char *name, Mode *mode)
{
	for (const auto &m : MODES)
		if (name != nullptr && strcmp(m.name, name) == 0) {
			*mode = m.mode;
			return true;
		}
	return false;
}

/*
 * Log and sharded mode have pending rows (a log, slots) that compaction folds into their totals; exact mode writes
 * its values (its counter table, or counter-cache columns of an existing table) at once.
 */
bool
HasPending(Mode mode)
{
	return mode == Mode::Log || mode == Mode::Sharded;
}

Mode
ParseModeName(const char *name)
{
	Mode mode = Mode::Exact;
	(void)LookupModeName(name, &mode);
	return mode;
}

bool
IsSink(Oid rel)
{
	return TriggerFunction(rel, CaptureTriggerName(SINK_TRIGGER)) == CaptureFunction();
}

Oid
TriggerFunction(Oid rel, const char *name, char *enabled)
{
	Relation triggers = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData keys[2];
	ScanKeyInit(&keys[0], Anum_pg_trigger_tgrelid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(rel));
	ScanKeyInit(&keys[1], Anum_pg_trigger_tgname, BTEqualStrategyNumber, F_NAMEEQ, CStringGetDatum(name));
	SysScanDesc scan = systable_beginscan(triggers, TriggerRelidNameIndexId, true, nullptr, 2, keys);
	HeapTuple tup = systable_getnext(scan);
	Oid function = HeapTupleIsValid(tup) ? ((Form_pg_trigger)GETSTRUCT(tup))->tgfoid : InvalidOid;
	if (enabled != nullptr)
		*enabled = HeapTupleIsValid(tup) ? ((Form_pg_trigger)GETSTRUCT(tup))->tgenabled : '\0';
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

namespace {

/* The valid ones of `n` relations, in their order. */
int
ValidRelations(const Oid *named, int n, Oid *rels)
{
	int valid = 0;
	for (int i = 0; i < n; i++)
		if (OidIsValid(named[i]))
			rels[valid++] = named[i];
	return valid;
}

} // namespace

int
CounterRelations(const Counter *e, Oid *rels)
{
	Oid ordered[5] = {e->query, e->target, e->log, e->totals, e->crossings};
	return ValidRelations(ordered, 5, rels);
}

int
RequiredRelations(const Counter *e, Oid *rels)
{
	Oid named[5] = {e->source, e->target, e->query, e->totals, e->log};
	return ValidRelations(named, 5, rels);
}

bool
RelationsGone(const Counter *e)
{
	Oid rels[COUNTER_RELATIONS];
	int n = RequiredRelations(e, rels);
	for (int i = 0; i < n; i++)
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(rels[i])))
			return true;
	return false;
}

int
CreatedRelations(const Counter *e, CreatedRelation *out)
{
	bool exact = e->mode == Mode::Exact;
	CreatedRelation all[6] = {{e->query, "VIEW"},
	                          {exact ? InvalidOid : e->target, "VIEW"},
	                          {e->log, "TABLE"},
	                          {e->totals, "TABLE"},
	                          {exact && e->owns_target ? e->target : InvalidOid, "TABLE"},
	                          {e->crossings, "TABLE"}};
	int n = 0;
	for (int i = 0; i < 6; i++)
		if (OidIsValid(all[i].rel))
			out[n++] = all[i];
	return n;
}

const char *
FollowedSubscription(const Counter *e, Oid *table)
{
	CreatedRelation rels[COUNTER_RELATIONS];
	int n = CreatedRelations(e, rels);
	Relation catalog = table_open(SubscriptionRelRelationId, AccessShareLock);
	const char *subscription = nullptr;
	for (int i = 0; i < n && subscription == nullptr; i++) {
		if (strcmp(rels[i].kind, "TABLE") != 0 || rels[i].rel == e->crossings)
			continue;
		ScanKeyData key;
		ScanKeyInit(&key, Anum_pg_subscription_rel_srrelid, BTEqualStrategyNumber, F_OIDEQ,
		            ObjectIdGetDatum(rels[i].rel));
		SysScanDesc scan = systable_beginscan(catalog, SubscriptionRelSrrelidSrsubidIndexId, true, nullptr, 1, &key);
		HeapTuple tuple = systable_getnext(scan);
		if (HeapTupleIsValid(tuple)) {
			Oid subid = ((Form_pg_subscription_rel)GETSTRUCT(tuple))->srsubid;
			HeapTuple sub = SearchSysCache1(SUBSCRIPTIONOID, ObjectIdGetDatum(subid));
			subscription = HeapTupleIsValid(sub) ? pstrdup(NameStr(((Form_pg_subscription)GETSTRUCT(sub))->subname))
			                                     : psprintf("%u", subid);
			if (HeapTupleIsValid(sub))
				ReleaseSysCache(sub);
			*table = rels[i].rel;
		}
		systable_endscan(scan);
	}
	table_close(catalog, AccessShareLock);
	return subscription;
}

bool
MayWriteHere(const Counter *e, bool named, const char *what)
{
	if (RecoveryInProgress())
		ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
		                named ? errmsg("cannot %s counter \"%s\" during recovery", what, e->name)
		                      : errmsg("cannot %s counters during recovery", what),
		                errhint("Run it on the primary: a standby's counters are the primary's, as replicated.")));
	Oid table;
	const char *subscription = FollowedSubscription(e, &table);
	if (subscription == nullptr)
		return true;
	if (named)
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("cannot %s counter \"%s\": it is replicated from a publisher (table %s, subscription "
		                "\"%s\")",
		                what, e->name, QualifiedName(table), subscription),
		         errhint("Run it on the publisher, whose changes replication brings: see docs/replication.md.")));
	return false;
}

char *
DefinitionViewName(const char *counter)
{
	return psprintf("%s_definition", counter);
}

char *
DerivedName(const char *base, const char *suffix)
{
	int room = NAMEDATALEN - 1 - (int)strlen(suffix);
	int len = pg_mbcliplen(base, (int)strlen(base), room);
	return psprintf("%.*s%s", len, base, suffix);
}

const char *
ColumnName(const CounterDef *def, int i)
{
	const ColumnDef *cd = &def->columns[i];
	return cd->is_key ? def->keys[cd->index].column_name : def->values[cd->index].column_name;
}

int
DefinitionColumn(const CounterDef *def, const char *column, bool key)
{
	for (int i = 0; i < def->ncolumns; i++)
		if (def->columns[i].is_key == key && strcmp(ColumnName(def, i), column) == 0)
			return def->columns[i].index;
	return -1;
}

const char *
CaptureTriggerName(int trigger)
{
	/*
	 * (The sink trigger returns NULL: the BEFORE INSERT row triggers named after it do not fire. "zz_" puts it after
	 * any other trigger whose name starts with a letter before z, a digit, an upper case letter or "_".)
	 */
	static const char *const names[] = {"counters_begin",           "counters_insert",   "counters_update",
	                                    "counters_delete",          "counters_truncate", "zz_counters_sink",
	                                    "counters_sink_guard",      "counters_sink_end", "counters_replica",
	                                    "counters_replica_truncate"};
	static_assert(lengthof(names) == CAPTURE_TRIGGERS, "a name for every capture trigger");
	return names[trigger];
}

const char *
ParentTriggerName(int trigger)
{
	static const char *const names[] = {"counters_parent_begin",   "counters_parent_row",
	                                    "counters_parent_insert",  "counters_parent_truncate",
	                                    "counters_parent_replica", "counters_parent_replica_truncate"};
	static_assert(lengthof(names) == PARENT_TRIGGERS, "a name for every parent trigger");
	return names[trigger];
}

/* The trigger on a counter's own tables that refuses their TRUNCATE (GuardCounterRelation). */
const char *const guard_trigger = "counters_guard";

/* The trigger on an existing table that keeps counter-cache columns: its rows' keys changing (see TargetKeyRow). */
const char *const target_key_trigger = "counters_target_key";

char *
KeyNames(const CounterDef *def)
{
	StringInfoData keys;
	initStringInfo(&keys);
	for (int k = 0; k < def->nkeys; k++)
		appendStringInfo(&keys, "%s%s", k ? ", " : "", quote_identifier(def->keys[k].column_name));
	return keys.data;
}

} // namespace counters
