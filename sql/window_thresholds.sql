--
-- window_thresholds: counters.set_window_thresholds(name, column, thresholds, bucket_column, width, callback) -- "a
-- hashtag trends when it reaches 10,000 uses in a region within 24 hours" (seed 3), here 5 and 10 uses. After each
-- step, which (prefix, threshold) pairs are recorded as reached (counters.window_state(), over the counter's table
-- tag_hourly_crossings) is compared with a recount
-- over the raw events: count(*) per (region, tag) of the uses whose hour bucket is later than now() - the width. The
-- callback records each announcement, in order.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA window_test;
SET search_path = window_test, regress;

CREATE TABLE uses (id serial PRIMARY KEY, region text NOT NULL, tag text NOT NULL, used_at timestamp NOT NULL);
SELECT counters.create_counter('tag_hourly', $$
	SELECT region, tag, date_trunc('hour', used_at) AS hour, count(*) AS uses FROM uses
	 GROUP BY region, tag, date_trunc('hour', used_at)$$);
CREATE TABLE announced (n serial, key jsonb, old numeric, new numeric, threshold numeric, direction text);
CREATE FUNCTION on_trend(counter text, key jsonb, column_name text, old numeric, new numeric, threshold numeric,
                         direction text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO window_test.announced (key, old, new, threshold, direction) VALUES (key, old, new, threshold, direction)$$;
SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{5, 10}', 'hour', '24 hours',
                                      'on_trend(text,jsonb,text,numeric,numeric,numeric,text)');
SELECT options -> 'window' ->> 'width' AS width, options -> 'window' ->> 'bucket' AS bucket FROM counters.counter;
-- What should be recorded: every (prefix, threshold) whose window sum, recounted from the uses, reaches it.
CREATE TABLE widths (width interval);
INSERT INTO widths VALUES ('24 hours');
CREATE VIEW reached_expected AS
SELECT jsonb_build_object('region', u.region, 'tag', u.tag) AS prefix, th AS threshold
  FROM uses u, widths w, unnest('{5, 10}'::numeric[]) th
 WHERE date_trunc('hour', u.used_at) > (now() - w.width)::timestamp
 GROUP BY u.region, u.tag, th HAVING count(*) >= th;
CREATE VIEW check_windows AS
SELECT 'recorded only' AS side, r::text FROM (SELECT prefix, threshold FROM counters.window_state('tag_hourly') EXCEPT TABLE reached_expected) r
UNION ALL
SELECT 'recount only', e::text FROM (TABLE reached_expected EXCEPT SELECT prefix, threshold FROM counters.window_state('tag_hourly')) e;
CREATE FUNCTION announced() RETURNS TABLE (key jsonb, new numeric, threshold numeric, direction text)
LANGUAGE plpgsql AS $$
BEGIN
	RETURN QUERY SELECT a.key, a.new, a.threshold, a.direction FROM window_test.announced a ORDER BY a.n;
	DELETE FROM window_test.announced;
END $$;

-- Uses inside the window cross 5, then 10; uses older than the window do not count.
INSERT INTO uses (region, tag, used_at) SELECT 'eu', 'pg', localtimestamp - interval '1 hour' FROM generate_series(1, 4);
INSERT INTO uses (region, tag, used_at) SELECT 'eu', 'pg', localtimestamp - interval '30 hours' FROM generate_series(1, 20);
SELECT * FROM announced();
INSERT INTO uses (region, tag, used_at) VALUES ('eu', 'pg', localtimestamp);
SELECT * FROM announced();
SELECT * FROM check_windows;
-- Further uses above a threshold announce nothing new; several prefixes in one statement.
INSERT INTO uses (region, tag, used_at) VALUES ('eu', 'pg', localtimestamp);
INSERT INTO uses (region, tag, used_at)
SELECT 'us', t, localtimestamp - (g % 3) * interval '1 hour' FROM generate_series(1, 12) g, (VALUES ('a'), ('b')) v(t);
SELECT * FROM announced();
SELECT * FROM check_windows;
-- Down: a DELETE, and an UPDATE moving uses out of the window.
DELETE FROM uses WHERE id IN (SELECT id FROM uses WHERE region = 'us' AND tag = 'a' ORDER BY id LIMIT 7);
SELECT * FROM announced();
UPDATE uses SET used_at = used_at - interval '2 days' WHERE region = 'eu' AND used_at > localtimestamp - interval '2 hours';
SELECT * FROM announced();
SELECT * FROM check_windows;
-- A rolled-back crossing leaves nothing recorded, and its callback's row goes with it.
BEGIN;
INSERT INTO uses (region, tag, used_at) SELECT 'eu', 'pg', localtimestamp FROM generate_series(1, 10);
SELECT count(*) AS recorded_inside FROM counters.window_state() WHERE prefix ->> 'region' = 'eu';
ROLLBACK;
SELECT * FROM announced();
SELECT * FROM check_windows;

