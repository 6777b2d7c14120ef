/*
 * target_key.cpp: the counter-cache key change -- a row of an existing table that keeps counter-cache columns takes
 * another key, and its counter columns are recounted for the new key (counters_target_key).
 */
#include "write/write.hpp"

extern "C" {
#include "access/heapam.h"
#include "commands/trigger.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace counters {

/*
 * counters_target_key: a row of an existing table that keeps counter-cache columns takes another key (an UPDATE of a
 * key column, such as ON UPDATE CASCADE from the row it counts for). Its counter columns count for its key: they are
 * set to the new key's values, recounted from the definition as the counter's owner (usually zeros: the cascade that
 * follows moves the source's rows, whose deltas then add to them). Else the row would carry the old key's values to
 * the new key, and the cascade add them again.
 */
HeapTuple
TargetKeyRow(TriggerData *td)
{
	Relation rel = td->tg_relation;
	Oid relid = RelationGetRelid(rel);
	HeapTuple old_tuple = td->tg_trigtuple;
	HeapTuple new_tuple = td->tg_newtuple;
	TupleDesc desc = RelationGetDescr(rel);
	/* (fired when a key column is set at all: most such updates set it to what it was) */
	bool changed = false;
	for (int i = 0; i < td->tg_trigger->tgnattr && !changed; i++) {
		AttrNumber attnum = td->tg_trigger->tgattr[i];
		bool old_null, new_null;
		Datum a = heap_getattr(old_tuple, attnum, desc, &old_null);
		Datum b = heap_getattr(new_tuple, attnum, desc, &new_null);
		Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
		changed = old_null != new_null || (!old_null && !datumIsEqual(a, b, att->attbyval, att->attlen));
	}
	if (!changed)
		return new_tuple;
	int level = PinSettings(PIN_SEARCH_PATH | PIN_OUTPUT);
	Datum *values = (Datum *)palloc0(sizeof(Datum) * desc->natts);
	bool *nulls = (bool *)palloc0(sizeof(bool) * desc->natts);
	bool *replace = (bool *)palloc0(sizeof(bool) * desc->natts);
	/* (the counters kept here, compiled: the entry's array stays while this row is recounted) */
	SourceCounters *tc = GetTargetCounters(relid);
	CompiledCounter *counters = tc->counters;
	int ncounters = tc->ncounters;
	for (int i = 0; i < ncounters; i++) {
		CompiledCounter *c = &counters[i];
		const CounterDef *def = c->def;
		Datum *keys = (Datum *)palloc(sizeof(Datum) * def->nkeys);
		char *key_nulls = (char *)palloc(sizeof(char) * def->nkeys);
		Oid *types = (Oid *)palloc(sizeof(Oid) * def->nkeys);
		bool moved = false;
		for (int k = 0; k < def->nkeys; k++) {
			AttrNumber attnum = get_attnum(relid, def->keys[k].column_name);
			bool old_null, new_null;
			Datum a = heap_getattr(old_tuple, attnum, desc, &old_null);
			keys[k] = heap_getattr(new_tuple, attnum, desc, &new_null);
			key_nulls[k] = new_null ? 'n' : ' ';
			types[k] = def->keys[k].type;
			Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
			moved |= old_null != new_null || (!old_null && !datumIsEqual(a, keys[k], att->attbyval, att->attlen));
		}
		if (!moved)
			continue;
		MemoryContext caller = CurrentMemoryContext;
		SpiConnect();
		OwnerScope scope;
		EnterOwner(&scope, c->auth, PIN_ROW_SECURITY);
		SPIPlanPtr plan = FetchPlan(c, PLAN_KEY_RECOUNT, def->nkeys, types);
		/* (the latest snapshot: the source's rows as committed, and as this transaction left them) */
		Snapshot latest = RegisterSnapshot(GetLatestSnapshot());
		int ret = SPI_execute_snapshot(plan, keys, key_nulls, latest, InvalidSnapshot, true, false, 1);
		UnregisterSnapshot(latest);
		LeaveOwner(&scope);
		if (ret != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "counters: recounting counter \"%s\" for a row's new key failed: %s", def->name,
			     SPI_result_code_string(ret));
		for (int v = 0; v < def->nvalues; v++) {
			AttrNumber attnum = get_attnum(relid, def->values[v].column_name);
			Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
			bool isnull;
			Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, v + 1, &isnull);
			MemoryContext old = MemoryContextSwitchTo(caller);
			values[attnum - 1] = isnull ? (Datum)0 : datumCopy(d, att->attbyval, att->attlen);
			MemoryContextSwitchTo(old);
			nulls[attnum - 1] = isnull;
			replace[attnum - 1] = true;
		}
		SPI_finish();
	}
	UnpinSettings(level);
	return heap_modify_tuple(new_tuple, desc, values, nulls, replace);
}

} // namespace counters
