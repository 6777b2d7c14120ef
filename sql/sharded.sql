--
-- sharded: mode => 'sharded' keeps up to max_slots rows per key in <name>_slots, plus <name>_totals, read through the
-- view <name> (totals plus slots). A writer updates a slot row no other transaction holds or creates a new one (see the
-- isolation spec sharded_hot_key for the concurrency); compact() folds the idle slots into the totals. Every check
-- compares with the definition (counters.verify lists nothing) or with a recount written out here.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA sharded_test;
SET search_path = sharded_test;

CREATE TABLE likes (id serial PRIMARY KEY, tweet_id int, user_id int NOT NULL);
INSERT INTO likes (tweet_id, user_id) SELECT g % 3, g FROM generate_series(1, 30) g;
INSERT INTO likes (tweet_id, user_id) VALUES (NULL, 1);
SELECT counters.create_counter('tweet_likes', $$
	SELECT tweet_id, count(*) AS likes, sum(user_id) AS user_sum FROM likes GROUP BY tweet_id
$$, mode => 'sharded');
SELECT name, mode, options FROM counters.counters;
-- the view users read, the totals (filled at declaration) and the slots with their slot number and unique key
SELECT c.relname, c.relkind FROM pg_class c WHERE c.relnamespace = 'sharded_test'::regnamespace AND c.relname LIKE 'tweet_likes%' ORDER BY 1;
\d tweet_likes_slots

-- Writes go to slot rows (one per key here: no concurrency), NULL key included; a slot can go negative.
INSERT INTO likes (tweet_id, user_id) VALUES (1, 5);
INSERT INTO likes (tweet_id, user_id) VALUES (1, 5), (2, 7), (NULL, 3);
DELETE FROM likes WHERE id = 3;
SELECT tweet_id, likes, user_sum FROM tweet_likes_slots ORDER BY tweet_id;
SELECT * FROM tweet_likes ORDER BY tweet_id;
SELECT t.tweet_id, t.likes, (SELECT count(*) FROM likes l WHERE l.tweet_id IS NOT DISTINCT FROM t.tweet_id) AS recount
  FROM tweet_likes t ORDER BY 1;
SELECT * FROM counters.verify();

-- Compaction folds the slots; the values do not change.
SELECT counters.compact('tweet_likes');
SELECT count(*) AS slot_rows FROM tweet_likes_slots;
SELECT * FROM tweet_likes ORDER BY tweet_id;
SELECT * FROM counters.top('tweet_likes', 'likes', 2);
SELECT * FROM counters.verify();

-- A key whose slot comes back to zero loses its slot row; a key that drops to zero overall leaves the view.
INSERT INTO likes (tweet_id, user_id) VALUES (7, 1);
DELETE FROM likes WHERE tweet_id = 7;
SELECT count(*) AS slot_rows FROM tweet_likes_slots;
SELECT count(*) AS key_7 FROM tweet_likes WHERE tweet_id = 7;

-- max_slots: changed alone; only sharded counters have it; 1 to 1024.
SELECT counters.alter_counter('tweet_likes', 'sharded', max_slots => 4);
SELECT options FROM counters.counters WHERE name = 'tweet_likes';
-- ... and rejected (regress.errors: setup.sql); bounds and thresholds need exact values at write time
SELECT * FROM regress.errors(
	$$SELECT counters.alter_counter('tweet_likes', 'sharded', max_slots => 0)$$,
	$$SELECT counters.alter_counter('tweet_likes', 'exact', max_slots => 4)$$,
	$$SELECT counters.set_bounds('tweet_likes', 'likes', max => 100)$$);

-- Switching: sharded -> log goes through exact; -> sharded again; -> exact. Values stay exact at every step.
INSERT INTO likes (tweet_id, user_id) VALUES (1, 1), (2, 2);
SELECT counters.alter_counter('tweet_likes', 'log');
SELECT name, mode, options FROM counters.counters;
SELECT * FROM counters.verify();
SELECT counters.alter_counter('tweet_likes', 'sharded');
INSERT INTO likes (tweet_id, user_id) VALUES (1, 1);
SELECT * FROM counters.verify();
SELECT counters.alter_counter('tweet_likes', 'exact');
SELECT name, mode, options FROM counters.counters;
SELECT c.relname, c.relkind FROM pg_class c WHERE c.relnamespace = 'sharded_test'::regnamespace AND c.relname LIKE 'tweet_likes%' ORDER BY 1;
SELECT * FROM counters.verify();

-- rebuild and drop in sharded mode
SELECT counters.alter_counter('tweet_likes', 'sharded');
INSERT INTO likes (tweet_id, user_id) VALUES (2, 9);
UPDATE tweet_likes_totals SET likes = likes + 100 WHERE tweet_id = 0;
SELECT counter, key, column_name FROM counters.verify();
SET client_min_messages = warning;
SELECT counters.rebuild('tweet_likes');
RESET client_min_messages;
SELECT * FROM counters.verify();
SELECT counters.drop_counter('tweet_likes');
SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'sharded_test'::regnamespace AND c.relname LIKE 'tweet_likes%';

-- A value column declared before a key (found by fuzzing): the view, compaction and rebuild keep each column in its
-- place, in log and sharded mode alike.
CREATE TABLE t1 (k int, v int, d date);
INSERT INTO t1 VALUES (1, 10, '2026-01-01'), (2, 3, '2026-01-02');
SELECT counters.create_counter('value_first_log', 'SELECT sum(v) AS s, k FROM t1 GROUP BY k', mode => 'log');
SELECT counters.create_counter('value_first_sharded', 'SELECT count(*) AS n, d FROM t1 GROUP BY d', mode => 'sharded');
INSERT INTO t1 VALUES (1, 5, '2026-01-01'), (3, 1, '2026-01-03');
SELECT counters.compact() > 0 AS compacted;
SELECT count(*) AS differences FROM ((TABLE value_first_log EXCEPT SELECT sum(v), k FROM t1 GROUP BY k)
                                     UNION ALL (SELECT sum(v), k FROM t1 GROUP BY k EXCEPT TABLE value_first_log)) x;
SELECT count(*) AS differences FROM ((TABLE value_first_sharded EXCEPT SELECT count(*), d FROM t1 GROUP BY d)
                                     UNION ALL (SELECT count(*), d FROM t1 GROUP BY d EXCEPT TABLE value_first_sharded)) x;
UPDATE value_first_log_totals SET s = s + 100 WHERE k = 1;
UPDATE value_first_sharded_totals SET n = n + 100;
SELECT counter, key, column_name FROM counters.verify() ORDER BY 1, 2;
SET client_min_messages = warning;
SELECT counters.rebuild() AS repaired;
RESET client_min_messages;
SELECT * FROM counters.verify();
SELECT counters.drop_counter('value_first_log');
SELECT counters.drop_counter('value_first_sharded');

RESET search_path;
DROP SCHEMA sharded_test CASCADE;
