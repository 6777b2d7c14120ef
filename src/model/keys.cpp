/*
 * keys.cpp: a counter's keys in its tables' indexes -- the digest that indexes keys too long for a btree entry, and
 * the one search for a unique index on exactly a counter's key columns.
 */
#include "model/model.hpp"
#include "compat.hpp"

extern "C" {
#include "access/genam.h"
#include "access/relation.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "catalog/namespace.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_coerce.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}

namespace counters {

namespace {

/* The bytes a key's digest is computed from (char: without trailing spaces), detoasted. */
const char *
KeyBytes(Datum value, Oid type, int *len)
{
	struct varlena *v = PG_DETOAST_DATUM_PACKED(value);
	const char *data = VARDATA_ANY(v);
	int n = (int)VARSIZE_ANY_EXHDR(v);
	if (type == BPCHAROID)
		while (n > 0 && data[n - 1] == ' ')
			n--;
	*len = n;
	return data;
}

/* The key column counters.key_digest(column) indexes (through a cast to its argument type), or 0: none. */
AttrNumber
DigestedColumn(Node *expr)
{
	if (!IsA(expr, FuncExpr))
		return InvalidAttrNumber;
	FuncExpr *f = (FuncExpr *)expr;
	if (list_length(f->args) != 1 || strcmp(get_func_name(f->funcid), KEY_DIGEST_NAME) != 0 ||
	    get_func_namespace(f->funcid) != get_namespace_oid("counters", false))
		return InvalidAttrNumber;
	Node *arg = (Node *)linitial(f->args);
	for (;;) {
		if (IsA(arg, RelabelType))
			arg = (Node *)((RelabelType *)arg)->arg;
		else if (IsA(arg, FuncExpr) && ((FuncExpr *)arg)->funcformat != COERCE_EXPLICIT_CALL &&
		         list_length(((FuncExpr *)arg)->args) == 1)
			arg = (Node *)linitial(((FuncExpr *)arg)->args);
		else
			break;
	}
	return IsA(arg, Var) ? ((Var *)arg)->varattno : InvalidAttrNumber;
}

} // namespace

bool
DigestedKeyType(Oid type, int32 typmod, Oid collation)
{
	Oid base = getBaseTypeAndTypmod(type, &typmod);
	if (base != TEXTOID && base != BYTEAOID && base != VARCHAROID && base != BPCHAROID)
		return false;
	/* (a length limit short enough for any encoding's widest characters keeps the plain column) */
	if ((base == VARCHAROID || base == BPCHAROID) && typmod >= VARHDRSZ && typmod - VARHDRSZ <= 600)
		return false;
	return !OidIsValid(collation) || get_collation_isdeterministic(collation);
}

Datum
KeyDigest(Datum value, Oid type)
{
	int len;
	const char *data = KeyBytes(value, type, &len);
	/* (short: 0x00 and the bytes, in order; long: 0x01 and their SHA-256; the two never equal each other) */
	const int short_key = 32;
	if (len <= short_key) {
		bytea *out = (bytea *)palloc(VARHDRSZ + 1 + len);
		SET_VARSIZE(out, VARHDRSZ + 1 + len);
		VARDATA(out)[0] = 0;
		memcpy(VARDATA(out) + 1, data, len);
		return PointerGetDatum(out);
	}
	bytea *in = (bytea *)palloc(VARHDRSZ + len);
	SET_VARSIZE(in, VARHDRSZ + len);
	memcpy(VARDATA(in), data, len);
	bytea *hash = DatumGetByteaPP(DirectFunctionCall1(sha256_bytea, PointerGetDatum(in)));
	int hlen = (int)VARSIZE_ANY_EXHDR(hash);
	bytea *out = (bytea *)palloc(VARHDRSZ + 1 + hlen);
	SET_VARSIZE(out, VARHDRSZ + 1 + hlen);
	VARDATA(out)[0] = 1;
	memcpy(VARDATA(out) + 1, VARDATA_ANY(hash), hlen);
	return PointerGetDatum(out);
}

bool
KeyBytesEqual(Datum a, Datum b, Oid type)
{
	int alen, blen;
	const char *adata = KeyBytes(a, type, &alen);
	const char *bdata = KeyBytes(b, type, &blen);
	return alen == blen && memcmp(adata, bdata, alen) == 0;
}

Oid
FirstIndexOf(Relation rel, bool (*match)(Relation index, void *arg), void *arg)
{
	List *indexes = RelationGetIndexList(rel);
	Oid result = InvalidOid;
	ListCell *lc;
	foreach (lc, indexes) {
		Relation index = index_open(lfirst_oid(lc), AccessShareLock);
		bool found = match(index, arg);
		index_close(index, AccessShareLock);
		if (found) {
			result = lfirst_oid(lc);
			break;
		}
	}
	list_free(indexes);
	return result;
}

Oid
IndexEqualityOperator(Relation index, int column, Oid type, Oid *subtype)
{
	Oid opfamily = index->rd_opfamily[column];
	Oid opcintype = index->rd_opcintype[column];
	Oid op = get_opfamily_member(opfamily, opcintype, type, BTEqualStrategyNumber);
	*subtype = type;
	if (OidIsValid(op))
		return op;
	/* (an operator class of a polymorphic type, anyenum or anyarray, or of a type `type` is a domain over) */
	if (!IsPolymorphicType(opcintype) && !IsBinaryCoercible(type, opcintype))
		return InvalidOid;
	*subtype = InvalidOid;
	return get_opfamily_member(opfamily, opcintype, opcintype, BTEqualStrategyNumber);
}

namespace {

/* Whether index column `j` of `index` (on `rel`) is `expr`, an expression over `source` (Vars at varno 1). */
bool
IndexColumnIs(Relation index, int j, ListCell **next_expr, Expr *expr, Oid source, Oid rel)
{
	AttrNumber attnum = index->rd_index->indkey.values[j];
	if (attnum == 0) {
		/* (an expression: compared as it is only on the source itself, whose attribute numbers it uses) */
		if (*next_expr == nullptr)
			return false;
		Node *indexpr = (Node *)lfirst(*next_expr);
		*next_expr = lnext(RelationGetIndexExpressions(index), *next_expr);
		return rel == source && equal(indexpr, expr);
	}
	if (!IsA(expr, Var) || ((Var *)expr)->varattno <= 0)
		return false;
	/* (a column: by name, which a partition shares with its root) */
	const char *name = get_attname(source, ((Var *)expr)->varattno, false);
	return get_attnum(rel, name) == attnum;
}

/* ExtremeIndexOf's question, and where its answer goes. */
struct ExtremeIndexQuery {
	const CounterDef *def;
	int v;
	Oid rel;
	Oid opfamily;
	int direction;
	int *key_of;
	bool backward;
};

bool
ServesExtreme(Relation index, void *arg)
{
	ExtremeIndexQuery *q = (ExtremeIndexQuery *)arg;
	const CounterDef *def = q->def;
	const ValueDef *vd = &def->values[q->v];
	Form_pg_index form = index->rd_index;
	if (index->rd_rel->relam != BTREE_AM_OID || !form->indisvalid || !form->indisready ||
	    !heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, nullptr) ||
	    IndexRelationGetNumberOfKeyAttributes(index) <= def->nkeys)
		return false;
	ListCell *next_expr = list_head(RelationGetIndexExpressions(index));
	bool used[INDEX_MAX_KEYS] = {false};
	for (int j = 0; j < def->nkeys; j++) {
		ListCell *at = next_expr;
		int k;
		for (k = 0; k < def->nkeys; k++) {
			next_expr = at;
			if (!used[k] && IndexColumnIs(index, j, &next_expr, def->keys[k].expr, def->source, q->rel))
				break;
		}
		Oid subtype;
		if (k == def->nkeys || index->rd_indcollation[j] != def->keys[k].collation ||
		    !OidIsValid(IndexEqualityOperator(index, j, def->keys[k].type, &subtype)))
			return false;
		used[k] = true;
		q->key_of[j] = k;
	}
	int a = def->nkeys;
	if (!IndexColumnIs(index, a, &next_expr, vd->arg, def->source, q->rel) || index->rd_opfamily[a] != q->opfamily ||
	    index->rd_indcollation[a] != vd->collation)
		return false;
	/* (max: the greatest comes last in ascending order; min: the least first) */
	bool desc = (index->rd_indoption[a] & INDOPTION_DESC) != 0;
	q->backward = (q->direction > 0) != desc;
	return true;
}

} // namespace

Oid
ExtremeIndexOf(const CounterDef *def, int v, Relation rel, int *key_of, bool *backward)
{
	ExtremeIndexQuery q = {def, v, RelationGetRelid(rel), InvalidOid, 0, key_of, false};
	Oid opcintype;
	if (!compat::OrderingOperator(def->values[v].sortop, &q.opfamily, &opcintype, &q.direction))
		return InvalidOid;
	Oid index = FirstIndexOf(rel, ServesExtreme, &q);
	*backward = q.backward;
	return index;
}

RegProcedure
IndexColumnOperator(Relation index, int column, int16 strategy)
{
	Oid op = get_opfamily_member(index->rd_opfamily[column], index->rd_opcintype[column], index->rd_opcintype[column],
	                             strategy);
	return OidIsValid(op) ? get_opcode(op) : InvalidOid;
}

namespace {

/* FindKeyIndexOf's question, and where its answer goes. */
struct KeyIndexQuery {
	int nkeys;
	const AttrNumber *attnums;
	AttrNumber slot;
	int *key_of_column;
	bool *digested;
};

bool
IsKeyIndex(Relation index, void *arg)
{
	KeyIndexQuery *q = (KeyIndexQuery *)arg;
	int nkeys = q->nkeys;
	Form_pg_index form = index->rd_index;
	bool ok = form->indisunique && form->indisvalid && form->indimmediate && index->rd_rel->relam == BTREE_AM_OID &&
	          form->indnkeyatts == nkeys + (q->slot != InvalidAttrNumber ? 1 : 0) &&
	          heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL) &&
	          (q->slot == InvalidAttrNumber || form->indkey.values[nkeys] == q->slot);
	List *exprs = ok ? RelationGetIndexExpressions(index) : NIL;
	ListCell *next = list_head(exprs);
	for (int k = 0; q->digested != nullptr && k < nkeys; k++)
		q->digested[k] = false;
	for (int j = 0; ok && j < nkeys; j++) {
		AttrNumber attnum = form->indkey.values[j];
		bool digest = false;
		if (attnum == 0) {
			/* an expression: counters.key_digest(key column) only */
			attnum = next != nullptr ? DigestedColumn((Node *)lfirst(next)) : InvalidAttrNumber;
			next = next != nullptr ? lnext(exprs, next) : nullptr;
			digest = true;
		}
		q->key_of_column[j] = -1;
		for (int k = 0; attnum != InvalidAttrNumber && k < nkeys; k++)
			if (attnum == q->attnums[k]) {
				q->key_of_column[j] = k;
				if (q->digested != nullptr)
					q->digested[k] = digest;
			}
		ok = q->key_of_column[j] >= 0;
	}
	return ok;
}

} // namespace

