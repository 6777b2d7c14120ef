/*
 * counters.hpp: the dialect and the few words every plane of src/ shares. CONTRIBUTING.md maps the files onto the
 * design:
 *
 *   model/    model.hpp    what a counter is: its catalog row, options, definition, owner, names and relations
 *   write/    write.hpp    the hot write path: trigger, capture, compile, delta, apply, direct, decide, windows
 *   control/  control.hpp  the cold control plane: declare, modes, options, maintenance, event triggers
 *   citus.hpp, worker.cpp  the integrations; stats.cpp the statistics kept in shared memory; functions.cpp the one
 *                          C boundary
 *
 * model includes only this header, compat.hpp and its own (it reaches Citus through its IntegrationHooks); write and
 * control include model; control also calls write (compile at declaration, announce after compaction); the write
 * path includes nothing from control. test/scripts/layers.sh checks the include graph.
 *
 * The dialect: C++17 used as C with namespaces, compiled without exceptions and RTTI, no standard library, memory
 * from palloc and memory contexts only. Every SQL-callable symbol is defined with COUNTERS_FUNCTION (functions.cpp),
 * the one C boundary. PostgreSQL errors are longjmps: no object with a destructor lives on a stack they can unwind.
 */
#pragma once

extern "C" {
#include "postgres.h"

#include "access/attmap.h"
#include "access/tupdesc.h"
#include "datatype/timestamp.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/bitmapset.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "utils/array.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"
}

/* A counter's name, in bytes: "<name>_definition" must be an identifier (NAMEDATALEN - 1 bytes). */
#define COUNTER_NAME_MAX_BYTES (NAMEDATALEN - 1 - 11)

namespace counters {

struct CounterDef;      /* a definition decomposed into the universal formula (model.hpp) */
struct Counter;         /* a counter: its catalog row, typed (model.hpp) */
struct CompiledCounter; /* a counter's executable form in this backend (write.hpp) */

/* The compaction background worker (worker.cpp): GUCs, and workers registered when preloaded. */
void InitWorkers();

/*
 * stats.cpp: per-counter statistics of the write path, kept in shared memory when the library is preloaded
 * (shared_preload_libraries); else StatsKept() is false and nothing is kept. Keyed by the counter's definition view.
 */
struct CounterStats {
	int64 calls; /* statements whose rows the counter counted */
	int64 rows;  /* source rows it evaluated */
	int64 keys;  /* counter keys it wrote deltas to */
	double time_ms;
	TimestampTz since;         /* server start, or the database's last counters.reset_stats() */
	TimestampTz pending_since; /* commit time of the oldest delta not folded yet (0: none) */
};
void InitStats();
bool StatsKept();
/* pending: the keys went to a log or slots, to be folded by compaction (NoteCompactionStart, before its snapshot) */
void ReportCounterStats(Oid query, int64 rows, int64 keys, double time_ms, bool pending);
void NoteCompactionStart(Oid query);
void ForgetCounterStats(Oid query);
bool ReadCounterStats(Oid query, CounterStats *out); /* false: not kept */
bool ResetCounterStats();                            /* this database's; false: not kept */

} // namespace counters
