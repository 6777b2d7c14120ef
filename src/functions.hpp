/*
 * functions.hpp: what the files of the C boundary share (functions.cpp, functions_legacy.cpp). COUNTERS_FUNCTION
 * defines an SQL-callable function with C linkage; nothing else is exported to PostgreSQL.
 */
#pragma once

#include "control/control.hpp"

extern "C" {
#include "utils/builtins.h"
}

#define COUNTERS_FUNCTION(name)                                                                                        \
	extern "C" {                                                                                                       \
	PGDLLEXPORT PG_FUNCTION_INFO_V1(name);                                                                             \
	}                                                                                                                  \
	extern "C" Datum name(PG_FUNCTION_ARGS)

/* A text argument, or NULL. */
inline char *
TextArg(FunctionCallInfo fcinfo, int n)
{
	return PG_ARGISNULL(n) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(n));
}
