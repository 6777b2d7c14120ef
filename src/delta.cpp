/*
 * delta.cpp: the delta table of one counter during a statement: for every key the statement touched, the summed
 * contributions of its rows to each value column. An open-addressing hash table (PostgreSQL's simplehash.h) keyed by
 * the key's values, compared with the key types' equality and hashed with their hash functions (pass-by-value
 * integer-like keys are hashed and compared as the Datum itself).
 *
 * Integer columns sum in 128 bits and numeric columns in numeric; what is applied is taken out of the entry
 * (TakeInt64, TakeNumeric), so an entry left nonzero after a pass still has something to apply.
 */
#include "capture.hpp"

extern "C" {
#include "common/hashfn.h"
#include "port/pg_bitutils.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
}

namespace counters {

namespace {

/* A 64-bit mixer (the splitmix64 finalizer) for pass-by-value keys hashed as they are. */
inline uint32
MixDatum(Datum d)
{
	uint64 x = (uint64)d;
	x ^= x >> 30;
	x *= UINT64CONST(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64CONST(0x94d049bb133111eb);
	x ^= x >> 31;
	return (uint32)x;
}

inline uint32
HashKey(const CounterRun *r, DeltaKey key)
{
	const CompiledCounter *c = r->c;
	uint32 h = 0;
	for (int i = 0; i < c->def->nkeys; i++) {
		uint32 k;
		if (key.nulls[i])
			k = 0x9e3779b9U;
		else if (c->key_fast[i])
			k = MixDatum(key.values[i]);
		else
			k = DatumGetUInt32(FunctionCall1Coll(&c->key_hash[i], c->def->keys[i].collation, key.values[i]));
		h = hash_combine(h, k);
	}
	return h;
}

inline bool
KeysEqual(const CounterRun *r, DeltaKey a, DeltaKey b)
{
	const CompiledCounter *c = r->c;
	for (int i = 0; i < c->def->nkeys; i++) {
		if (a.nulls[i] || b.nulls[i]) {
			if (a.nulls[i] != b.nulls[i])
				return false;
			continue;
		}
		if (c->key_fast[i]) {
			if (a.values[i] != b.values[i])
				return false;
		} else if (!DatumGetBool(FunctionCall2Coll(&c->key_eq[i], c->def->keys[i].collation, a.values[i], b.values[i])))
			return false;
	}
	return true;
}

} // namespace

#define SH_PREFIX deltas
#define SH_ELEMENT_TYPE DeltaEntry
#define SH_KEY_TYPE DeltaKey
#define SH_KEY key
#define SH_HASH_KEY(tb, k) HashKey((const CounterRun *)(tb)->private_data, k)
#define SH_EQUAL(tb, a, b) KeysEqual((const CounterRun *)(tb)->private_data, a, b)
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a) a->hash
#define SH_SCOPE static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

void
DeltaStart(CounterRun *r)
{
	r->deltas = deltas_create(r->delta_cxt, 64, r);
}

DeltaEntry *
DeltaOfRowKey(CounterRun *r)
{
	bool found;
	DeltaEntry *e = deltas_insert(r->deltas, r->row_key, &found);
	if (found)
		return e;
	/* The entry holds the row's key for now: give it a copy of its own, and zero sums. */
	const CompiledCounter *c = r->c;
	int nkeys = c->def->nkeys;
	MemoryContext old = MemoryContextSwitchTo(r->delta_cxt);
	e->key.values = (Datum *)palloc(sizeof(Datum) * nkeys);
	e->key.nulls = (bool *)palloc(sizeof(bool) * nkeys);
	for (int i = 0; i < nkeys; i++) {
		e->key.nulls[i] = r->row_key.nulls[i];
		e->key.values[i] =
		    r->row_key.nulls[i] ? (Datum)0 : datumCopy(r->row_key.values[i], c->key_byval[i], c->key_typlen[i]);
	}
	e->ints = (int128 *)palloc0(sizeof(int128) * c->def->nvalues);
	e->numerics = (Datum *)palloc0(sizeof(Datum) * c->def->nvalues);
	MemoryContextSwitchTo(old);
	return e;
}

void
DeltaAddNumeric(CounterRun *r, DeltaEntry *e, int v, int sign, Datum value)
{
	MemoryContext old = MemoryContextSwitchTo(r->delta_cxt);
	Datum sum;
	if (e->numerics[v] == (Datum)0)
		sum = sign < 0 ? DirectFunctionCall1(numeric_uminus, value) : datumCopy(value, false, -1);
	else {
		sum = DirectFunctionCall2(sign < 0 ? numeric_sub : numeric_add, e->numerics[v], value);
		pfree(DatumGetPointer(e->numerics[v]));
	}
	e->numerics[v] = sum;
	MemoryContextSwitchTo(old);
}

uint32
DeltaCount(const CounterRun *r)
{
	return r->deltas->members;
}

bool
DeltaIsZero(const CounterDef *def, const DeltaEntry *e)
{
	for (int v = 0; v < def->nvalues; v++) {
		if (def->values[v].accum == AccumKind::Int64) {
			if (e->ints[v] != 0)
				return false;
		} else if (e->numerics[v] != (Datum)0 &&
		           !DatumGetBool(DirectFunctionCall2(numeric_eq, e->numerics[v], NumericGetDatum(int64_to_numeric(0)))))
			return false;
	}
	return true;
}

DeltaEntry **
NonzeroDeltas(CounterRun *r, uint32 *n)
{
	DeltaEntry **list = (DeltaEntry **)palloc(sizeof(DeltaEntry *) * Max(r->deltas->members, 1));
	*n = 0;
	deltas_iterator it;
	deltas_start_iterate(r->deltas, &it);
	DeltaEntry *e;
	while ((e = deltas_iterate(r->deltas, &it)) != nullptr)
		if (!DeltaIsZero(r->c->def, e))
			list[(*n)++] = e;
	return list;
}

namespace {

int
CompareDeltas(const void *pa, const void *pb, void *arg)
{
	const CompiledCounter *c = ((const CounterRun *)arg)->c;
	const DeltaEntry *a = *(DeltaEntry *const *)pa;
	const DeltaEntry *b = *(DeltaEntry *const *)pb;
	for (int i = 0; i < c->def->nkeys; i++) {
		if (a->key.nulls[i] || b->key.nulls[i]) {
			if (a->key.nulls[i] == b->key.nulls[i])
				continue;
			return a->key.nulls[i] ? 1 : -1; /* NULLS LAST, as ORDER BY */
		}
		int cmp = DatumGetInt32(
		    FunctionCall2Coll(&c->key_cmp[i], c->def->keys[i].collation, a->key.values[i], b->key.values[i]));
		if (cmp != 0)
			return cmp;
	}
	return 0;
}

} // namespace

void
SortDeltas(CounterRun *r, DeltaEntry **entries, uint32 n)
{
	if (n > 1)
		qsort_arg(entries, n, sizeof(DeltaEntry *), CompareDeltas, r);
}

/*
 * Take the part of a summed integer delta that fits in bigint, leaving the rest in the entry. Within a statement
 * integer deltas are summed in 128 bits; a net change beyond bigint (moving a row whose value is the smallest bigint,
 * say) is applied in more than one step, each moving the stored value towards its final value.
 */
int64
TakeInt64(DeltaEntry *e, int v)
{
	int128 d = e->ints[v];
	int64 part = d > (int128)PG_INT64_MAX ? PG_INT64_MAX : d < (int128)PG_INT64_MIN ? PG_INT64_MIN : (int64)d;
	e->ints[v] -= part;
	return part;
}

/* Take a numeric delta (NULL datum = zero), leaving zero in the entry. */
Datum
TakeNumeric(DeltaEntry *e, int v, Datum zero)
{
	Datum d = e->numerics[v] != (Datum)0 ? e->numerics[v] : zero;
	e->numerics[v] = (Datum)0;
	return d;
}

} // namespace counters
