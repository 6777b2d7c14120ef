-- counters 0.4 to 0.5 (complain if this file is sourced in psql rather than through ALTER EXTENSION)
\echo Use "ALTER EXTENSION counters UPDATE TO '0.5'" to load this file. \quit
