/*
 * delta.cpp: the delta table of one counter during a statement: for every key the statement touched, the summed
 * contributions of its rows to each value column. An open-addressing hash table (PostgreSQL's simplehash.h) keyed by
 * the key's values, compared with the key types' equality and hashed with their hash functions (pass-by-value
 * integer-like keys are hashed and compared as the Datum itself).
 *
 * Integer columns sum in 128 bits and numeric columns in numeric; what is applied is taken out of the entry
 * (TakeInt64, TakeNumeric), so an entry left nonzero after a pass still has something to apply.
 */
#include "write/write.hpp"

extern "C" {
#include "common/hashfn.h"
#include "port/pg_bitutils.h"
#include "catalog/pg_type.h"
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

/* (a key's values, followed by its null flags) */
inline uint32
HashKey(const CounterRun *r, const Datum *key)
{
	const CompiledCounter *c = r->c;
	int nkeys = c->def->nkeys;
	const bool *nulls = (const bool *)(key + nkeys);
	uint32 h = 0;
	for (int i = 0; i < nkeys; i++) {
		uint32 k;
		if (nulls[i])
			k = 0x9e3779b9U;
		else if (c->key_fast[i])
			k = MixDatum(key[i]);
		else
			k = DatumGetUInt32(FunctionCall1Coll(&c->key_hash[i], c->def->keys[i].collation, key[i]));
		h = hash_combine(h, k);
	}
	return h;
}

/* Whether keys `a` and `b` are equal (a NULL equals a NULL), their column `skip` aside (-1: none). */
inline bool
KeysEqualBut(const CompiledCounter *c, const Datum *a, const Datum *b, int skip)
{
	int nkeys = c->def->nkeys;
	const bool *anulls = (const bool *)(a + nkeys);
	const bool *bnulls = (const bool *)(b + nkeys);
	for (int i = 0; i < nkeys; i++) {
		if (i == skip)
			continue;
		if (anulls[i] || bnulls[i]) {
			if (anulls[i] != bnulls[i])
				return false;
			continue;
		}
		if (c->key_fast[i]) {
			if (a[i] != b[i])
				return false;
		} else if (!DatumGetBool(FunctionCall2Coll(&c->key_eq[i], c->def->keys[i].collation, a[i], b[i])))
			return false;
	}
	return true;
}

inline bool
KeysEqual(const CounterRun *r, const Datum *a, const Datum *b)
{
	return KeysEqualBut(r->c, a, b, -1);
}

} // namespace

bool
SameKeysBut(const CompiledCounter *c, const DeltaEntry *a, const DeltaEntry *b, int skip)
{
	RequireOwnerScope(c->auth.role());
	return KeysEqualBut(c, a->key, b->key, skip);
}

bool
RowKeyIs(const CounterRun *r, const DeltaEntry *e)
{
	RequireOwnerScope(r->c->auth.role());
	return KeysEqual(r, r->row_key.values, e->key);
}

#define SH_PREFIX deltas
#define SH_ELEMENT_TYPE DeltaEntry
#define SH_KEY_TYPE Datum *
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
	if (r->undo != nullptr)
		memset(r->undo, 0, sizeof(ExtremeUndo) * r->c->def->nvalues); /* (their entries and copies are gone) */
	r->read_plans = nullptr;
	r->pairs = nullptr;
	r->npairs = 0;
	r->maxpairs = 0;
	r->arena = nullptr;
	r->arena_left = 0;
	r->arena_next = 512;
}

namespace {

/*
 * The memory of one entry: its sums, key values and null flags in one piece, so that reading an entry (summing,
 * sorting, applying) touches one place. Carved from blocks of the delta context, never freed one by one.
 */
void *
EntryMemory(CounterRun *r, Size size)
{
	size = MAXALIGN(size);
	if (r->arena_left < size) {
		/*
		 * Blocks grow from 512 bytes to 32 kB: a single-row statement's few entries fit in the context's first block,
		 * where a 32 kB block per counter was a separate allocation, returned to the system at the statement's end
		 * and faulted in again by the next one (ten counters: 15% of a single-row insert).
		 */
		Size block = Max(size, r->arena_next);
		r->arena_next = Min(r->arena_next * 2, (Size)32768);
		r->arena = (char *)MemoryContextAlloc(r->delta_cxt, block);
		r->arena_left = block;
	}
	void *p = r->arena;
	r->arena += size;
	r->arena_left -= size;
	return p;
}

} // namespace

