/*
 * capture.hpp: one statement's way from rows to counters, shared by the files that make it up:
 *
 *   capture.cpp    rows of the statement's transition tables -> each counter's deltas (the universal formula)
 *   delta.cpp      the delta table of one counter: summed deltas per key
 *   apply.cpp      the deltas -> the counter's relation, keys in sorted order, one path per ApplyMode
 *   decisions.cpp  what a new value decides: bounds (an error), thresholds crossed (events, callbacks)
 */
#pragma once

#include "counters.hpp"

extern "C" {
#include "nodes/execnodes.h"
}

namespace counters {

/* A key of a counter: one value and null flag per key column, in definition order; the flags follow the values. */
struct DeltaKey {
	Datum *values;
	bool *nulls; /* == (bool *)(values + nkeys) */
};

/*
 * The summed delta of one key of one counter: 16 bytes in the hash table, pointing into one block of the delta
 * context laid out as
 *
 *     int128 ints[nvalues] | Datum numerics[nvalues] | Datum key[nkeys] | bool nulls[nkeys]
 *
 * Int64 columns sum in `ints` (128-bit: intermediate sums may exceed bigint), Numeric columns in `numerics` (NULL
 * datum = zero).
 */
struct DeltaEntry {
	Datum *key; /* the key's values */
	uint32 hash;
	char status; /* (the hash table's) */

	bool *
	KeyNulls(int nkeys) const
	{
		return (bool *)(key + nkeys);
	}
	Datum *
	Numerics(int nvalues) const
	{
		return key - nvalues;
	}
	int128 *
	Ints(int nvalues) const
	{
		return (int128 *)((char *)key - nvalues * (sizeof(int128) + sizeof(Datum)));
	}
};

struct deltas_hash; /* delta.cpp: a simplehash table of DeltaEntry */

/* One counter's state during a statement. */
struct CounterRun {
	CompiledCounter *c;
	ExprState *quals;
	ExprState **key_exprs;
	ExprState **arg_exprs;
	ExprState **filter_exprs;
	DeltaKey row_key;        /* the key of the row being counted */
	MemoryContext delta_cxt; /* the deltas (shared by the counters of one source) */
	deltas_hash *deltas;
	char *arena; /* the entries' keys and sums are carved from blocks of delta_cxt */
	Size arena_left;
	/*
	 * A counter through a parent row (def->parent): the parent rows of the rows being counted, by key (int64 -> a
	 * HeapTuple of the parent), the slot the expressions read the parent from (INNER_VAR), and a parent row given
	 * instead (when the parent's own write counts its children).
	 */
	HTAB *parents;
	TupleTableSlot *parent_slot;
	HeapTuple fixed_parent;
	Bitmapset *parent_attrs;    /* the parent's columns it reads (offset by FirstLowInvalidHeapAttributeNumber) */
	TupleTableSlot *child_slot; /* the source's rows, when the parent's write counts its children */
};

/* delta.cpp */
void DeltaStart(CounterRun *r);           /* a new, empty table in r->delta_cxt */
DeltaEntry *DeltaOfRowKey(CounterRun *r); /* r->row_key's entry, added (with a copy of the key) if new */
void DeltaAddNumeric(CounterRun *r, DeltaEntry *e, int v, int sign, Datum value);
uint32 DeltaCount(const CounterRun *r);
DeltaEntry **NonzeroDeltas(CounterRun *r, uint32 *n);           /* in no particular order */
void SortDeltas(CounterRun *r, DeltaEntry **entries, uint32 n); /* by key, in the keys' btree order, NULLS LAST */
bool DeltaIsZero(const CounterDef *def, const DeltaEntry *e);
int64 TakeInt64(const CounterDef *def, DeltaEntry *e, int v);
Datum TakeNumeric(const CounterDef *def, DeltaEntry *e, int v, Datum zero);

/* apply.cpp: apply the deltas of `n` counters in the order given, then announce their threshold crossings. */
void ApplyCounters(CounterRun **list, int n);

/*
 * decisions.cpp (CheckBounds and NoteCrossings are declared in counters.hpp: direct.cpp decides too). Crossings noted
 * while a statement's deltas are applied are collected in a list of their own: StartCrossings opens it and returns
 * the enclosing one (a callback's statement collects its own), TakeCrossings closes it, returning its crossings and
 * putting the enclosing list back.
 */
List *StartCrossings();
List *TakeCrossings(List *enclosing);
void AnnounceCrossings(List *crossings);
/*
 * The one announcer of crossings -- listed, repeating and window thresholds: NOTIFY "counters.<counter>" naming the
 * counter and `column` (NotifyCrossing), then the column's callback (InvalidOid: none; missing: set, but gone, which
 * is an error), as the owner: PrepareCallback checks it (kind: "threshold" or "window", for messages) and says
 * whether there is one to call, InvokeCallback calls it inside the owner's scope with the crossing's fields (counter,
 * key, column, old, new, threshold, direction, every, crossed; nulls[] per field).
 */
void NotifyCrossing(const char *counter, const char *column);
bool PrepareCallback(const CompiledCounter *c, const char *kind, const char *column, Oid callback, bool missing,
                     FmgrInfo *flinfo);
void InvokeCallback(const CompiledCounter *c, FmgrInfo *flinfo, const Datum *fields, const bool *nulls);
void InitDecisions();

} // namespace counters
