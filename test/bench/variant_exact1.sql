-- One counter on the source (count and sum per (user, blog)): the single-row cost with the least work per row.
SELECT counters.create_counter('ubp', $$
	SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating_sum
	  FROM posts WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id$$);