DeltaEntry *
DeltaOfRowKey(CounterRun *r)
{
	bool found;
	DeltaEntry *e = deltas_insert(r->deltas, r->row_key.values, &found);
	if (found)
		return e;
	/* The entry points at the row's key for now: give it a block of its own, with zero sums. */
	const CompiledCounter *c = r->c;
	int nkeys = c->def->nkeys;
	int nvalues = c->def->nvalues;
	Size sums = (sizeof(int128) + sizeof(Datum)) * nvalues;
	char *mem = (char *)EntryMemory(r, sums + (sizeof(Datum) + sizeof(bool)) * nkeys);
	memset(mem, 0, sums);
	e->key = (Datum *)(mem + sums);
	bool *nulls = e->KeyNulls(nkeys);
	MemoryContext old = MemoryContextSwitchTo(r->delta_cxt);
	for (int i = 0; i < nkeys; i++) {
		nulls[i] = r->row_key.nulls[i];
		e->key[i] = nulls[i] ? (Datum)0 : datumCopy(r->row_key.values[i], c->key_byval[i], c->key_typlen[i]);
	}
	MemoryContextSwitchTo(old);
	return e;
}

void
DeltaAddNumeric(CounterRun *r, DeltaEntry *e, int v, int sign, Datum value)
{
	MemoryContext old = MemoryContextSwitchTo(r->delta_cxt);
	Datum *numerics = e->Numerics(r->c->def->nvalues);
	Datum sum;
	if (numerics[v] == (Datum)0)
		sum = sign < 0 ? DirectFunctionCall1(numeric_uminus, value) : datumCopy(value, false, -1);
	else {
		sum = DirectFunctionCall2(sign < 0 ? numeric_sub : numeric_add, numerics[v], value);
		pfree(DatumGetPointer(numerics[v]));
	}
	numerics[v] = sum;
	MemoryContextSwitchTo(old);
}

void
DeltaAddExtreme(CounterRun *r, DeltaEntry *e, int v, int sign, Datum value)
{
	const CompiledCounter *c = r->c;
	int nvalues = c->def->nvalues;
	Datum flag = sign < 0 ? EXTREME_REMOVED : EXTREME_ADDED;
	Datum *held = &e->Extremes(nvalues, v)[sign < 0 ? 1 : 0];
	Datum *flags = &e->Numerics(nvalues)[v];
	const ExtremeColumn *x = &c->extremes[v];
	ExtremeUndo *u = &r->undo[v];
	if (sign > 0 && u->armed && u->key == e->key && ExtremeCompare(c, v, value, u->value) == 0) {
		/* the value removed from the key just before comes back: the key's values are as they were */
		e->Extremes(nvalues, v)[1] = u->prev;
		*flags = u->had ? (*flags | EXTREME_REMOVED) : (*flags & ~EXTREME_REMOVED);
		u->armed = false;
		return;
	}
	u->armed = sign < 0;
	if (sign < 0) {
		u->key = e->key;
		u->had = (*flags & EXTREME_REMOVED) != 0;
		u->prev = *held;
		if (x->byval)
			u->value = value;
		else {
			/* (copied as datumCopy copies: an expanded array, say, flattened) */
			MemoryContext old = MemoryContextSwitchTo(r->delta_cxt);
			u->value = datumCopy(value, false, x->typlen);
			MemoryContextSwitchTo(old);
		}
	}
	if ((*flags & flag) != 0 && ExtremeCompare(c, v, value, *held) <= 0)
		return;
	if (x->byval)
		*held = value;
	else {
		/* (the value it replaces stays in the delta context until the deltas are applied) */
		MemoryContext old = MemoryContextSwitchTo(r->delta_cxt);
		*held = datumCopy(value, false, x->typlen);
		MemoryContextSwitchTo(old);
	}
	*flags |= flag;
}

