SELECT counters.create_counter('ubp', $$
	SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating_sum
	  FROM posts WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id$$, mode => 'sharded');
SELECT counters.create_counter('bp', $$
	SELECT blog_id, count(*) AS posts FROM posts WHERE is_published AND NOT is_deleted GROUP BY blog_id$$,
	mode => 'sharded');
