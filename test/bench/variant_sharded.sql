-- The counters of variant_exact.sql in sharded mode.
\set mode sharded
\ir variant_exact.sql