namespace {

/* A changed pair of entry `e`'s key: `net` rows with value `x` in distinct column `v`. */
void
AddPair(CounterRun *r, DeltaEntry *e, int v, int64 net, Datum x)
{
	const ExtremeColumn *col = &r->c->extremes[v];
	MemoryContext old = MemoryContextSwitchTo(r->delta_cxt);
	if (r->npairs == r->maxpairs) {
		r->maxpairs = Max(r->maxpairs * 2, 16);
		r->pairs = r->pairs == nullptr ? (PairChange *)palloc(sizeof(PairChange) * r->maxpairs)
		                               : (PairChange *)repalloc(r->pairs, sizeof(PairChange) * r->maxpairs);
	}
	r->pairs[r->npairs++] = PairChange{e->key, v, net, col->byval ? x : datumCopy(x, false, col->typlen)};
	MemoryContextSwitchTo(old);
	/* (the key has something to apply for the column until SumPairs finds its pairs cancel out) */
	e->Numerics(r->c->def->nvalues)[v] = 1;
}

} // namespace

void
DeltaAddPair(CounterRun *r, DeltaEntry *e, int v, int sign, Datum x)
{
	AddPair(r, e, v, sign, x);
}

/*
 * A statement's deltas `from` added to those held in `into` (a deferred counter's, deferred.cpp): each key's sums
 * added, the more extreme of each extreme column's added and removed values kept (a removal that reaches the value
 * stored when they are applied re-reads the key's rows, which by then hold every change of both), a distinct count's
 * changed pairs appended (SumPairs sums them once they are applied). `from` is left as SumPairs leaves it; `into` takes
 * copies of everything, in its own context. As the counter's owner (keys are hashed and compared).
 */
void
DeltaMerge(CounterRun *into, CounterRun *from)
{
	const CompiledCounter *c = from->c;
	RequireOwnerScope(c->auth.role());
	const CounterDef *def = c->def;
	int nkeys = def->nkeys, nvalues = def->nvalues;
	SumPairs(from);
	deltas_iterator it;
	deltas_start_iterate(from->deltas, &it);
	DeltaEntry *e;
	while ((e = deltas_iterate(from->deltas, &it)) != nullptr) {
		if (DeltaIsZero(def, e))
			continue;
		into->row_key.values = e->key;
		into->row_key.nulls = e->KeyNulls(nkeys);
		DeltaEntry *to = DeltaOfRowKey(into);
		const Datum *numerics = e->Numerics(nvalues);
		for (int v = 0; v < nvalues; v++) {
			const ValueDef *vd = &def->values[v];
			if (vd->kind == ValueKind::Distinct) {
				uint32 n;
				const PairChange *pairs = PairsOf(from, e, v, &n);
				for (uint32 i = 0; i < n; i++)
					AddPair(into, to, v, pairs[i].net, pairs[i].x);
			} else if (vd->accum == AccumKind::Int64)
				to->Ints(nvalues)[v] += e->Ints(nvalues)[v];
			else if (vd->accum == AccumKind::Numeric) {
				if (numerics[v] != (Datum)0)
					DeltaAddNumeric(into, to, v, 1, numerics[v]);
			} else {
				const ExtremeColumn *x = &c->extremes[v];
				Datum *flags = &to->Numerics(nvalues)[v];
				for (int side = 0; side < 2; side++) {
					Datum flag = side == 0 ? EXTREME_ADDED : EXTREME_REMOVED;
					Datum value;
					if (!ExtremeOf(def, e, v, flag, &value))
						continue;
					Datum *held = &to->Extremes(nvalues, v)[side];
					if ((*flags & flag) != 0 && ExtremeCompare(c, v, value, *held) <= 0)
						continue;
					MemoryContext old = MemoryContextSwitchTo(into->delta_cxt);
					*held = x->byval ? value : datumCopy(value, false, x->typlen);
					MemoryContextSwitchTo(old);
					*flags |= flag;
				}
			}
		}
	}
}

