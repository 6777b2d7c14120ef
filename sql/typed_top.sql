--
-- typed_top: counters.top(NULL::<relation>, column_name, k, filter) returns the k largest keys as whole rows of the
-- counter's own row type (the relation users read it from: its table, or in log and sharded mode its view). Every
-- check compares three things: the typed rows, in order, with a recount written out here (a plain GROUP BY over the
-- source, ORDER BY value DESC, keys LIMIT k), and with the jsonb form counters.top(name, ...) (its key and value
-- against the same columns of the typed rows). Keys of type int (with NULL), text, timestamptz, two key columns, a
-- counter kept in columns of an existing table (with a dropped column), in exact, log and sharded mode with pending
-- deltas; then the errors, and a reader without SELECT privilege.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA typed_top_test;
SET search_path = typed_top_test, regress;

CREATE TABLE events (id serial PRIMARY KEY, post_id int, tag text, at timestamptz NOT NULL, blog_id int NOT NULL,
                     author text, weight int NOT NULL);
-- post p (1 to 12, and NULL) gets p + 1 rows; tags, hours and authors spread over them; weights scrambled
INSERT INTO events (post_id, tag, at, blog_id, author, weight)
SELECT nullif(p, 13), 'tag ' || ((p * 7 + g) % 9), '2024-03-01 00:00+00'::timestamptz + ((p * 5 + g) % 11) * interval '1 hour',
       1 + (p + g) % 3, CASE WHEN (p + g) % 4 = 0 THEN NULL ELSE 'author ' || ((p * 3 + g) % 5) END, (p * 13 + g * 7) % 17
  FROM generate_series(1, 13) p, generate_series(0, p) g
 ORDER BY (p * 31 + g * 17) % 23, p, g;

