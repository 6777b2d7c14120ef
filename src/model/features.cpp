/*
 * features.cpp: what a kind of counter may do, decided in one table.
 *
 * Each row names a feature (an option, a mode, an online operation), what it needs of the counter -- exact mode, a
 * table of its own, counter-cache columns of an existing table, a source that is not a Citus table -- and, for each
 * need the counter lacks, the refusal (0A000, naming the counter). Every refusal of a feature goes through
 * RequireFeature, in the order the table's needs are listed: Citus first, then the kind of table, then the mode. The
 * other direction goes through it too: a counter leaving exact mode is refused for each feature it holds that needs
 * exact mode (RequireModeKeeps). New kinds of counters (aggregates, depths, deferral) add rows and needs here, not
 * refusal sites.
 *
 * docs/modes.md shows the same matrix ("What each kind of counter may do"): test/scripts/features.sh reads the rows
 * below (one FEATURE(...) per line: its docs name and its needs) and fails when the docs say otherwise.
 */
#include "model/model.hpp"

extern "C" {
#include "utils/builtins.h"
}

namespace counters {

namespace {

enum Need : unsigned {
	NEED_LOCAL = 1,          /* not a Citus table (the integration's refuse_feature says why, with `citus_what`) */
	NEED_OWN_TABLE = 2,      /* a table of its own (not counter-cache columns of an existing table) */
	NEED_CACHE = 4,          /* counter-cache columns of an existing table */
	NEED_EXACT = 8,          /* exact mode */
	NEED_STORED = 16,        /* a source that keeps its rows (not a sink): there is something to recount */
	NEED_LOCAL_OR_HASH = 32, /* not a Citus table, or a hash-distributed one (refuse_feature says why for others) */
	/*
	 * not a Citus table, or a hash-distributed one in log or sharded mode whose key holds the distribution column (what
	 * compaction finds on each node, the coordinator announces: `citus_exact` and `citus_partial` say why not)
	 */
	NEED_LOCAL_OR_PENDING = 64
};

/*
 * A refusal: its message, detail and hint, with %c for the counter, %m its mode, %t its table, %s its source, %q the
 * quoted name.
 */
struct Refusal {
	const char *message;
	const char *detail;
	const char *hint;
};

struct FeatureRule {
	Feature feature;
	const char *name; /* as docs/modes.md names it */
	unsigned needs;
	const char *citus_what; /* NEED_LOCAL, NEED_LOCAL_OR_HASH: what the integration says is not supported */
	Refusal table;          /* NEED_OWN_TABLE or NEED_CACHE unmet */
	Refusal mode;           /* NEED_EXACT unmet */
	Refusal stored;         /* NEED_STORED unmet */
	/*
	 * The counter holds the feature (its options say so); NEED_EXACT: the refusal to leave exact mode then;
	 * NEED_LOCAL_OR_PENDING: the refusals of exact mode on a hash-distributed table (declared in it, or switched to
	 * it) and of a key kept as per-shard partial rows
	 */
	bool (*held)(const CounterOptions *options);
	Refusal leaving;
	Refusal citus_exact;
	Refusal citus_partial;
};

bool
HasBounds(const CounterOptions *o)
{
	return o->nbounds > 0;
}

bool
HasThresholds(const CounterOptions *o)
{
	return o->nthresholds > 0;
}

bool
HasWindow(const CounterOptions *o)
{
	return o->window != nullptr;
}

bool
KeepsZero(const CounterOptions *o)
{
	return o->keep_zero;
}

const Refusal none = {nullptr, nullptr, nullptr};
const Refusal switch_first = {
    "counter %c is in %m mode, whose values are not exact at write time: it cannot have bounds", nullptr,
    "Switch it to exact mode first: SELECT counters.alter_counter(%q, 'exact');"};
const char *const never_stored = "The rows a sink counted were never stored: there is nothing to recount them from.";
const Refusal sink_rebuilt = {"counter %c cannot be rebuilt: its source %s is a sink", never_stored, nullptr};
const Refusal sink_redefined = {"counter %c cannot be redefined: its source %s is a sink", never_stored, nullptr};
const Refusal sink_verified = {"counter %c cannot be verified: its source %s is a sink", never_stored, nullptr};
const Refusal window_table = {"counter %c: window thresholds need an exact counter with a table of its own",
                              "The window sum is read from the counter's rows after each write.", nullptr};

/* (each row starts a line with "{Feature::": test/scripts/features.sh reads its docs name and needs) */
const FeatureRule RULES[] = {
    {Feature::Bounds,
     "bounds",
     NEED_EXACT,
     nullptr,
     none,
     switch_first,
     none,
     HasBounds,
     {"counter %c has bounds, which only exact mode can check at write time", nullptr,
      "Remove them first with counters.set_bounds(name, column_name)."}},
    {Feature::Thresholds,
     "thresholds",
     NEED_LOCAL_OR_PENDING,
     "thresholds",
     none,
     none,
     none,
     HasThresholds,
     none,
     {"counter %c of Citus table %s: only log and sharded mode announce thresholds there",
      "In exact mode a crossing happens on the worker that wrote the key, whose NOTIFY the coordinator's listeners "
      "never hear; in log and sharded mode each node's compaction finds the crossings and the coordinator's "
      "compaction announces them.",
      "Keep the counter in log or sharded mode (SELECT counters.alter_counter(%q, 'log');), or remove its thresholds "
      "first with counters.set_thresholds(name, column_name, '{}')."},
     {"counter %c keeps per-shard partial rows: it cannot have thresholds",
      "A key's value is the sum of its rows on every shard: no compaction sees it cross a threshold.", nullptr}},
    {Feature::WindowThresholds,
     "window thresholds",
     NEED_LOCAL | NEED_OWN_TABLE | NEED_EXACT,
     "window thresholds",
     window_table,
     window_table,
     none,
     HasWindow,
     {"counter %c has window thresholds, which only exact mode checks",
      "The window sums are read from the counter's rows after each write.",
      "Remove them first with counters.set_window_thresholds(name, column_name, '{}')."}},
    {Feature::KeepZero,
     "keep_zero",
     NEED_OWN_TABLE | NEED_EXACT,
     nullptr,
     {"counter %c is kept in columns of %t: its rows are never deleted",
      "keep_zero applies to counter tables, whose rows come and go with their keys.", nullptr},
     {"counter %c is in %m mode: only exact mode keeps rows whose values are all zero",
      "In log and sharded mode readers see totals plus pending deltas, and keys whose sum is zero are left out.",
      "Switch it to exact mode first: SELECT counters.alter_counter(%q, 'exact');"},
     none,
     KeepsZero,
     {"counter %c keeps rows whose values are all zero, which only exact mode does", nullptr,
      "Remove it first with counters.set_keep_zero(name, false)."}},
    {Feature::Retention,
     "retention",
     NEED_OWN_TABLE,
     nullptr,
     {"counter %c: retention applies to counters with a table of their own", nullptr, nullptr},
     none,
     none},
    {Feature::Touch,
     "touch",
     NEED_CACHE,
     nullptr,
     {"counter %c: touch applies to counter-cache columns of an existing table", nullptr,
      "Declare the counter with a target table (counters.create_counter(name, definition, target))."},
     none,
     none},
    {Feature::LogShardedMode,
     "log and sharded mode",
     NEED_LOCAL_OR_HASH | NEED_OWN_TABLE,
     "log and sharded mode",
     {"counter %c: a counter kept in columns of an existing table can only be exact", nullptr, nullptr},
     none,
     none},
    {Feature::DeclareConcurrently, "create_counter_concurrently()", NEED_LOCAL,
     "create_counter_concurrently() (it fills the counter as of one snapshot while writers log their deltas; "
     "create_counter() works)",
     none, none, none},
    {Feature::Rebuild, "rebuild()", NEED_STORED, nullptr, none, none, sink_rebuilt},
    {Feature::RebuildConcurrently,
     "rebuild_concurrently()",
     NEED_LOCAL | NEED_OWN_TABLE | NEED_STORED,
     "rebuild_concurrently() (it goes through log mode; rebuild() works)",
     {"counter %c cannot be rebuilt concurrently: it is kept in columns of %t",
      "A concurrent rebuild logs the deltas of writers meanwhile (log mode); a counter kept in an existing table is "
      "exact only.",
      "Use counters.rebuild(%q): it locks writers out while it runs."},
     none,
     sink_rebuilt},
    {Feature::Redefine, "alter_counter() of the definition", NEED_STORED, nullptr, none, none, sink_redefined},
    {Feature::RedefineConcurrently,
     "alter_counter_concurrently()",
     NEED_LOCAL | NEED_OWN_TABLE | NEED_STORED,
     "alter_counter_concurrently() (it goes through log mode; alter_counter() works)",
     {"counter %c cannot be redefined concurrently: it is kept in columns of %t", nullptr,
      "Use counters.alter_counter(%q, definition => ...): it locks writers out while it runs."},
     none,
     sink_redefined},
    {Feature::Verify, "verify() and repair()", NEED_STORED, nullptr, none, none, sink_verified},
    {Feature::Extremes,
     "min() and max()",
     NEED_LOCAL | NEED_EXACT,
     "min() and max()",
     none,
     {"counter %c: min() and max() are kept in exact mode only, not in log or sharded mode",
      "A log row or a slot adds to a key's values; it cannot take back an extreme.",
      "Declare it in exact mode, with counters.create_counter() (the concurrent procedures build counters in log "
      "mode); keep the columns that take many writers per key in a counter of their own."},
     none},
    {Feature::DistinctCount,
     "count(DISTINCT)",
     NEED_LOCAL | NEED_EXACT | NEED_STORED,
     "count(DISTINCT)",
     none,
     {"counter %c: count(DISTINCT) is kept in exact mode only, not in log or sharded mode",
      "A log row or a slot adds to a key's values; it cannot tell a value new to a key.",
      "Declare it in exact mode, with counters.create_counter() (the concurrent procedures build counters in log "
      "mode); keep the columns that take many writers per key in a counter of their own."},
     {"counter %c cannot count distinct values of a sink: %s stores no rows",
      "Whether a value is new to a key is read from the rows stored.", nullptr}},
    {Feature::Deferred, "deferred", NEED_LOCAL, "deferred counters", none, none, none},
};

const FeatureRule *
RuleOf(Feature feature)
{
	for (const FeatureRule &rule : RULES)
		if (rule.feature == feature)
			return &rule;
	elog(ERROR, "counters: no rule for feature %d", (int)feature);
	pg_unreachable();
}

/* What a refusal names: the counter, its mode, its table and its source. */
struct Subject {
	const char *name;
	Mode mode;
	Oid table;
	Oid source;
	bool partial; /* a key kept as per-shard partial rows (Citus) */
};

/* A template of the table above, filled in for subject `c`. */
char *
Fill(const char *text, const Subject &c)
{
	if (text == nullptr)
		return nullptr;
	StringInfoData out;
	initStringInfo(&out);
	for (const char *p = text; *p != '\0'; p++) {
		if (p[0] != '%' || p[1] == '\0') {
			appendStringInfoChar(&out, *p);
			continue;
		}
		/* (each placeholder's text: %c, %m, %t, %s, %q; anything else is left as written) */
		const char *placeholders = "cmtsq";
		const char *at = strchr(placeholders, *++p);
		const char *values[] = {psprintf("\"%s\"", c.name), ModeName(c.mode),
		                        OidIsValid(c.table) ? QualifiedName(c.table) : "",
		                        OidIsValid(c.source) ? QualifiedName(c.source) : "", quote_literal_cstr(c.name)};
		appendStringInfoString(&out, at != nullptr ? values[at - placeholders] : psprintf("%%%c", *p));
	}
	return out.data;
}

void
Refuse(const Refusal *r, const Subject &c)
{
	char *detail = Fill(r->detail, c);
	char *hint = Fill(r->hint, c);
	ereport(ERROR,
	        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg_internal("%s", Fill(r->message, c)),
	         detail != nullptr ? errdetail_internal("%s", detail) : 0, hint != nullptr ? errhint("%s", hint) : 0));
}

/* The first need of `rule` that a counter lacks (0: none), Citus's aside (the integration decides it). */
unsigned
Unmet(const FeatureRule *rule, Oid source, bool owns_target, Mode mode)
{
	if ((rule->needs & NEED_OWN_TABLE) && !owns_target)
		return NEED_OWN_TABLE;
	if ((rule->needs & NEED_CACHE) && owns_target)
		return NEED_CACHE;
	if ((rule->needs & NEED_STORED) && IsSink(source))
		return NEED_STORED;
	if ((rule->needs & NEED_EXACT) && mode != Mode::Exact)
		return NEED_EXACT;
	return 0;
}

void
RequireFeatureIn(const Subject &c, bool owns_target, Feature feature)
{
	const FeatureRule *rule = RuleOf(feature);
	unsigned some_citus = NEED_LOCAL_OR_HASH | NEED_LOCAL_OR_PENDING;
	bool distributed =
	    (rule->needs & (NEED_LOCAL | some_citus)) &&
	    integration_hooks.refuse_feature(c.name, c.source, rule->citus_what, (rule->needs & some_citus) != 0);
	if ((rule->needs & NEED_LOCAL_OR_PENDING) && distributed && c.partial)
		Refuse(&rule->citus_partial, c);
	if ((rule->needs & NEED_LOCAL_OR_PENDING) && distributed && c.mode == Mode::Exact)
		Refuse(&rule->citus_exact, c);
	switch (Unmet(rule, c.source, owns_target, c.mode)) {
	case NEED_OWN_TABLE:
	case NEED_CACHE:
		Refuse(&rule->table, c);
		break;
	case NEED_STORED:
		Refuse(&rule->stored, c);
		break;
	case NEED_EXACT:
		Refuse(&rule->mode, c);
		break;
	default:
		break;
	}
}

} // namespace

