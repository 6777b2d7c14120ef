-- Log mode: insert-only deltas, exact reads through a view, compaction, switching modes, top-K.
-- Every check compares the counter with a recomputation written here (absent row = zeros).
\set VERBOSITY terse
CREATE SCHEMA modes_test;
SET search_path = modes_test;
CREATE TABLE likes (id int PRIMARY KEY, post_id int, region text, weight numeric NOT NULL DEFAULT 1);
INSERT INTO likes SELECT g, g % 7, CASE WHEN g % 5 = 0 THEN NULL ELSE 'r' || (g % 3) END, g % 4
  FROM generate_series(1, 200) g;
CREATE VIEW recount AS
SELECT post_id, region, count(*) AS likes, sum(weight) AS weight FROM likes GROUP BY post_id, region;
SELECT counters.create_counter('post_likes',
	'SELECT post_id, region, count(*) AS likes, sum(weight) AS weight FROM likes GROUP BY post_id, region',
	mode => 'log');
CREATE FUNCTION drift() RETURNS bigint LANGUAGE sql AS $$
	SELECT count(*) FROM ((SELECT * FROM post_likes EXCEPT SELECT * FROM recount)
	                      UNION ALL (SELECT * FROM recount EXCEPT SELECT * FROM post_likes)) d
$$;
SELECT name, mode, target, totals, log FROM counters.counter;
SELECT relname, relkind FROM pg_class WHERE relnamespace = 'modes_test'::regnamespace AND relname LIKE 'post_likes%'
 ORDER BY 1;
SELECT drift(), (SELECT count(*) FROM post_likes_log) AS log_rows;
-- every write path appends to the log and reads stay exact
INSERT INTO likes VALUES (1000, 1, 'r1', 5), (1001, NULL, NULL, 2);
UPDATE likes SET post_id = post_id + 1 WHERE id % 3 = 0;
UPDATE likes SET region = NULL WHERE id % 11 = 0;
DELETE FROM likes WHERE id % 13 = 0;
INSERT INTO likes VALUES (1, 1, 'r1', 1) ON CONFLICT (id) DO UPDATE SET weight = likes.weight + 10;
COPY likes FROM STDIN;
2000	3	r2	7
2001	3	\N	1
\.
BEGIN;
DELETE FROM likes WHERE post_id = 3;
ROLLBACK;
BEGIN;
SAVEPOINT s;
UPDATE likes SET weight = weight * 2;
ROLLBACK TO s;
INSERT INTO likes VALUES (3000, 6, 'r0', 3);
COMMIT;
SELECT drift(), (SELECT count(*) FROM counters.verify()) AS verify_rows, (SELECT count(*) > 0 FROM post_likes_log) AS log_has_rows;
-- compaction folds every log row, leaves the values unchanged
SELECT (SELECT count(*) FROM post_likes_log) = counters.compact('post_likes') AS folded_all_log_rows;
SELECT drift(), (SELECT count(*) FROM post_likes_log) AS log_rows, (SELECT count(*) FROM counters.verify()) AS verify_rows;
-- a key brought to zero disappears after compaction
DELETE FROM likes WHERE post_id = 6;
SELECT count(*) AS post6_rows_in_view FROM post_likes WHERE post_id = 6;
SELECT counters.compact() > 0 AS folded;
SELECT count(*) AS post6_totals FROM post_likes_totals WHERE post_id = 6;
SELECT drift();
-- top-K, against ORDER BY ... LIMIT over the recomputation (ties broken by the keys, NULLs last)
INSERT INTO likes VALUES (4000, 2, NULL, 100);
(SELECT key, value FROM counters.top('post_likes', 'weight', 4))
EXCEPT ALL
(SELECT jsonb_build_object('post_id', post_id, 'region', region), weight FROM recount ORDER BY weight DESC, post_id, region LIMIT 4);
SELECT count(*) AS top_rows FROM counters.top('post_likes', 'weight', 4);
(SELECT key, value FROM counters.top('post_likes', 'likes', 3, 'region IS NULL'))
EXCEPT ALL
(SELECT jsonb_build_object('post_id', post_id, 'region', region), likes FROM recount WHERE region IS NULL
  ORDER BY likes DESC, post_id, region LIMIT 3);
-- switching modes keeps values and the readable name, and SELECT grants
CREATE ROLE counters_regress_reader;
GRANT USAGE ON SCHEMA modes_test TO counters_regress_reader;
SELECT counters.alter_counter('post_likes', 'exact');
SELECT mode FROM counters.counters WHERE name = 'post_likes';
SELECT relkind FROM pg_class WHERE oid = 'post_likes'::regclass;
SELECT drift();
GRANT SELECT ON post_likes TO counters_regress_reader;
UPDATE likes SET weight = weight + 1 WHERE id < 50;
SELECT counters.alter_counter('post_likes', 'log');
SELECT relkind FROM pg_class WHERE oid = 'post_likes'::regclass;
SET ROLE counters_regress_reader;
SELECT count(*) > 0 AS reader_can_read FROM post_likes;
RESET ROLE;
UPDATE likes SET weight = weight + 1 WHERE id < 50;
SELECT drift();
-- top-K in exact mode too
SELECT counters.alter_counter('post_likes', 'exact');
(SELECT key, value FROM counters.top('post_likes', 'weight', 4))
EXCEPT ALL
(SELECT jsonb_build_object('post_id', post_id, 'region', region), weight FROM recount ORDER BY weight DESC, post_id, region LIMIT 4);
-- many keys in one statement with a tiny statement_memory (several batches) stay exact in both modes
SET counters.statement_memory = 64;
INSERT INTO likes SELECT 10000 + g, g, 'bulk', 1 FROM generate_series(1, 5000) g;
SELECT drift();
SELECT counters.alter_counter('post_likes', 'log');
UPDATE likes SET post_id = post_id + 1 WHERE id > 10000;
SELECT drift();
RESET counters.statement_memory;
-- errors
SELECT counters.alter_counter('post_likes', 'sharded');
SELECT counters.alter_counter('nope', 'log');
SELECT counters.compact('nope');
SELECT counters.top('post_likes', 'nope', 3);
CREATE TABLE posts (id int PRIMARY KEY, like_count int);
SELECT counters.create_counter('cache', 'SELECT post_id AS id, count(*) AS like_count FROM likes GROUP BY post_id',
                               target => 'posts', mode => 'log');
SELECT count(*) AS cache_counters FROM counters.counter WHERE name = 'cache';
-- TRUNCATE empties totals and log
TRUNCATE likes;
SELECT count(*) AS rows_after_truncate FROM post_likes;
SELECT drift();
-- drop removes view, totals and log
SELECT counters.drop_counter('post_likes');
SELECT count(*) AS leftovers FROM pg_class WHERE relnamespace = 'modes_test'::regnamespace AND relname LIKE 'post_likes%';
DROP SCHEMA modes_test CASCADE;
DROP ROLE counters_regress_reader;