namespace {

/* Pairs in order: by entry, column, then value in the column's btree order. */
int
ComparePairs(const void *pa, const void *pb, void *arg)
{
	const CompiledCounter *c = (const CompiledCounter *)arg;
	const PairChange *a = (const PairChange *)pa;
	const PairChange *b = (const PairChange *)pb;
	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	if (a->v != b->v)
		return a->v < b->v ? -1 : 1;
	return ExtremeCompare(c, a->v, a->x, b->x);
}

} // namespace

void
SumPairs(CounterRun *r)
{
	if (r->npairs == 0)
		return;
	const CompiledCounter *c = r->c;
	int nvalues = c->def->nvalues;
	qsort_arg(r->pairs, r->npairs, sizeof(PairChange), ComparePairs, (void *)c);
	uint32 out = 0;
	for (uint32 i = 0; i < r->npairs;) {
		PairChange sum = r->pairs[i];
		uint32 j = i + 1;
		for (; j < r->npairs && r->pairs[j].key == sum.key && r->pairs[j].v == sum.v &&
		       ExtremeCompare(c, sum.v, r->pairs[j].x, sum.x) == 0;
		     j++)
			sum.net += r->pairs[j].net;
		/* the entry's first changed pair of the column (its number + 1), or 0: nothing changed */
		/* (an entry's numerics precede its key: DeltaEntry::Numerics) */
		Datum *first = &(sum.key - nvalues)[sum.v];
		if (out == 0 || r->pairs[out - 1].key != sum.key || r->pairs[out - 1].v != sum.v)
			*first = 0;
		if (sum.net != 0) {
			if (*first == 0)
				*first = (Datum)out + 1;
			r->pairs[out++] = sum;
		}
		i = j;
	}
	r->npairs = out;
}

const PairChange *
PairsOf(const CounterRun *r, const DeltaEntry *e, int v, uint32 *n)
{
	Datum first = e->Numerics(r->c->def->nvalues)[v];
	*n = 0;
	if (first == 0)
		return nullptr;
	const PairChange *p = &r->pairs[first - 1];
	while (first - 1 + *n < r->npairs && p[*n].key == e->key && p[*n].v == v)
		(*n)++;
	return p;
}

bool
ExtremeOf(const CounterDef *def, const DeltaEntry *e, int v, Datum flag, Datum *value)
{
	if ((e->Numerics(def->nvalues)[v] & flag) == 0)
		return false;
	*value = e->Extremes(def->nvalues, v)[flag == EXTREME_REMOVED ? 1 : 0];
	return true;
}

bool
TakeExtreme(const CounterDef *def, DeltaEntry *e, int v, Datum flag, Datum *value)
{
	if (!ExtremeOf(def, e, v, flag, value))
		return false;
	e->Numerics(def->nvalues)[v] &= ~flag;
	return true;
}

void
ForgetRemovals(const CounterDef *def, DeltaEntry *e)
{
	for (int v = 0; v < def->nvalues; v++)
		if (def->values[v].accum == AccumKind::Extreme)
			e->Numerics(def->nvalues)[v] &= ~EXTREME_REMOVED;
		else if (def->values[v].kind == ValueKind::Distinct)
			e->Numerics(def->nvalues)[v] = 0;
}

uint32
DeltaCount(const CounterRun *r)
{
	return r->deltas->members;
}