void
RequireFeatureOf(const char *name, Oid source, bool owns_target, Mode mode, Oid table, Feature feature)
{
	RequireFeatureIn({name, mode, table, source, false}, owns_target, feature);
}

void
RequireFeature(const Counter *e, Feature feature)
{
	/* (the layout is found only for a rule that asks) */
	bool partial = (RuleOf(feature)->needs & NEED_LOCAL_OR_PENDING) && HasPending(e->mode) && LayoutOf(e)->anchored;
	RequireFeatureIn({e->name, e->mode, e->target, e->source, partial}, e->owns_target, feature);
}

bool
HasFeature(const Counter *e, Feature feature)
{
	const FeatureRule *rule = RuleOf(feature);
	return Unmet(rule, e->source, e->owns_target, e->mode) == 0;
}

void
RequireModeKeeps(const char *name, Oid source, const CounterOptions *options, Mode mode, Oid table)
{
	Subject c = {name, mode, table, source, false};
	for (const FeatureRule &rule : RULES) {
		if (rule.held == nullptr || !rule.held(options))
			continue;
		if ((rule.needs & NEED_EXACT) && mode != Mode::Exact)
			Refuse(&rule.leaving, c);
		/* (entering exact mode on a hash-distributed table: refuse_feature passes it, and says so) */
		if ((rule.needs & NEED_LOCAL_OR_PENDING) && mode == Mode::Exact &&
		    integration_hooks.refuse_feature(name, source, rule.citus_what, true))
			Refuse(&rule.citus_exact, c);
	}
}

} // namespace counters
