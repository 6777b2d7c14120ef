-- Randomized property test of sinks and window thresholds: after every random batch, what the counters hold equals
-- an independent recount.
--
-- Sinks store nothing, so every row inserted into the sink `views` is also inserted, in the same statement (a
-- writable CTE), into the plain table `shadow`; its counters (exact, log and sharded) are compared with a GROUP BY of
-- `shadow`. Batches insert single rows and many, and some fail or roll back to a savepoint after inserting.
--
-- The window counter counts `uses` per (region, tag, hour) with thresholds 3 and 6 uses within 24 hours. Batches
-- insert, delete and move uses in time, all in this session: every crossing is made by a statement that then records
-- it, so after every batch counters.window_state (what was announced as reached) must equal a recount over `uses`,
-- without counters.check_windows(). Uses stay between 1 and 20 hours old or 30 and 40 hours old, far from the window's
-- edge, so that time passing while the test runs changes nothing.
--
-- Reproduce a failure with the seed it prints: COUNTERS_PROPERTY_SEED=0.25 pg_prove -d db test/pgtap/property_sink_window.sql
\set ON_ERROR_STOP 1
\set QUIET 1
\pset pager off
\pset format unaligned
\pset tuples_only on
\set seed 0.6161
\getenv seed COUNTERS_PROPERTY_SEED
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
DROP SCHEMA IF EXISTS counters_property_sw CASCADE;
DROP EXTENSION IF EXISTS counters;
CREATE EXTENSION counters;
CREATE SCHEMA counters_property_sw;
SET search_path = counters_property_sw, public;

CREATE TABLE views (id bigserial PRIMARY KEY, post_id int NOT NULL, weight int NOT NULL CHECK (weight BETWEEN 1 AND 5));
CREATE TABLE shadow (post_id int NOT NULL, weight int NOT NULL);
SELECT counters.create_counter('sw_post_views', 'SELECT post_id, count(*) AS n, sum(weight) AS w FROM views GROUP BY post_id');
SELECT counters.create_counter('sw_weight_views', 'SELECT weight, count(*) AS n FROM views GROUP BY weight', mode => 'log');
SELECT counters.create_counter('sw_all_views', 'SELECT 1 AS one, count(*) AS n FROM views GROUP BY 1', mode => 'sharded');
SELECT counters.set_sink('views');

CREATE TABLE uses (id serial PRIMARY KEY, region int NOT NULL, tag int NOT NULL, used_at timestamp NOT NULL);
SELECT counters.create_counter('sw_tag_hourly', $$
	SELECT region, tag, date_trunc('hour', used_at) AS hour, count(*) AS uses FROM uses
	 GROUP BY region, tag, date_trunc('hour', used_at)$$);
SELECT counters.set_window_thresholds('sw_tag_hourly', 'uses', '{3, 6}', 'hour', '24 hours');

CREATE FUNCTION sink_differences() RETURNS bigint LANGUAGE sql AS $$
	SELECT (SELECT count(*) FROM ((SELECT post_id, n, w FROM sw_post_views
	                               EXCEPT SELECT post_id, count(*), sum(weight) FROM shadow GROUP BY post_id)
	                              UNION ALL (SELECT post_id, count(*), sum(weight) FROM shadow GROUP BY post_id
	                               EXCEPT SELECT post_id, n, w FROM sw_post_views)) d)
	     + (SELECT count(*) FROM ((SELECT weight, n FROM sw_weight_views WHERE n <> 0
	                               EXCEPT SELECT weight, count(*) FROM shadow GROUP BY weight)
	                              UNION ALL (SELECT weight, count(*) FROM shadow GROUP BY weight
	                               EXCEPT SELECT weight, n FROM sw_weight_views)) d)
	     + (SELECT count(*) FROM ((SELECT n FROM sw_all_views WHERE n <> 0 EXCEPT SELECT count(*) FROM shadow HAVING count(*) > 0)
	                              UNION ALL (SELECT count(*) FROM shadow HAVING count(*) > 0 EXCEPT SELECT n FROM sw_all_views)) d)
	     + (SELECT count(*) FROM views)