-- Buckets ageing out: no write happens. Here the window shrinks to 1 hour instead of time passing; the next
-- check_windows() (compact() calls it) announces what left the window.
SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{5, 10}', 'hour', '1 hour',
                                      'on_trend(text,jsonb,text,numeric,numeric,numeric,text)');
UPDATE widths SET width = '1 hour';
SELECT count(*) AS differences_before_the_check FROM check_windows;
SELECT counters.compact() AS folded;
-- (the sums depend on when in the hour this runs; the crossings do not)
SELECT key, threshold, direction FROM announced();
SELECT * FROM check_windows;
SELECT counters.check_windows() AS announced_again;

-- A counter whose only key is the bucket has one window.
CREATE TABLE shows (id serial PRIMARY KEY, shown_at timestamp NOT NULL);
SELECT counters.create_counter('shows_daily', $$
	SELECT date_trunc('day', shown_at) AS day, count(*) AS shows FROM shows GROUP BY date_trunc('day', shown_at)$$);
SELECT counters.set_window_thresholds('shows_daily', 'shows', '{3}', 'day', '7 days');
INSERT INTO shows (shown_at) SELECT localtimestamp - g * interval '1 day' FROM generate_series(0, 2) g;
SELECT prefix, threshold FROM counters.window_state() WHERE counter = 'shows_daily';

-- Two ways to check the prefixes a write touched: directly, through the counter table's key index (when the bucket
-- is its last column and the prefix keys are of built-in types), else by a statement -- also for a statement that
-- wrote a NULL prefix. The same writes to a counter of each kind (its bucket last, then first; a nullable prefix and
-- a numeric sum) must record what a recount says, sums exactly at a threshold included.
CREATE TABLE clicks (id serial PRIMARY KEY, site int, day date NOT NULL, n numeric NOT NULL);
SELECT counters.create_counter('clicks_last', 'SELECT site, day, sum(n) AS n FROM clicks GROUP BY site, day');
SELECT counters.create_counter('clicks_first', 'SELECT day, site, sum(n) AS n FROM clicks GROUP BY day, site');
SELECT counters.set_window_thresholds('clicks_last', 'n', '{10, 20.5}', 'day', '3 days');
SELECT counters.set_window_thresholds('clicks_first', 'n', '{10, 20.5}', 'day', '3 days');
CREATE VIEW clicks_expected AS
SELECT jsonb_build_object('site', site) AS prefix, th AS threshold
  FROM clicks, unnest('{10, 20.5}'::numeric[]) th
 WHERE day > (now() - interval '3 days')::date
 GROUP BY site, th HAVING sum(n) >= th;
CREATE VIEW clicks_differences AS
SELECT c.name, (SELECT count(*) FROM ((SELECT prefix, threshold FROM counters.window_state(c.name)
                                       EXCEPT TABLE clicks_expected)
                                      UNION ALL (TABLE clicks_expected
                                       EXCEPT SELECT prefix, threshold FROM counters.window_state(c.name))) d) AS differences
  FROM (VALUES ('clicks_last'), ('clicks_first')) c(name);
INSERT INTO clicks (site, day, n) VALUES (1, current_date, 4), (1, current_date - 1, 6), (2, current_date, 9.5),
                                         (3, current_date - 10, 30);
SELECT * FROM clicks_differences;
INSERT INTO clicks (site, day, n) VALUES (2, current_date - 2, 0.5), (3, current_date, 20.5), (NULL, current_date, 12);
SELECT * FROM clicks_differences;
INSERT INTO clicks (site, day, n) VALUES (1, current_date, 10.5), (2, current_date, 1);
SELECT * FROM clicks_differences;
SELECT counter, prefix, threshold FROM counters.window_state() WHERE counter LIKE 'clicks%' ORDER BY 1, 2, 3;
UPDATE clicks SET day = day - 5 WHERE site = 1 AND day = current_date - 1;
DELETE FROM clicks WHERE site IS NULL;
SELECT * FROM clicks_differences;
SELECT counter, prefix, threshold FROM counters.window_state() WHERE counter LIKE 'clicks%' ORDER BY 1, 2, 3;
SELECT counters.drop_counter('clicks_last'), counters.drop_counter('clicks_first');

