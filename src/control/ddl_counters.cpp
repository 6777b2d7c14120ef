/*
 * ddl_counters.cpp: the counters a DDL statement on a table concerns, among the catalog's rows (ReadCatalog) -- those
 * that read it (its source, or the parent their rows join), keep their values in it, or keep a column in it -- for
 * the event triggers of ddl.cpp to refuse or follow what the statement does to them.
 */
#include "control/control.hpp"

namespace counters {

List *
CountersReading(List *catalog, Oid relid, Oid source)
{
	/* (the parent of a counter carries the parent triggers: only then is a definition analysed, as its owner) */
	bool parent = OidIsValid(TriggerFunction(relid, ParentTriggerName(PARENT_BEGIN_TRIGGER)));
	List *counters = NIL;
	ListCell *lc;
	foreach (lc, catalog) {
		Counter *e = (Counter *)lfirst(lc);
		if (e->source == relid || e->source == source || (parent && CounterParent(e) == relid))
			counters = lappend(counters, e);
	}
	return counters;
}

Counter *
CounterOfSource(List *catalog, Oid relid)
{
	List *counters = CountersReading(catalog, relid, relid);
	return counters != NIL ? (Counter *)linitial(counters) : nullptr;
}

const Counter *
CounterKeptIn(List *catalog, Oid relid)
{
	ListCell *lc;
	foreach (lc, catalog) {
		Counter *e = (Counter *)lfirst(lc);
		if (relid == e->target || relid == e->totals || relid == e->log || relid == e->crossings)
			return e;
	}
	return nullptr;
}

const Counter *
CounterOfColumn(List *catalog, Oid relid, const char *column)
{
	ListCell *lc;
	foreach (lc, catalog) {
		Counter *e = (Counter *)lfirst(lc);
		bool own = e->owns_target && (relid == e->target || relid == e->totals || relid == e->log);
		bool cache = !e->owns_target && relid == e->target;
		if (!own && !cache)
			continue;
		if (own && strcmp(column, "counters_slot") == 0)
			return e;
		const char **names = LayoutColumnsIn(e, relid)->names;
		for (int i = 0, n = LayoutOf(e)->ncolumns; i < n; i++)
			if (strcmp(names[i], column) == 0)
				return e;
	}
	return nullptr;
}

} // namespace counters
