-- Ten counters on one source: the two of variant_exact and eight more of the kinds applications keep.
SELECT counters.create_counter('ubp', $$
	SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating_sum
	  FROM posts WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id$$);
SELECT counters.create_counter('bp', $$
	SELECT blog_id, count(*) AS posts FROM posts WHERE is_published AND NOT is_deleted GROUP BY blog_id$$);
SELECT counters.create_counter('c3_user_posts', $$SELECT user_id, count(*) AS n FROM posts GROUP BY user_id$$);
SELECT counters.create_counter('c4_blog_all', $$SELECT blog_id, count(*) AS n, sum(rating) AS r FROM posts GROUP BY blog_id$$);
SELECT counters.create_counter('c5_drafts', $$
	SELECT blog_id, count(*) FILTER (WHERE NOT is_published) AS drafts FROM posts GROUP BY blog_id$$);
SELECT counters.create_counter('c6_deleted', $$
	SELECT user_id, count(*) FILTER (WHERE is_deleted) AS deleted FROM posts GROUP BY user_id$$);
SELECT counters.create_counter('c7_rating', $$SELECT rating, count(*) AS n FROM posts GROUP BY rating$$);
SELECT counters.create_counter('c8_published', $$SELECT is_published, count(*) AS n FROM posts GROUP BY is_published$$);
SELECT counters.create_counter('c9_user_rating', $$
	SELECT user_id, sum(rating) FILTER (WHERE rating > 5) AS high FROM posts GROUP BY user_id$$);
SELECT counters.create_counter('c10_blog_users', $$
	SELECT blog_id, user_id % 10 AS bucket, count(*) AS n FROM posts GROUP BY blog_id, user_id % 10$$);