$$;
CREATE FUNCTION window_differences() RETURNS bigint LANGUAGE sql AS $$
	WITH reached AS (
		SELECT jsonb_build_object('region', region, 'tag', tag) AS prefix, th AS threshold
		  FROM uses, unnest('{3, 6}'::numeric[]) th
		 WHERE date_trunc('hour', used_at) > (now() - interval '24 hours')::timestamp
		 GROUP BY region, tag, th HAVING count(*) >= th)
	SELECT count(*) FROM ((SELECT prefix, threshold FROM counters.window_state() WHERE counter = 'sw_tag_hourly'
	                       EXCEPT TABLE reached)
	                      UNION ALL (TABLE reached EXCEPT SELECT prefix, threshold FROM counters.window_state()
	                                  WHERE counter = 'sw_tag_hourly')) d
$$;

-- One random batch, in a transaction of its own (the caller's): sink inserts through the shadow, some rolled back to
-- a savepoint; uses inserted, deleted and moved between inside and outside the window.
CREATE FUNCTION batch() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	n int;
BEGIN
	FOR i IN 1 .. 1 + (random() * 4)::int LOOP
		n := 1 + (random() * (CASE WHEN random() < 0.7 THEN 3 ELSE 200 END))::int;
		IF random() < 0.2 THEN
			BEGIN
				WITH r AS (INSERT INTO shadow SELECT (random() * 30)::int, 1 + (random() * 4)::int
				             FROM generate_series(1, n) RETURNING post_id, weight)
				INSERT INTO views (post_id, weight) SELECT post_id, weight FROM r;
				RAISE EXCEPTION 'rolled back';
			EXCEPTION WHEN raise_exception THEN NULL;
			END;
		ELSE
			WITH r AS (INSERT INTO shadow SELECT (random() * 30)::int, 1 + (random() * 4)::int
			             FROM generate_series(1, n) RETURNING post_id, weight)
			INSERT INTO views (post_id, weight) SELECT post_id, weight FROM r;
		END IF;
	END LOOP;
	FOR i IN 1 .. 1 + (random() * 3)::int LOOP
		CASE (random() * 3)::int
		WHEN 0 THEN
			INSERT INTO uses (region, tag, used_at)
			SELECT (random() * 2)::int, (random() * 5)::int,
			       localtimestamp - CASE WHEN random() < 0.8 THEN interval '1 hour' + random() * interval '19 hours'
			                             ELSE interval '30 hours' + random() * interval '10 hours' END
			  FROM generate_series(1, 1 + (random() * 6)::int);
		WHEN 1 THEN
			DELETE FROM uses WHERE id IN (SELECT id FROM uses ORDER BY random() LIMIT 1 + (random() * 4)::int);
		ELSE
			UPDATE uses SET used_at = CASE WHEN used_at > localtimestamp - interval '24 hours'
			                               THEN used_at - interval '29 hours' ELSE used_at + interval '29 hours' END
			 WHERE id IN (SELECT id FROM uses ORDER BY random() LIMIT 1 + (random() * 4)::int);
		END CASE;
	END LOOP;
END $$;

SELECT setseed(:seed);
SELECT plan(2 * 40 + 2);
SELECT diag('seed ' || :'seed');
SELECT is(sink_differences(), 0::bigint, 'sink counters equal the shadow''s recount at the start');
SELECT is(window_differences(), 0::bigint, 'window state equals the recount at the start');
SELECT 'SELECT batch()',
       format('SELECT is(sink_differences(), 0::bigint, %L)', 'sink counters equal the shadow''s recount after batch ' || g),
       format('SELECT is(window_differences(), 0::bigint, %L)', 'window state equals the recount after batch ' || g)
  FROM generate_series(1, 40) g \gexec
SELECT * FROM finish();
SET client_min_messages = warning;
DROP SCHEMA counters_property_sw CASCADE;
DROP EXTENSION counters;
