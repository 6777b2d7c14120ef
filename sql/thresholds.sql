--
-- thresholds: counters.set_thresholds(name, column, thresholds, callback). When a statement moves a counter value
-- across a threshold, up (from below to at or above it) or down, the callback is called once per crossing in the
-- same transaction, and a NOTIFY goes to channel "counters.<name>" (the isolation spec thresholds_notify listens to
-- it from another session). Here the callback records what it is told, and every step compares that record with
-- what the counter values did.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA thresholds_test;
SET search_path = thresholds_test;

-- The seed's golden posts: a post becomes golden when its rating reaches 100, and stops being golden below.
CREATE TABLE posts (id int PRIMARY KEY, title text, is_golden boolean NOT NULL DEFAULT false);
CREATE TABLE votes (id serial PRIMARY KEY, post_id int NOT NULL, value int NOT NULL);
INSERT INTO posts SELECT g, 'post ' || g FROM generate_series(1, 4) g;
SELECT counters.create_counter('post_rating', $$
	SELECT post_id, count(*) AS votes, sum(value) AS rating FROM votes GROUP BY post_id
$$);
CREATE TABLE crossings (n serial, counter text, key jsonb, column_name text, old numeric, new numeric,
                        threshold numeric, direction text);
-- The callback runs with search_path = pg_catalog, pg_temp: it names its tables with their schema.
CREATE FUNCTION on_crossing(counter text, key jsonb, column_name text, old numeric, new numeric,
                            threshold numeric, direction text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO thresholds_test.crossings (counter, key, column_name, old, new, threshold, direction)
	VALUES (counter, key, column_name, old, new, threshold, direction);
	IF threshold = 100 THEN
		UPDATE thresholds_test.posts SET is_golden = (direction = 'up') WHERE id = (key ->> 'post_id')::int;
	END IF;
END $$;
SELECT counters.set_thresholds('post_rating', 'rating', '{100}', 'on_crossing'::regproc);
SELECT * FROM counters.thresholds;

-- Below, at, above, below again: one crossing up at 100, one down.
INSERT INTO votes (post_id, value) VALUES (1, 60);
INSERT INTO votes (post_id, value) VALUES (1, 40);
INSERT INTO votes (post_id, value) VALUES (1, 5);
DELETE FROM votes WHERE post_id = 1 AND value = 40;
SELECT n, key, column_name, old, new, threshold, direction FROM crossings ORDER BY n;
SELECT id, is_golden FROM posts ORDER BY id;

-- Several thresholds, crossed together by one statement, many keys at once: each crossing reported once, in key
-- order, thresholds ascending.
SELECT counters.set_thresholds('post_rating', 'rating', '{100, 10, 50, 10}', 'on_crossing'::regproc);
SELECT counters.set_thresholds('post_rating', 'votes', '{3}', 'on_crossing'::regproc);
SELECT * FROM counters.thresholds ORDER BY column_name;
TRUNCATE crossings;
INSERT INTO votes (post_id, value) VALUES (3, 70), (2, 120), (3, 40), (4, 5), (2, 1);
SELECT n, key, column_name, old, new, threshold, direction FROM crossings ORDER BY n;
SELECT id, is_golden FROM posts ORDER BY id;
-- Every crossing agrees with the stored values: the last "new" of each key and column is the counter's value now.
SELECT DISTINCT ON (key, column_name) key, column_name, new,
       (SELECT CASE x.column_name WHEN 'rating' THEN r.rating ELSE r.votes END
          FROM post_rating r WHERE r.post_id = (x.key ->> 'post_id')::int) AS stored
  FROM crossings x ORDER BY key, column_name, n DESC;

-- A move between keys crosses down on one and up on the other; an update that leaves a value where it was, nothing.
TRUNCATE crossings;
UPDATE votes SET post_id = 4 WHERE post_id = 2 AND value = 120;
UPDATE votes SET value = value WHERE post_id = 4;
SELECT n, key, column_name, old, new, threshold, direction FROM crossings ORDER BY n;
SELECT id, is_golden FROM posts ORDER BY id;

-- A rolled-back statement or transaction leaves no trace of its crossings (the callback ran inside it).
TRUNCATE crossings;
BEGIN;
INSERT INTO votes (post_id, value) VALUES (1, 1000);
SELECT count(*) AS crossings_inside FROM crossings;
ROLLBACK;
SELECT count(*) AS crossings_after_rollback FROM crossings;
SELECT id, is_golden FROM posts ORDER BY id;

-- A callback that fails fails the statement.
CREATE FUNCTION refuse(counter text, key jsonb, column_name text, old numeric, new numeric, threshold numeric,
                       direction text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'no more than % votes for post %', threshold, key ->> 'post_id';
END $$;
SELECT counters.set_thresholds('post_rating', 'votes', '{5}', 'refuse'::regproc);
SELECT post_id, votes FROM post_rating WHERE post_id = 4;
INSERT INTO votes (post_id, value) VALUES (4, 1), (4, 1), (4, 1);
SELECT post_id, votes FROM post_rating WHERE post_id = 4;

-- Many keys crossing in one statement: one callback call per crossing, not per row.
SELECT counters.set_thresholds('post_rating', 'votes', '{}');
SELECT counters.set_thresholds('post_rating', 'rating', '{1000}', 'on_crossing'::regproc);
TRUNCATE crossings;
INSERT INTO posts SELECT g, 'post ' || g FROM generate_series(5, 2004) g;
INSERT INTO votes (post_id, value) SELECT 5 + g % 2000, 500 FROM generate_series(0, 5999) g;
SELECT count(*) AS crossings, count(DISTINCT key) AS keys, min(old) AS min_old, max(new) AS max_new FROM crossings;
SELECT * FROM counters.verify('post_rating');

-- A callback in LANGUAGE sql returning void (its NULL result is ignored).
CREATE FUNCTION note_sql(counter text, key jsonb, column_name text, old numeric, new numeric, threshold numeric,
                         direction text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO thresholds_test.crossings (counter, key, column_name, old, new, threshold, direction)
	VALUES (counter, key, column_name, old, new, threshold, direction)
$$;
SELECT counters.set_thresholds('post_rating', 'rating', '{2000}', 'note_sql'::regproc);
TRUNCATE crossings;
INSERT INTO votes (post_id, value) VALUES (5, 1000);
SELECT key, column_name, old, new, threshold, direction FROM crossings;

-- Without a callback: only the NOTIFY (see the isolation spec).
SELECT counters.set_thresholds('post_rating', 'rating', '{2000}');
SELECT * FROM counters.thresholds;

--
-- Rejections; nothing changes.
--
SELECT counters.set_thresholds('nosuch', 'rating', '{1}');
\echo SQLSTATE :SQLSTATE
SELECT counters.set_thresholds('post_rating', 'post_id', '{1}');
\echo SQLSTATE :SQLSTATE
SELECT counters.set_thresholds('post_rating', 'rating', '{1, NULL}');
\echo SQLSTATE :SQLSTATE
SELECT counters.set_thresholds('post_rating', 'rating', NULL);
\echo SQLSTATE :SQLSTATE
CREATE FUNCTION wrong_args(counter text, key jsonb) RETURNS void LANGUAGE sql AS $$ SELECT $$;
SELECT counters.set_thresholds('post_rating', 'rating', '{1}', 'wrong_args'::regproc);
\echo SQLSTATE :SQLSTATE
-- (a counter with thresholds may switch to log or sharded mode: compaction crosses them there, see below)
SELECT counters.alter_counter('post_rating', 'log');
SELECT counters.alter_counter('post_rating', 'exact');
SELECT * FROM counters.thresholds;

-- A callback dropped behind the counter's back is reported at the next write, not skipped silently.
SELECT counters.set_thresholds('post_rating', 'rating', '{3000}', 'refuse'::regproc);
INSERT INTO votes (post_id, value) VALUES (1, 1);
DROP FUNCTION refuse(text, jsonb, text, numeric, numeric, numeric, text);
-- (this session compiled the counter with the callback before it was dropped)
INSERT INTO votes (post_id, value) VALUES (1, 5000);
\echo SQLSTATE :SQLSTATE
-- (a session compiling the counter afresh: writes that cross nothing go on)
\c
SET search_path = thresholds_test;
INSERT INTO votes (post_id, value) VALUES (1, 1);
INSERT INTO votes (post_id, value) VALUES (1, 5000);
\echo SQLSTATE :SQLSTATE
-- Removing the thresholds.
SELECT counters.set_thresholds('post_rating', 'rating', '{}');
SELECT * FROM counters.thresholds;
SELECT * FROM counters.verify('post_rating');

SELECT counters.drop_counter('post_rating');

--
-- Repeating thresholds: set_thresholds(..., every => N) makes every multiple of N but 0 a threshold (N, 2N, ... and
-- -N, -2N, ...). A statement reports the multiples a key's value crossed in one event: threshold = the highest crossed
-- going up (the lowest going down), every = N, crossed = how many. Listed thresholds come first, each on its own.
-- The seed's example: every 1,000 shows, regenerate the thumbnail.
--
CREATE TABLE videos (id int PRIMARY KEY, thumbnails int NOT NULL DEFAULT 0);
CREATE TABLE shows (id serial PRIMARY KEY, video_id int NOT NULL, score int NOT NULL DEFAULT 0,
                    watched numeric NOT NULL DEFAULT 0);
INSERT INTO videos SELECT g FROM generate_series(1, 5) g;
SELECT counters.create_counter('video_shows', $$
	SELECT video_id, count(*) AS shows, sum(score) AS score, sum(watched) AS watched FROM shows GROUP BY video_id
$$);
CREATE TABLE events (n serial, key jsonb, column_name text, old numeric, new numeric, threshold numeric,
                     direction text, every numeric, crossed numeric);
-- A callback that takes every and crossed too (two more arguments): it records the event, and regenerates the
-- thumbnail once per 1,000 shows reached, however many a statement brought.
CREATE FUNCTION regenerate(counter text, key jsonb, column_name text, old numeric, new numeric, threshold numeric,
                           direction text, every numeric, crossed numeric) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO thresholds_test.events (key, column_name, old, new, threshold, direction, every, crossed)
	VALUES (key, column_name, old, new, threshold, direction, every, crossed);
	IF column_name = 'shows' AND every = 1000 AND direction = 'up' THEN
		UPDATE thresholds_test.videos SET thumbnails = thumbnails + crossed::int WHERE id = (key ->> 'video_id')::int;
	END IF;
END $$;
SELECT counters.set_thresholds('video_shows', 'shows', every => 1000, callback => 'regenerate'::regproc);
SELECT * FROM counters.thresholds;
SELECT options -> 'thresholds' AS stored FROM counters.counter WHERE name = 'video_shows';

-- What the thresholds say a statement did, computed apart from the extension: each key's values before and after
-- it, every listed threshold t with old < t <= new (up) or new < t <= old (down), and the multiples of "every"
-- enumerated one by one.
CREATE FUNCTION multiples_crossed(old numeric, new numeric, step numeric)
RETURNS TABLE (threshold numeric, direction text, crossed numeric) LANGUAGE sql AS $$
	SELECT CASE WHEN new > old THEN max(m) ELSE min(m) END, CASE WHEN new > old THEN 'up' ELSE 'down' END, count(*)
	  FROM (SELECT k * step AS m
	          FROM generate_series(trunc(least(old, new) / step)::bigint - 2, trunc(greatest(old, new) / step)::bigint + 2) k
	         WHERE k <> 0) x
	 WHERE m > least(old, new) AND m <= greatest(old, new)
	HAVING count(*) > 0
$$;
CREATE TABLE snapshot (video_id int, vals jsonb);
-- Run a statement; return the events that differ from the independent computation (none expected), both ways.
CREATE FUNCTION run_and_check(statement text)
RETURNS TABLE (side text, key jsonb, column_name text, threshold numeric, direction text, every numeric, crossed numeric)
LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM snapshot;
	INSERT INTO snapshot SELECT v.video_id, to_jsonb(v) FROM video_shows v;
	DELETE FROM events;
	EXECUTE statement;
	RETURN QUERY
	WITH moves AS (
		SELECT jsonb_build_object('video_id', video_id) AS key, t.column_name,
		       COALESCE((b.vals ->> t.column_name)::numeric, 0) AS old,
		       COALESCE((a.vals ->> t.column_name)::numeric, 0) AS new, t.thresholds, t.every
		  FROM snapshot b
		  FULL JOIN (SELECT v.video_id, to_jsonb(v) AS vals FROM video_shows v) a USING (video_id)
		 CROSS JOIN counters.thresholds t WHERE t.counter = 'video_shows'),
	expected AS (
		SELECT m.key, m.column_name, l.t AS threshold, CASE WHEN m.new > m.old THEN 'up' ELSE 'down' END AS direction,
		       NULL::numeric AS every, 1::numeric AS crossed
		  FROM moves m, unnest(m.thresholds) l(t)
		 WHERE (m.old < l.t AND l.t <= m.new) OR (m.new < l.t AND l.t <= m.old)
		UNION ALL
		SELECT m.key, m.column_name, x.threshold, x.direction, m.every, x.crossed
		  FROM moves m, multiples_crossed(m.old, m.new, m.every) x WHERE m.every IS NOT NULL),
	actual AS (
		SELECT e.key, e.column_name, e.threshold, e.direction, e.every, e.crossed FROM events e)
	(SELECT 'event only', * FROM (TABLE actual EXCEPT ALL TABLE expected) x
	 UNION ALL
	 SELECT 'expected only', * FROM (TABLE expected EXCEPT ALL TABLE actual) y)
	ORDER BY 1, 2, 3, 4;
END $$;
-- What most steps below show: run_and_check's differences (a mismatch), then every event the statement recorded, in
-- order.
CREATE FUNCTION run_and_show(statement text)
RETURNS TABLE (mismatch text, key jsonb, column_name text, old numeric, new numeric, threshold numeric, direction text,
               every numeric, crossed numeric)
LANGUAGE plpgsql AS $$
BEGIN
	RETURN QUERY SELECT c.side, c.key, c.column_name, NULL::numeric, NULL::numeric, c.threshold, c.direction, c.every,
	                    c.crossed
	               FROM run_and_check(statement) c;
	RETURN QUERY SELECT NULL::text, e.key, e.column_name, e.old, e.new, e.threshold, e.direction, e.every, e.crossed
	               FROM events e ORDER BY e.n;
END $$;

-- One insert crossing one multiple: 999 shows, then the 1,000th.
SELECT * FROM run_and_check('INSERT INTO shows (video_id) SELECT 1 FROM generate_series(1, 999)');
SELECT * FROM run_and_show('INSERT INTO shows (video_id) VALUES (1)');
-- One multi-row statement crossing several multiples: one event, at the highest, with the count (video 2 goes from
-- 0 to 3,500: 1,000, 2,000 and 3,000).
SELECT * FROM run_and_show('INSERT INTO shows (video_id) SELECT 2 FROM generate_series(1, 3500)');
SELECT id, thumbnails FROM videos ORDER BY id;
-- Down: a DELETE from 3,500 to 1,200 crosses 3,000 and 2,000, reported at the lowest.
SELECT * FROM run_and_show('DELETE FROM shows WHERE id IN (SELECT id FROM shows WHERE video_id = 2 ORDER BY id LIMIT 2300)');
-- Several keys in one statement: one event per key, in key order (1,000 to 2,200; 1,200 to 2,400; 0 to 1,200).
SELECT * FROM run_and_show('INSERT INTO shows (video_id) SELECT 1 + g % 3 FROM generate_series(1, 3600) g');

-- Negative values: the score (every 250) goes below zero and back. 0 itself is no threshold: 0 to -100 and -100 to
-- 100 cross nothing; 100 to -300 crosses -250; -300 to 300 crosses -250 and 250 (reported at 250), and back down at
-- -250; -300 to -800 crosses -500 and -750.
SELECT counters.set_thresholds('video_shows', 'score', every => 250, callback => 'regenerate'::regproc);
SELECT * FROM run_and_check('INSERT INTO shows (video_id, score) VALUES (4, -100)');
SELECT * FROM run_and_show('INSERT INTO shows (video_id, score) VALUES (4, 200)');
SELECT * FROM run_and_show('INSERT INTO shows (video_id, score) VALUES (4, -400)');
SELECT * FROM run_and_show('INSERT INTO shows (video_id, score) VALUES (4, 600)');
SELECT * FROM run_and_show('DELETE FROM shows WHERE video_id = 4 AND score = 600');
SELECT * FROM run_and_show('INSERT INTO shows (video_id, score) VALUES (4, -500)');

-- Listed thresholds and repeating ones on one column: the listed first (every NULL, crossed 1 for the callback),
-- each alone; a listed threshold that is also a multiple is reported by both.
SELECT counters.set_thresholds('video_shows', 'shows', '{500, 4000, 1000}', 'regenerate'::regproc, 1000);
SELECT * FROM counters.thresholds ORDER BY column_name;
SELECT * FROM run_and_show('INSERT INTO shows (video_id) SELECT 5 FROM generate_series(1, 4200)');

-- A fractional step, on a numeric column.
SELECT counters.set_thresholds('video_shows', 'watched', every => 0.25, callback => 'regenerate'::regproc);
SELECT * FROM run_and_check('INSERT INTO shows (video_id, watched) VALUES (3, 0.2), (3, 0.3), (3, 0.24)');
SELECT * FROM run_and_show('UPDATE shows SET watched = -watched WHERE video_id = 3 AND watched > 0.25');

-- Many statements of every kind, each checked against the computation: inserts of many rows, deletes, moves between
-- keys, scores up and down through zero.
SELECT count(*) AS statements, sum(mismatches) AS mismatches, sum(events) AS events
  FROM generate_series(1, 60) g,
       LATERAL (SELECT count(*) AS mismatches FROM run_and_check(CASE g % 4
	       WHEN 0 THEN format('INSERT INTO shows (video_id, score, watched) SELECT 1 + (i * %s) %% 5, (i * 7919) %% 601 - 300, '
	                          '((i * 31) %% 7 - 3) / 4.0 FROM generate_series(1, %s) i', g, 37 * g)
	       WHEN 1 THEN format('DELETE FROM shows WHERE id %% %s = 0', 3 + g % 5)
	       WHEN 2 THEN format('UPDATE shows SET video_id = 1 + (video_id + %s) %% 5, score = -score WHERE id %% 4 = %s', g, g % 4)
	       ELSE format('INSERT INTO shows (video_id, score) SELECT %s, %s FROM generate_series(1, %s)', 1 + g % 5, 1 - g, 50 * g)
	       END)) c,
       LATERAL (SELECT count(*) AS events FROM events) e;
SELECT * FROM counters.verify('video_shows');
-- The callback regenerated each video's thumbnail once per multiple of 1,000 reached going up (a key that went back
-- down and up again reaches some twice): at least floor(shows / 1000).
SELECT v.id, v.thumbnails >= floor(COALESCE(s.shows, 0) / 1000) AS enough
  FROM videos v LEFT JOIN video_shows s ON s.video_id = v.id ORDER BY v.id;

-- A callback of seven arguments gets the event too (threshold = the farthest multiple crossed).
TRUNCATE crossings;
SELECT counters.set_thresholds('video_shows', 'shows', every => 1000, callback => 'on_crossing'::regproc);
INSERT INTO shows (video_id) SELECT 1 FROM generate_series(1, 2000);
SELECT key, column_name, new - old AS delta, threshold, direction,
       (SELECT count(*) FROM generate_series(1, 100) k WHERE k * 1000 > old AND k * 1000 <= new) AS crossed
  FROM crossings ORDER BY n;

-- A STRICT callback of nine arguments is not called for a listed threshold's event (its "every" is NULL), as SQL would
-- not call it; it is for the repeating one. Video 6 goes from 0 to 1,500: listed 100 (not called), 1,000 (called).
CREATE FUNCTION strict_note(counter text, key jsonb, column_name text, old numeric, new numeric, threshold numeric,
                            direction text, every numeric, crossed numeric) RETURNS void LANGUAGE sql STRICT AS $$
	INSERT INTO thresholds_test.events (key, column_name, old, new, threshold, direction, every, crossed)
	VALUES (key, column_name, old, new, threshold, direction, every, crossed)
$$;
SELECT counters.set_thresholds('video_shows', 'shows', '{100}', 'strict_note'::regproc, every => 1000);
TRUNCATE events;
INSERT INTO shows (video_id) SELECT 6 FROM generate_series(1, 1500);
SELECT key, column_name, old, new, threshold, direction, every, crossed FROM events ORDER BY n;

--
-- Rejections of repeating thresholds; nothing changes.
--
SELECT counters.set_thresholds('video_shows', 'shows', every => 0);
\echo SQLSTATE :SQLSTATE
SELECT counters.set_thresholds('video_shows', 'shows', every => -1000);
\echo SQLSTATE :SQLSTATE
SELECT counters.set_thresholds('video_shows', 'shows', every => 'NaN');
\echo SQLSTATE :SQLSTATE
SELECT counters.set_thresholds('video_shows', 'shows', every => 'Infinity');
\echo SQLSTATE :SQLSTATE
SELECT counters.set_thresholds('video_shows', 'shows', '{1, NULL}', every => 10);
\echo SQLSTATE :SQLSTATE
SELECT counters.set_thresholds('video_shows', 'shows');
\echo SQLSTATE :SQLSTATE
SELECT counter, column_name, thresholds, every FROM counters.thresholds ORDER BY column_name;

-- Log and sharded counters cross their thresholds when compaction folds their pending rows: a write does not know the
-- counter's value, compaction does. The crossing is that of the folded value (old = the totals before, new = after):
-- a value that goes up and back down between two compactions crosses nothing. Events go out with the compaction's
-- transaction (NOTIFY at its commit, the callback inside it).
CREATE TABLE later_shows (id serial PRIMARY KEY, video_id int NOT NULL);
CREATE FUNCTION later_check(mode text) RETURNS TABLE (direction text, threshold numeric, old numeric, new numeric,
                                                       new_is_recount boolean, listed_or_every text)
LANGUAGE sql AS $$
	SELECT c.direction, c.threshold, c.old, c.new,
	       c.new = (SELECT count(*) FROM thresholds_test.later_shows s WHERE s.video_id = (c.key ->> 'video_id')::int),
	       CASE WHEN c.threshold % 1000 = 0 THEN 'every' ELSE 'listed' END
	  FROM thresholds_test.crossings c WHERE c.counter = 'later_' || mode ORDER BY c.n
$$;
SELECT counters.create_counter('later_log', 'SELECT video_id, count(*) AS shows FROM later_shows GROUP BY video_id',
                               mode => 'log');
SELECT counters.create_counter('later_sharded', 'SELECT video_id, count(*) AS shows FROM later_shows GROUP BY video_id',
                               mode => 'sharded');
SELECT counters.set_thresholds('later_log', 'shows', '{500}', 'on_crossing'::regproc, every => 1000);
SELECT counters.set_thresholds('later_sharded', 'shows', '{500}', 'on_crossing'::regproc, every => 1000);
-- bounds stay exact-only
SELECT counters.set_bounds('later_log', 'shows', max => 10);
\echo SQLSTATE :SQLSTATE
TRUNCATE crossings;
INSERT INTO later_shows (video_id) SELECT 1 FROM generate_series(1, 1200);
INSERT INTO later_shows (video_id) SELECT 1 FROM generate_series(1, 1400);
-- (at SERIALIZABLE a sharded counter writes through its upsert, not the direct path: no event at write time either)
BEGIN ISOLATION LEVEL SERIALIZABLE;
INSERT INTO later_shows (video_id) SELECT 1 FROM generate_series(1, 700);
COMMIT;
DELETE FROM later_shows WHERE id > 2600;
-- nothing yet: the writes appended deltas
SELECT count(*) AS events_before_compaction FROM crossings;
SELECT counters.compact() > 0 AS compacted;
-- 0 -> 2600: up through 500 (listed) and 1000, 2000 (every: one event at 2000, two crossed)
SELECT * FROM later_check('log');
SELECT * FROM later_check('sharded');
TRUNCATE crossings;
DELETE FROM later_shows WHERE id > 300;
-- (up and back down between compactions: no event)
INSERT INTO later_shows (video_id) SELECT 1 FROM generate_series(1, 5000);
DELETE FROM later_shows WHERE id > 300;
SELECT counters.compact() > 0 AS compacted;
-- 2600 -> 300: down through 2000, 1000 (one event at 1000) and 500
SELECT * FROM later_check('log');
SELECT * FROM later_check('sharded');
SELECT * FROM counters.verify('later_log');
SELECT * FROM counters.verify('later_sharded');
-- switching to exact mode keeps them, crossed at write time again
TRUNCATE crossings;
SELECT counters.alter_counter('later_log', 'exact');
INSERT INTO later_shows (video_id) SELECT 1 FROM generate_series(1, 300);
SELECT direction, threshold, old, new FROM crossings WHERE counter = 'later_log';
SELECT counters.drop_counter('later_log');
SELECT counters.drop_counter('later_sharded');
DROP FUNCTION later_check(text);
DROP TABLE later_shows;
-- An empty list without "every" removes a column's thresholds, repeating ones included.
SELECT counters.set_thresholds('video_shows', 'shows', '{}');
SELECT counters.set_thresholds('video_shows', 'score', '{}');
SELECT counters.set_thresholds('video_shows', 'watched', '{}');
SELECT * FROM counters.thresholds;
SELECT options FROM counters.counter WHERE name = 'video_shows';
SELECT counters.drop_counter('video_shows');

RESET search_path;
DROP SCHEMA thresholds_test CASCADE;
