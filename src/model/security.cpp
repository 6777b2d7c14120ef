/*
 * security.cpp: whose rights the extension's work runs with, and under which settings.
 *
 * The model is PostgreSQL's own for code that maintains other roles' objects (VACUUM, REINDEX, REFRESH MATERIALIZED
 * VIEW): a counter's user-controlled code -- its definition's expressions, triggers its owner put on its tables,
 * threshold callbacks -- runs as the counter's owner inside a security-restricted operation, whoever started the
 * work (a writer of the source, a superuser calling compact() or verify(), the background worker). A
 * security-restricted operation cannot change role, create temporary objects or otherwise reach beyond the owner's
 * own rights, so the owner gains nothing from the caller. Whoever calls a maintenance function must have the
 * privileges of the counter's owner (or, for verify(), be allowed to read the counter), so the caller gains nothing
 * either.
 *
 * Everything the extension runs also pins the settings it depends on: search_path (every name it generates is
 * schema-qualified), the output settings that change what "immutable" text conversions return, and row_security
 * (a recount must see every row or fail, never see only the rows a policy shows).
 */
#include "model/model.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "catalog/namespace.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/syscache.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "executor/spi.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "nodes/makefuncs.h"
}

namespace counters {

namespace {

void
Pin(const char *name, const char *value)
{
	/*
	 * (most sessions run with the values pinned: setting them again would cost every statement for nothing; the
	 * search_path, pinned by every statement, is read from its variable rather than looked up by name)
	 */
	const char *current = strcmp(name, "search_path") == 0 ? namespace_search_path : GetConfigOption(name, true, false);
	if (current != nullptr && strcmp(current, value) == 0)
		return;
	(void)set_config_option(name, value, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

} // namespace

/*
 * Set as the owner's search_path, names resolve as they did for the caller ("$user" included), and the caller's
 * temporary objects cannot stand in for anything.
 */
char *
CallerSearchPath()
{
	StringInfoData path;
	initStringInfo(&path);
	ListCell *lc;
	foreach (lc, fetch_search_path(true)) {
		Oid nsp = lfirst_oid(lc);
		if (isAnyTempNamespace(nsp))
			continue;
		char *name = get_namespace_name(nsp);
		if (name != nullptr)
			appendStringInfo(&path, "%s, ", quote_identifier(name));
	}
	appendStringInfoString(&path, "pg_temp");
	return path.data;
}

void
EnterOwner(OwnerScope *scope, const Authorization &auth, int pins)
{
	Oid owner = auth.role();
	if (unlikely(!OidIsValid(owner)))
		elog(ERROR, "counters: entering a counter owner's scope without an authorization");
	/* (resolved before the role changes: "$user" and the schemas the caller may use are the caller's) */
	char *caller_path = (pins & PIN_CALLER_PATH) ? CallerSearchPath() : nullptr;
	scope->owner = owner;
	GetUserIdAndSecContext(&scope->saved_user, &scope->saved_sec);
	SetUserIdAndSecContext(owner, scope->saved_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	scope->level = pins != 0 ? PinSettings(pins & ~PIN_CALLER_PATH) : 0;
	if (caller_path != nullptr)
		(void)set_config_option("search_path", caller_path, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
		                        false);
}

void
LeaveOwner(OwnerScope *scope)
{
	/*
	 * Every setting changed since EnterOwner goes back, also those the owner's code changed (its `SET search_path =
	 * ...` must not outlive the work into the caller's session), as after VACUUM or REINDEX.
	 */
	if (scope->level != 0)
		AtEOXact_GUC(false, scope->level);
	SetUserIdAndSecContext(scope->saved_user, scope->saved_sec);
}

void
RequireOwnerScope(Oid owner)
{
	if (unlikely(!InSecurityRestrictedOperation() || GetUserId() != owner))
		elog(ERROR, "counters: a counter's code must run as its owner %u in a security-restricted operation", owner);
}

void
RequireRestricted()
{
	if (unlikely(!InSecurityRestrictedOperation()))
		elog(ERROR, "counters: a counter's code must run in its owner's scope (a security-restricted operation)");
}

namespace {

/* Whether every statement of `sql` is one that runs no code: DDL the counters make, and no query or index build. */
bool
RunsNoCode(const char *sql)
{
	List *statements = raw_parser(sql, RAW_PARSE_DEFAULT);
	ListCell *lc;
	foreach (lc, statements) {
		Node *stmt = ((RawStmt *)lfirst(lc))->stmt;
		switch (nodeTag(stmt)) {
		case T_CreateTrigStmt:
		case T_DropStmt:
		case T_RenameStmt:
		case T_GrantStmt:
		case T_CommentStmt:
		case T_ViewStmt:
		case T_LockStmt:
			break;
		case T_CreateStmt:
			/* (no partition bound, no table of a type: a plain table, whose LIKE copies expressions unevaluated) */
			if (((CreateStmt *)stmt)->partbound != nullptr || ((CreateStmt *)stmt)->ofTypename != nullptr)
				return false;
			break;
		case T_AlterTableStmt: {
			ListCell *c;
			foreach (c, ((AlterTableStmt *)stmt)->cmds) {
				AlterTableType type = ((AlterTableCmd *)lfirst(c))->subtype;
				if (type != AT_ReplicaIdentity && type != AT_EnableTrig && type != AT_EnableAlwaysTrig &&
				    type != AT_EnableReplicaTrig && type != AT_DisableTrig && type != AT_SetRelOptions &&
				    type != AT_ResetRelOptions)
					return false;
			}
			break;
		}
		default:
			return false;
		}
	}
	return true;
}

} // namespace

void
Execute(const char *sql, int expected)
{
	if (!InSecurityRestrictedOperation() && !RunsNoCode(sql))
		elog(ERROR, "counters: \"%s\" can run a counter's code, and must run in its owner's scope", sql);
	int level = PinSettings(PIN_SEARCH_PATH);
	int ret = SPI_execute(sql, false, 0);
	UnpinSettings(level);
	if (ret != expected)
		elog(ERROR, "counters: \"%s\" failed: %s", sql, SPI_result_code_string(ret));
}

int
PinSettings(int flags)
{
	int level = NewGUCNestLevel();
	if (flags & PIN_SEARCH_PATH)
		Pin("search_path", "pg_catalog, pg_temp");
	/*
	 * PostgreSQL marks the output functions of these types immutable, yet their text depends on these settings:
	 * float8::text (extra_float_digits), bytea::text (bytea_output), date, timestamp and interval as text (DateStyle,
	 * IntervalStyle), bytea in XML (xmlbinary, xmloption). A key computed from such text must come out the same in
	 * every session.
	 */
	if (flags & PIN_OUTPUT) {
		Pin("DateStyle", "ISO, MDY");
		Pin("IntervalStyle", "postgres");
		Pin("extra_float_digits", "1");
		Pin("bytea_output", "hex");
		Pin("xmlbinary", "base64");
		Pin("xmloption", "content");
	}
	/* A recount sees every row of the source, or fails ("query would be affected by row-level security policy"). */
	if (flags & PIN_ROW_SECURITY)
		Pin("row_security", "off");
	return level;
}

void
UnpinSettings(int level)
{
	/*
	 * Every setting changed since PinSettings goes back, also those a counter's code changed (its owner's `SET
	 * search_path = ...` must not outlive the work into the writer's session), as after VACUUM or REINDEX.
	 */
	AtEOXact_GUC(false, level);
}

Oid
RelationOwner(Oid relid)
{
	HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("relation with OID %u does not exist", relid)));
	Oid owner = ((Form_pg_class)GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

bool
HasOwnerPrivileges(Oid relid, Oid role)
{
	return has_privs_of_role(OidIsValid(role) ? role : GetUserId(), RelationOwner(relid));
}

namespace {

const char *
RelationKind(Oid relid)
{
	return get_rel_relkind(relid) == RELKIND_VIEW ? "view" : "table";
}

} // namespace

void
RequireOwnerPrivileges(const char *counter, Oid relid, Oid caller)
{
	if (!HasOwnerPrivileges(relid, caller))
		ereport(ERROR,
		        (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		         errmsg("counter \"%s\": must be owner of %s %s", counter, RelationKind(relid), QualifiedName(relid)),
		         errdetail("Declaring, changing, maintaining or dropping a counter requires the privileges of the "
		                   "owner of every table and view it reads and writes.")));
}

void
RequireOwnerRights(const char *counter, Oid relid, Oid owner)
{
	if (!HasOwnerPrivileges(relid, owner))
		ereport(ERROR,
		        (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		         errmsg("counter \"%s\": its owner %s lacks the privileges of the owner of %s %s", counter,
		                quote_identifier(GetUserNameFromId(owner, false)), RelationKind(relid), QualifiedName(relid)),
		         errdetail("A counter's code runs as its owner, whoever declares or changes it: the owner must have "
		                   "the privileges of the owner of every table and view the counter reads and writes.")));
}

bool
MayMaintain(const Counter *e)
{
	Oid rels[COUNTER_RELATIONS];
	int n = RequiredRelations(e, rels);
	for (int i = 0; i < n; i++) {
		/*
		 * A relation gone since the row was read: a change of the counter (a mode switch dropping its log) committed
		 * meanwhile. Not maintained by this round (named, LookupCounter reads the row again).
		 */
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(rels[i])))
			return false;
		if (!HasOwnerPrivileges(rels[i]))
			return false;
	}
	return true;
}

void
RequireMaintainer(const Counter *e)
{
	Oid rels[COUNTER_RELATIONS];
	int n = RequiredRelations(e, rels);
	for (int i = 0; i < n; i++)
		RequireOwnerPrivileges(e->name, rels[i]);
}

bool
MayRead(const Counter *e)
{
	return pg_class_aclcheck(e->target, GetUserId(), ACL_SELECT) == ACLCHECK_OK || MayMaintain(e);
}

Oid
OwnerOfTable(Oid target, Oid totals)
{
	return RelationOwner(OidIsValid(totals) ? totals : target);
}

Oid
CounterOwner(const Counter *e)
{
	return RelationOwner(ValuesTable(e));
}

/* ---- authorizations: each checks, then hands out the proof EnterOwner takes ---- */

Authorization
AuthorizeDeclaration(const char *counter, Oid principal, List *rels, Oid owner)
{
	/*
	 * The principal could act as the owner itself: running the counter's code as the owner gives it nothing. Every
	 * relation is checked before anything of the definition is analysed (the callers collect them from its raw parse,
	 * or from its view's rule, neither of which runs code).
	 */
	if (!OidIsValid(principal) || !OidIsValid(owner))
		elog(ERROR, "counters: counter \"%s\": a declaration without a principal or an owner", counter);
	ListCell *lc;
	foreach (lc, rels)
		RequireOwnerPrivileges(counter, lfirst_oid(lc), principal);
	foreach (lc, rels)
		RequireOwnerRights(counter, lfirst_oid(lc), owner);
	if (!has_privs_of_role(principal, owner))
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("counter \"%s\": must have the privileges of role %s, its owner", counter,
		                       quote_identifier(GetUserNameFromId(owner, false))),
		                errdetail("A counter's code runs as its owner: only a role that could act as the owner may "
		                          "declare it.")));
	return Authorization(owner, principal);
}

Authorization
AuthorizeMaintainer(const Counter *e)
{
	RequireMaintainer(e);
	return Authorization(CounterOwner(e), GetUserId());
}

Authorization
AuthorizedByCatalog(const Counter *e)
{
	/* (the row was written by Register, after an AuthorizeDeclaration of whoever declared it) */
	return Authorization(CounterOwner(e), InvalidOid);
}

Authorization
AuthorizeTableOwner(Oid rel)
{
	if (!HasOwnerPrivileges(rel))
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("must be owner of %s %s", RelationKind(rel), QualifiedName(rel))));
	return Authorization(RelationOwner(rel), GetUserId());
}

Authorization
AuthorizeCatalogOwner()
{
	Oid catalog = RangeVarGetRelid(makeRangeVar(pstrdup("counters"), pstrdup("counter"), -1), AccessShareLock, false);
	return Authorization(RelationOwner(catalog), InvalidOid);
}

Authorization
AuthorizeCaller()
{
	return Authorization(GetUserId(), GetUserId());
}

} // namespace counters