Oid
FindKeyIndexOf(Relation rel, int nkeys, const AttrNumber *attnums, AttrNumber slot, int *key_of_column, bool *digested)
{
	KeyIndexQuery q = {nkeys, attnums, slot, key_of_column, digested};
	return FirstIndexOf(rel, IsKeyIndex, &q);
}

char *
KeyIndexElement(const char *quoted_column, bool digested)
{
	return digested ? psprintf("(counters.%s(%s))", KEY_DIGEST_NAME, quoted_column) : pstrdup(quoted_column);
}

bool
AnyIndexOf(Oid relid, bool (*match)(HeapTuple index, const void *arg), const void *arg)
{
	Relation rel = relation_open(relid, AccessShareLock);
	List *indexes = RelationGetIndexList(rel);
	relation_close(rel, AccessShareLock);
	bool found = false;
	ListCell *lc;
	foreach (lc, indexes) {
		HeapTuple tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		if (!HeapTupleIsValid(tup))
			continue;
		found = ((Form_pg_index)GETSTRUCT(tup))->indisvalid && heap_attisnull(tup, Anum_pg_index_indpred, nullptr) &&
		        match(tup, arg);
		ReleaseSysCache(tup);
		if (found)
			break;
	}
	list_free(indexes);
	return found;
}

} // namespace counters
