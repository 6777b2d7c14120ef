-- The randomized property test (property.sql) with counters in log mode: the counters that have a table of their own
-- start in log mode (one stays exact), and the random batches also compact (one counter or all, inside batches that
-- commit or roll back, and between batches; each compaction is a test) and switch counters between exact and log mode
-- (between batches and inside them). Every check compares each counter, read through its view, with the recount, and
-- requires that log-mode totals hold no all-zero row. Reproduce a failure with the seed it prints:
--   COUNTERS_PROPERTY_SEED=0.25 COUNTERS_PROPERTY_KEEP=1 pg_prove -d db test/pgtap/property_log.sql
\set counters_mode log
\set seed 0.5151
\ir property.sql
