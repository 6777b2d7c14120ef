-- The two counters of the OLTP workloads (per (user, blog) and per blog), in exact mode or in the mode psql's
-- variable `mode` names: variant_log.sql and variant_sharded.sql set it and read this file.
\if :{?mode}
\else
\set mode exact
\endif
SELECT counters.create_counter('ubp', $$
	SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating_sum
	  FROM posts WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id$$, mode => :'mode');
SELECT counters.create_counter('bp', $$
	SELECT blog_id, count(*) AS posts FROM posts WHERE is_published AND NOT is_deleted GROUP BY blog_id$$,
	mode => :'mode');
