-- The randomized property test (property.sql) with counters in sharded mode: the counters that have a table of their
-- own start sharded (one stays exact, two switch to log at the start, so all three modes live side by side), and the
-- random batches compact and switch counters between exact and sharded mode, between batches and inside them. Every
-- check compares each counter, read through its view, with the recount, and requires that the totals hold no
-- all-zero row and that each compaction folds every slot row (no other transaction holds one at that point).
-- Reproduce a failure with the seed it prints:
--   COUNTERS_PROPERTY_SEED=0.25 COUNTERS_PROPERTY_KEEP=1 pg_prove -d db test/pgtap/property_sharded.sql
\set counters_mode sharded
\set seed 0.7373
\ir property.sql
