-- The counters of variant_exact.sql in log mode.
\set mode log
\ir variant_exact.sql