-- The check: for counter `counter` read through row type `rel`, value column `col`, the first k rows (key columns
-- `keys` break ties, in the counter's order): how many typed rows came back, and every difference (NULL: none) with
-- the recount `recount` (a query with the relation's columns) and with the jsonb form.
CREATE FUNCTION top_check(counter text, rel regtype, col text, k int, keys text[], recount text, filter text DEFAULT NULL)
RETURNS TABLE (returned bigint, tied boolean, differences jsonb)
LANGUAGE plpgsql AS $$
DECLARE
	order_by text := format('%I DESC', col) || (SELECT string_agg(format(', %I', x), '' ORDER BY o)
	                                              FROM unnest(keys) WITH ORDINALITY u(x, o));
BEGIN
	RETURN QUERY EXECUTE format($q$
		WITH typed AS (SELECT t.ordinality AS rank, to_jsonb(t) - 'ordinality' AS r
		                 FROM counters.top(NULL::%1$s, %2$L, %3$s, %4$L) WITH ORDINALITY t),
		     recounted AS (SELECT row_number() OVER (ORDER BY %5$s) AS rank, to_jsonb(x) AS r
		                     FROM (%6$s) x WHERE %7$s ORDER BY %5$s LIMIT %3$s),
		     by_name AS (SELECT t.o AS rank, t.key || jsonb_build_object(%2$L, t.value) AS r
		                   FROM counters.top(%8$L, %2$L, %3$s, %4$L) WITH ORDINALITY t(key, value, o)),
		     projected AS (SELECT t.rank, (SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(t.r) e
		                                    WHERE e.key = ANY (%9$L::text[])) AS r FROM typed t),
		     diff AS (SELECT 'typed only' AS side, * FROM (TABLE typed EXCEPT ALL TABLE recounted) a
		              UNION ALL SELECT 'recount only', * FROM (TABLE recounted EXCEPT ALL TABLE typed) b
		              UNION ALL SELECT 'typed (key, value) only', * FROM (TABLE projected EXCEPT ALL TABLE by_name) c
		              UNION ALL SELECT 'jsonb form only', * FROM (TABLE by_name EXCEPT ALL TABLE projected) d),
		     ranked AS (SELECT row_number() OVER (ORDER BY %5$s) AS rank, x.%10$I AS v FROM (%6$s) x WHERE %7$s)
		SELECT (SELECT count(*) FROM typed),
		       (SELECT count(*) = 2 AND count(DISTINCT v) = 1 FROM ranked WHERE rank IN (%3$s, %3$s + 1)),
		       (SELECT jsonb_agg(to_jsonb(diff) ORDER BY side, rank) FROM diff)
	$q$, rel, col, coalesce(k::text, 'NULL'), filter, order_by, recount, coalesce(filter, 'true'), counter,
	     keys || col, col);
END $$;

-- The recounts, written out (groups whose values are all zero are never stored).
CREATE VIEW post_recount AS
	SELECT post_id, count(*) AS n, sum(weight) AS w FROM events GROUP BY post_id;
CREATE VIEW tag_recount AS
	SELECT tag, count(*) AS n, sum(weight) AS w FROM events GROUP BY tag;
CREATE VIEW hour_recount AS
	SELECT at AS hour, count(*) AS n, sum(weight) AS w FROM events GROUP BY at;
CREATE VIEW author_recount AS
	SELECT blog_id, author, count(*) AS n, sum(weight) AS w FROM events GROUP BY blog_id, author;
CREATE TYPE pair AS (blog int, author text);
CREATE VIEW pair_recount AS
	SELECT CASE WHEN blog_id <> 3 THEN (blog_id, author)::pair END AS pair, count(*) AS n, sum(weight) AS w
	  FROM events GROUP BY 1;

-- the same definition in the three modes, and keys of other types
SELECT counters.create_counter('post_exact', 'SELECT post_id, count(*) AS n, sum(weight) AS w FROM events GROUP BY post_id');
SELECT counters.create_counter('post_log', 'SELECT post_id, count(*) AS n, sum(weight) AS w FROM events GROUP BY post_id',
                               mode => 'log');
SELECT counters.create_counter('post_sharded', 'SELECT post_id, count(*) AS n, sum(weight) AS w FROM events GROUP BY post_id',
                               mode => 'sharded');
SELECT counters.create_counter('tags', 'SELECT tag, count(*) AS n, sum(weight) AS w FROM events GROUP BY tag', mode => 'log');
SELECT counters.create_counter('hours', 'SELECT at AS hour, count(*) AS n, sum(weight) AS w FROM events GROUP BY at',
                               mode => 'sharded');
SELECT counters.create_counter('authors',
                               'SELECT blog_id, author, count(*) AS n, sum(weight) AS w FROM events GROUP BY blog_id, author');
-- a key of a composite type (NULL for blog 3)
SELECT counters.create_counter('pairs', $$
	SELECT CASE WHEN blog_id <> 3 THEN (blog_id, author)::pair END AS pair, count(*) AS n, sum(weight) AS w
	  FROM events GROUP BY 1
$$, mode => 'log');
-- two counters kept in columns of one existing table (with a dropped column between theirs): the column picks the
-- counter
CREATE TABLE posts (id int PRIMARY KEY, title text, gone int, like_count bigint NOT NULL DEFAULT 0, created date,
                    weight_sum bigint NOT NULL DEFAULT 0);
INSERT INTO posts (id, title, created) SELECT g, 'post ' || g, '2024-01-01'::date + g FROM generate_series(1, 14) g;
ALTER TABLE posts DROP COLUMN gone;
SELECT counters.create_counter('post_likes', 'SELECT post_id AS id, count(*) AS like_count FROM events GROUP BY post_id',
                               target => 'posts');
SELECT counters.create_counter('post_weights', 'SELECT post_id AS id, sum(weight) AS weight_sum FROM events GROUP BY post_id',
                               target => 'posts');
CREATE VIEW posts_recount AS
	SELECT p.id, p.title, coalesce(r.n, 0) AS like_count, p.created, coalesce(r.w, 0) AS weight_sum
	  FROM posts p LEFT JOIN (SELECT post_id, count(*) AS n, sum(weight) AS w FROM events GROUP BY post_id) r
	    ON r.post_id = p.id;

-- Every case, as (counter, row type, column, k, key columns, recount, filter).
CREATE TABLE cases (counter text, rel regtype, col text, k int, keys text[], recount text, filter text);
INSERT INTO cases
SELECT c.counter, c.counter::regtype, col, k, '{post_id}', 'TABLE post_recount', f
  FROM unnest(ARRAY['post_exact', 'post_log', 'post_sharded']) c(counter), unnest(ARRAY['n', 'w']) col,
       unnest(ARRAY[1, 3, 13, 20]) k, unnest(ARRAY[NULL, 'post_id IS NULL OR post_id > 6', 'post_id BETWEEN 2 AND 9']) f;
INSERT INTO cases
SELECT 'tags', 'tags', col, k, '{tag}', 'TABLE tag_recount', f
  FROM unnest(ARRAY['n', 'w']) col, unnest(ARRAY[1, 4, 20]) k, unnest(ARRAY[NULL, 'tag > ''tag 3''']) f;
INSERT INTO cases
SELECT 'hours', 'hours', col, k, '{hour}', 'TABLE hour_recount', f
  FROM unnest(ARRAY['n', 'w']) col, unnest(ARRAY[1, 4, 20]) k,
       unnest(ARRAY[NULL, 'hour >= ''2024-03-01 05:00+00''']) f;
INSERT INTO cases
SELECT 'authors', 'authors', col, k, '{blog_id,author}', 'TABLE author_recount', f
  FROM unnest(ARRAY['n', 'w']) col, unnest(ARRAY[1, 5, 30]) k,
       unnest(ARRAY[NULL, 'author IS NULL OR blog_id = 2', 'w > 40']) f;
INSERT INTO cases
SELECT 'pairs', 'pairs', col, k, '{pair}', 'TABLE pair_recount', f
  FROM unnest(ARRAY['n', 'w']) col, unnest(ARRAY[1, 4, 20]) k, unnest(ARRAY[NULL, '(pair).blog = 2 OR pair IS NULL']) f;
INSERT INTO cases
SELECT counter, 'posts', col, k, '{id}', 'TABLE posts_recount', f
  FROM (VALUES ('post_likes', 'like_count'), ('post_weights', 'weight_sum')) c(counter, col), unnest(ARRAY[1, 5, 20]) k,
       unnest(ARRAY[NULL, 'created > ''2024-01-05''', 'like_count < 8']) f;
-- all cases at once: how many, how many returned rows, and those with differences (none expected); `tied`: cases
-- whose recount has equal values at positions k and k + 1, where ties are broken by the keys
CREATE FUNCTION all_checks() RETURNS TABLE (counter text, cases bigint, returned numeric, tied bigint, failed bigint)
LANGUAGE sql AS $$
	SELECT c.counter, count(*), sum(r.returned), count(*) FILTER (WHERE r.tied),
	       count(*) FILTER (WHERE r.differences IS NOT NULL)
	  FROM cases c, top_check(c.counter, c.rel, c.col, c.k, c.keys, c.recount, c.filter) r
	 GROUP BY 1 ORDER BY 1
$$;
CREATE FUNCTION failures() RETURNS TABLE (counter text, col text, k int, filter text, differences jsonb)
LANGUAGE sql AS $$
	SELECT c.counter, c.col, c.k, c.filter, r.differences
	  FROM cases c, top_check(c.counter, c.rel, c.col, c.k, c.keys, c.recount, c.filter) r
	 WHERE r.differences IS NOT NULL ORDER BY 1, 2, 3, 4
$$;

-- what the typed form looks like: the counter's own columns and types
SELECT * FROM counters.top(NULL::post_exact, 'w', 4);
SELECT post_id, n FROM counters.top(NULL::post_log, 'n', 3, 'post_id IS NULL OR post_id < 5');
SELECT * FROM counters.top(NULL::hours, 'w', 3);
SELECT * FROM counters.top(NULL::authors, 'n', 3);
SELECT p.pair, (p.pair).blog, p.w FROM counters.top(NULL::pairs, 'w', 4, 'pair IS NOT NULL') p;
SELECT * FROM counters.top(NULL::posts, 'like_count', 3);
SELECT * FROM counters.top(NULL::posts, 'weight_sum', 3);
SELECT pg_typeof(t), pg_typeof(t.post_id), pg_typeof(t.n), pg_typeof(t.w) FROM counters.top(NULL::post_sharded, 'n', 1) t;
-- in a select list as well, and with k NULL (every key)
SELECT counters.top(NULL::tags, 'w', 2);
SELECT count(*) FROM counters.top(NULL::post_log, 'n', NULL);
-- a string literal as first argument still calls the jsonb form (an unknown-type argument prefers text)
SELECT * FROM counters.top('post_exact', 'w', 2);
SELECT * FROM counters.top(name => 'post_exact', column_name => 'w', k => 2);

SELECT * FROM all_checks();
SELECT * FROM failures();

-- pending deltas: log rows and slot rows move keys up and down past others, the NULL key included, and add keys
SELECT counters.compact() >= 0 AS compacted;
INSERT INTO events (post_id, tag, at, blog_id, author, weight)
SELECT p, 'tag ' || (g % 3), '2024-03-01 02:00+00'::timestamptz + g * interval '3 hours', 2, 'author 9', g % 5
  FROM (VALUES (3), (3), (3), (3), (3), (3), (3), (3), (14), (14), (NULL)) v(p), generate_series(1, 2) g;
DELETE FROM events WHERE id IN (SELECT id FROM events WHERE post_id IN (12, 11) ORDER BY id LIMIT 9);
UPDATE events SET post_id = 5, weight = weight + 3 WHERE id IN (SELECT id FROM events WHERE post_id = 10 ORDER BY id LIMIT 4);
UPDATE events SET tag = NULL WHERE id % 7 = 0;
SELECT (SELECT count(*) FROM post_log_log) AS post_log_pending, (SELECT count(*) FROM post_sharded_slots) AS post_slots_pending,
       (SELECT count(*) FROM tags_log) AS tags_pending, (SELECT count(*) FROM hours_slots) AS hours_pending,
       (SELECT count(*) FROM pairs_log) AS pairs_pending;
SELECT * FROM counters.top(NULL::post_log, 'n', 4);
SELECT * FROM counters.top(NULL::post_sharded, 'w', 4, 'post_id IS NULL OR post_id > 6');
SELECT * FROM all_checks();
SELECT * FROM failures();
-- and once compacted
SELECT counters.compact() > 0 AS compacted;
SELECT * FROM all_checks();
SELECT * FROM failures();

--
-- errors
--
-- (regress.errors: setup.sql)
-- a row type no counter is read from: the source, another counter's totals or log, a definition view, not a row type
SELECT * FROM errors(
	$$SELECT * FROM counters.top(NULL::events, 'n', 3)$$,
	$$SELECT * FROM counters.top(NULL::post_log_totals, 'n', 3)$$,
	$$SELECT * FROM counters.top(NULL::post_sharded_slots, 'n', 3)$$,
	$$SELECT * FROM counters.top(NULL::post_exact_definition, 'n', 3)$$,
	$$SELECT * FROM counters.top(42, 'n', 3)$$);
-- no such value column, a key column, NULL arguments; in log and sharded mode the filter may name key columns only,
-- as in the jsonb form
SELECT * FROM errors(
	$$SELECT * FROM counters.top(NULL::post_exact, 'nope', 3)$$,
	$$SELECT * FROM counters.top(NULL::posts, 'title', 3)$$,
	$$SELECT * FROM counters.top(NULL::authors, 'author', 3)$$,
	$$SELECT * FROM counters.top(NULL::post_exact, NULL, 3)$$,
	$$SELECT * FROM counters.top(NULL, 'n', 3)$$,   -- (the jsonb form: NULL is of unknown type)
	$$SELECT * FROM counters.top(NULL::post_log, 'n', 3, 'w > 10')$$);

--
-- privileges: the caller reads with its own rights and needs SELECT on what the counter is read from (in log and
-- sharded mode the totals and the log or slots too, as for the jsonb form)
--
SET ROLE NONE;
CREATE ROLE typed_top_reader;
RESET ROLE;
GRANT USAGE ON SCHEMA typed_top_test TO typed_top_reader;
SET ROLE typed_top_reader;
SELECT * FROM counters.top(NULL::post_exact, 'n', 2);
\echo SQLSTATE :SQLSTATE
SELECT * FROM counters.top(NULL::post_log, 'n', 2);
\echo SQLSTATE :SQLSTATE
SELECT * FROM counters.top(NULL::posts, 'like_count', 2);
\echo SQLSTATE :SQLSTATE
RESET ROLE;
GRANT SELECT ON post_exact, post_log, post_log_totals, post_log_log TO typed_top_reader;
SET ROLE typed_top_reader;
SELECT * FROM counters.top(NULL::post_exact, 'n', 2);
SELECT * FROM counters.top(NULL::post_log, 'n', 2);
SELECT * FROM counters.top('post_exact', 'n', 2);
RESET ROLE;
-- (the same reads as the test's role)
SELECT * FROM counters.top(NULL::post_exact, 'n', 2);
SELECT * FROM counters.top(NULL::post_log, 'n', 2);

-- clean up
SELECT counters.drop_counter(name) FROM counters.counter ORDER BY name;
SELECT count(*) AS catalog_rows FROM counters.counter;
SET client_min_messages = warning;
DROP SCHEMA typed_top_test CASCADE;
SET ROLE NONE; DROP OWNED BY typed_top_reader; DROP ROLE typed_top_reader; RESET ROLE;
RESET client_min_messages;
RESET search_path;