-- Refusals.
SELECT counters.set_window_thresholds('tag_hourly', 'nope', '{5}', 'hour', '1 day');
SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{5}', 'region', '1 day');
SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{5}', 'nope', '1 day');
SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{5}', 'hour', '-1 day');
SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{0}', 'hour', '1 day');
SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{5, NULL}', 'hour', '1 day');
SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{5}');
SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{5}', 'hour', '1 day', 'now()');
SELECT counters.create_counter('tag_hourly_log', $$
	SELECT region, date_trunc('hour', used_at) AS hour, count(*) AS uses FROM uses GROUP BY region, date_trunc('hour', used_at)$$,
	mode => 'log');
SELECT counters.set_window_thresholds('tag_hourly_log', 'uses', '{5}', 'hour', '1 day');
-- (nor can a counter with window thresholds leave exact mode, also not for rebuild_concurrently())
SELECT counters.alter_counter('tag_hourly', 'log');
SELECT counters.alter_counter('tag_hourly', 'sharded');
CALL counters.rebuild_concurrently('tag_hourly');
SELECT mode FROM counters.counter WHERE name = 'tag_hourly';
SET ROLE NONE;
CREATE ROLE window_other;
GRANT USAGE ON SCHEMA window_test TO window_other;
SET ROLE window_other;
SELECT counters.set_window_thresholds('window_test.tag_hourly', 'uses', '{}');
SELECT counters.check_windows('tag_hourly');
-- a role that may not read the counter sees none of its prefixes
SELECT count(*) AS visible FROM counters.window_state();
SELECT count(*) FROM window_test.tag_hourly_crossings;
SELECT count(*) FROM counters.window_state('tag_hourly');
SET ROLE counters_app;
SELECT count(*) AS visible FROM counters.window_state();

-- The state is a table of the counter's owner, guarded as the counter's other tables are.
SELECT c.crossings, r.relowner::regrole FROM counters.counter c JOIN pg_class r ON r.oid = c.crossings
 WHERE c.name = 'tag_hourly';
DROP TABLE tag_hourly_crossings;
TRUNCATE tag_hourly_crossings;
-- A new definition keeps the state of the prefixes it still has (nothing is announced again)...
INSERT INTO uses (region, tag, used_at) SELECT 'eu', 'z', localtimestamp FROM generate_series(1, 6);
SELECT key, threshold, direction FROM announced();
SELECT prefix, threshold FROM counters.window_state('tag_hourly');
SELECT counters.alter_counter('tag_hourly', definition => $$
	SELECT region, tag, date_trunc('hour', used_at) AS hour, count(*) AS uses, count(tag) AS tagged FROM uses
	 GROUP BY region, tag, date_trunc('hour', used_at)$$);
SELECT * FROM check_windows;
SELECT * FROM announced();
SELECT counters.check_windows('tag_hourly') AS announced_again;
-- ... and drops the state of prefixes it no longer has (here: by region only, so every prefix is new).
SELECT counters.alter_counter('tag_hourly', definition => $$
	SELECT region, date_trunc('hour', used_at) AS hour, count(*) AS uses FROM uses
	 GROUP BY region, date_trunc('hour', used_at)$$);
SELECT count(*) AS recorded FROM counters.window_state('tag_hourly');

-- The counter table's bucket column renamed (the docs call renames safe): writes go on counting and crossing, and the
-- window is checked as before. (Every write failed before: "its window's bucket column "hour" is gone".)
ALTER TABLE tag_hourly RENAME COLUMN hour TO hour_bucket;
INSERT INTO uses (region, tag, used_at) SELECT 'yy', 'pg', localtimestamp FROM generate_series(1, 6);
SELECT key, threshold, direction FROM announced();
SELECT prefix, threshold FROM counters.window_state('tag_hourly') WHERE prefix ->> 'region' = 'yy';
DELETE FROM uses WHERE region = 'yy';
SELECT key, threshold, direction FROM announced();
ALTER TABLE tag_hourly RENAME COLUMN hour_bucket TO hour;

-- A window callback that no longer exists fails the write that crosses, naming the counter, as a threshold's does:
-- an announcement is never lost without a word.
BEGIN;
DROP FUNCTION on_trend(text, jsonb, text, numeric, numeric, numeric, text);
INSERT INTO uses (region, tag, used_at) SELECT 'xx', 'pg', localtimestamp FROM generate_series(1, 5);
ROLLBACK;

-- Removing the thresholds removes what was recorded, and its table; dropping the counter too.
SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{}');
SELECT options FROM counters.counter WHERE name = 'tag_hourly';
SELECT to_regclass('tag_hourly_crossings') AS crossings_table;
SELECT count(*) AS recorded FROM counters.window_state() WHERE counter = 'tag_hourly';
SELECT counters.drop_counter('shows_daily');
SELECT count(*) AS recorded FROM counters.window_state();

SET ROLE NONE;
DROP SCHEMA window_test CASCADE;
DROP ROLE window_other;
SET ROLE counters_app;