bool
DeltaIsZero(const CounterDef *def, const DeltaEntry *e)
{
	const int128 *ints = e->Ints(def->nvalues);
	const Datum *numerics = e->Numerics(def->nvalues);
	for (int v = 0; v < def->nvalues; v++) {
		if (def->values[v].accum == AccumKind::Int64) {
			/* (a distinct count's changed pairs are something to apply: SumPairs) */
			if (ints[v] != 0 || (def->values[v].kind == ValueKind::Distinct && numerics[v] != 0))
				return false;
		} else if (def->values[v].accum == AccumKind::Extreme) {
			if (numerics[v] != 0)
				return false;
		} else if (numerics[v] != (Datum)0 &&
		           !DatumGetBool(DirectFunctionCall2(numeric_eq, numerics[v], NumericGetDatum(int64_to_numeric(0)))))
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

/*
 * Sorting: an entry's first two key values are copied next to it, so that most comparisons read the array being
 * sorted and not the entries; integer-like keys compare as the signed integers they hold.
 */
struct SortItem {
	Datum k[2];
	bool null[2];
	DeltaEntry *e;
};

/* Whether key `i` sorts as the signed integer its Datum holds ("char" sorts unsigned: not it). */
inline bool
SortsAsInteger(const CompiledCounter *c, int i)
{
	return c->key_fast[i] && c->def->keys[i].type != CHAROID;
}

inline int
CompareKey(const CompiledCounter *c, int i, Datum a, bool anull, Datum b, bool bnull)
{
	if (anull || bnull)
		return anull == bnull ? 0 : anull ? 1 : -1; /* NULLS LAST, as ORDER BY */
	if (SortsAsInteger(c, i))
		return (int64)a < (int64)b ? -1 : (int64)a > (int64)b ? 1 : 0;
	return DatumGetInt32(FunctionCall2Coll(&c->key_cmp[i], c->def->keys[i].collation, a, b));
}

int
CompareItems(const void *pa, const void *pb, void *arg)
{
	const CompiledCounter *c = ((const CounterRun *)arg)->c;
	const SortItem *a = (const SortItem *)pa;
	const SortItem *b = (const SortItem *)pb;
	int nkeys = c->def->nkeys;
	for (int i = 0; i < nkeys && i < 2; i++) {
		int cmp = CompareKey(c, i, a->k[i], a->null[i], b->k[i], b->null[i]);
		if (cmp != 0)
			return cmp;
	}
	for (int i = 2; i < nkeys; i++) {
		int cmp = CompareKey(c, i, a->e->key[i], a->e->KeyNulls(nkeys)[i], b->e->key[i], b->e->KeyNulls(nkeys)[i]);
		if (cmp != 0)
			return cmp;
	}
	return 0;
}

} // namespace

int
CompareKeyValues(const CompiledCounter *c, int i, Datum a, bool anull, Datum b, bool bnull)
{
	RequireOwnerScope(c->auth.role());
	return CompareKey(c, i, a, anull, b, bnull);
}

void
SortDeltas(CounterRun *r, DeltaEntry **entries, uint32 n)
{
	if (n <= 1)
		return;
	int nkeys = r->c->def->nkeys;
	SortItem *items = (SortItem *)palloc(sizeof(SortItem) * n);
	for (uint32 j = 0; j < n; j++) {
		SortItem *it = &items[j];
		it->e = entries[j];
		for (int i = 0; i < 2; i++) {
			it->k[i] = i < nkeys ? it->e->key[i] : (Datum)0;
			it->null[i] = i < nkeys ? it->e->KeyNulls(nkeys)[i] : false;
		}
	}
	qsort_arg(items, n, sizeof(SortItem), CompareItems, r);
	for (uint32 j = 0; j < n; j++)
		entries[j] = items[j].e;
	pfree(items);
}

/*
 * Take the part of a summed integer delta that fits in bigint, leaving the rest in the entry. Within a statement
 * integer deltas are summed in 128 bits; a net change beyond bigint (moving a row whose value is the smallest bigint,
 * say) is applied in more than one step, each moving the stored value towards its final value.
 */
int64
TakeInt64(const CounterDef *def, DeltaEntry *e, int v)
{
	int128 *ints = e->Ints(def->nvalues);
	int128 d = ints[v];
	int64 part = d > (int128)PG_INT64_MAX ? PG_INT64_MAX : d < (int128)PG_INT64_MIN ? PG_INT64_MIN : (int64)d;
	ints[v] -= part;
	return part;
}

/* Take a numeric delta (NULL datum = zero), leaving zero in the entry. */
Datum
TakeNumeric(const CounterDef *def, DeltaEntry *e, int v, Datum zero)
{
	Datum *numerics = e->Numerics(def->nvalues);
	Datum d = numerics[v] != (Datum)0 ? numerics[v] : zero;
	numerics[v] = (Datum)0;
	return d;
}

} // namespace counters
