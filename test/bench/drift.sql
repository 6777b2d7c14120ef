-- Prints the number of counter values that differ from a fresh recomputation (0 = exact).
SELECT (SELECT count(*) FROM (
	(SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating_sum FROM posts
	  WHERE is_published AND NOT is_deleted GROUP BY 1, 2
	 EXCEPT SELECT user_id, blog_id, posts, rating_sum FROM ubp_counter WHERE posts <> 0 OR rating_sum <> 0)
	UNION ALL
	(SELECT user_id, blog_id, posts, rating_sum FROM ubp_counter WHERE posts <> 0 OR rating_sum <> 0
	 EXCEPT SELECT user_id, blog_id, count(*), sum(rating) FROM posts
	  WHERE is_published AND NOT is_deleted GROUP BY 1, 2)) d)
     + (SELECT count(*) FROM (
	(SELECT blog_id, count(*) AS posts FROM posts WHERE is_published AND NOT is_deleted GROUP BY 1
	 EXCEPT SELECT blog_id, posts FROM bp_counter WHERE posts <> 0)
	UNION ALL
	(SELECT blog_id, posts FROM bp_counter WHERE posts <> 0
	 EXCEPT SELECT blog_id, count(*) FROM posts WHERE is_published AND NOT is_deleted GROUP BY 1)) d)
     + (SELECT count(*) FROM (
	(SELECT blog_id, count(DISTINCT user_id) AS authors FROM posts WHERE is_published AND NOT is_deleted GROUP BY 1
	 EXCEPT SELECT blog_id, authors FROM blog_authors_counter WHERE authors <> 0)
	UNION ALL
	(SELECT blog_id, authors FROM blog_authors_counter WHERE authors <> 0
	 EXCEPT SELECT blog_id, count(DISTINCT user_id) FROM posts WHERE is_published AND NOT is_deleted GROUP BY 1)) d);
