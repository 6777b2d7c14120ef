-- pg_ivm (optional; runs when the extension is available): an incrementally maintained materialized view of the
-- same aggregate, as its README declares one. pg_ivm 1.10 and later keep create_immv in schema pgivm.
CREATE EXTENSION pg_ivm;
SELECT * FROM pgivm.create_immv('ubp_ivm', $$
	SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating_sum
	  FROM posts WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id$$);
SELECT * FROM pgivm.create_immv('bp_ivm', $$
	SELECT blog_id, count(*) AS posts FROM posts WHERE is_published AND NOT is_deleted GROUP BY blog_id$$);
