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
SELECT counters.alter_counter('post_rating', 'log');
\echo SQLSTATE :SQLSTATE
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
-- Removing the thresholds: switching to log mode works again.
SELECT counters.set_thresholds('post_rating', 'rating', '{}');
SELECT * FROM counters.thresholds;
SELECT counters.alter_counter('post_rating', 'log');
SELECT counters.set_thresholds('post_rating', 'rating', '{1}');
\echo SQLSTATE :SQLSTATE
SELECT counters.alter_counter('post_rating', 'exact');
SELECT * FROM counters.verify('post_rating');

SELECT counters.drop_counter('post_rating');
RESET search_path;
DROP SCHEMA thresholds_test CASCADE;
