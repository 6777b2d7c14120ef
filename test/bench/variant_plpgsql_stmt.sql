-- A careful hand-written alternative: statement triggers with transition tables, deltas summed per key.
\ir plpgsql_tables.sql
SET check_function_bodies = off; -- the temp table is created per session by the trigger
CREATE FUNCTION posts_counters_apply() RETURNS void LANGUAGE sql AS $$
	INSERT INTO ubp_plpgsql AS c
	SELECT user_id, blog_id, sum(n), sum(r) FROM pg_temp.posts_delta GROUP BY 1, 2 ORDER BY 1, 2
	ON CONFLICT (user_id, blog_id) DO UPDATE
	SET posts = c.posts + EXCLUDED.posts, rating_sum = c.rating_sum + EXCLUDED.rating_sum;
	INSERT INTO bp_plpgsql AS c SELECT blog_id, sum(n) FROM pg_temp.posts_delta GROUP BY 1 ORDER BY 1
	ON CONFLICT (blog_id) DO UPDATE SET posts = c.posts + EXCLUDED.posts;
$$;
CREATE FUNCTION posts_counters_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	CREATE TEMP TABLE IF NOT EXISTS posts_delta (user_id int, blog_id int, n bigint, r bigint);
	TRUNCATE pg_temp.posts_delta;
	IF TG_OP IN ('UPDATE', 'DELETE') THEN
		INSERT INTO pg_temp.posts_delta SELECT user_id, blog_id, -1, -rating FROM old_rows
		 WHERE is_published AND NOT is_deleted;
	END IF;
	IF TG_OP IN ('UPDATE', 'INSERT') THEN
		INSERT INTO pg_temp.posts_delta SELECT user_id, blog_id, 1, rating FROM new_rows
		 WHERE is_published AND NOT is_deleted;
	END IF;
	PERFORM posts_counters_apply();
	RETURN NULL;
END $$;
CREATE TRIGGER posts_counters_i AFTER INSERT ON posts REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION posts_counters_stmt();
CREATE TRIGGER posts_counters_u AFTER UPDATE ON posts REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION posts_counters_stmt();
CREATE TRIGGER posts_counters_d AFTER DELETE ON posts REFERENCING OLD TABLE AS old_rows
	FOR EACH STATEMENT EXECUTE FUNCTION posts_counters_stmt();
