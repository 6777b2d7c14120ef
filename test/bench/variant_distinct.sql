-- The exact variant's two counters, and distinct authors per blog: a counter over ubp, the (user, blog) pair counter
-- (docs/aggregates.md, "count(DISTINCT x)"). Against `exact`, it measures what keeping count(DISTINCT user_id) per
-- blog adds: one more counter row version when a (user, blog) pair appears or goes.
\ir variant_exact.sql
SELECT counters.create_counter('blog_authors', $$SELECT blog_id, count(*) AS authors FROM ubp GROUP BY blog_id$$);
