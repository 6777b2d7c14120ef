-- Randomized property test of counters through a chain of parent rows: after every random batch, each counter equals
-- its own definition's query run over the tables (never its levels).
--
-- reactions -> replies -> threads -> forums, no foreign keys: batches insert, move, change and delete rows at every
-- level (a reaction to a reply that does not exist yet, a reply moved to another thread, a thread moved to another
-- forum or unpublished, keys changed at every level, parents deleted and inserted again), write two levels in one
-- statement (writable CTEs), and roll some of it back (a failed exception block). One counter through the four tables
-- (keys from the top and the leaf, values from the leaf and the middle, WHERE on the middle, FILTER on the top), one
-- through three in log mode.
--
-- Reproduce a failure with the seed it prints: COUNTERS_PROPERTY_SEED=0.25 pg_prove -d db test/pgtap/property_chains.sql
\set ON_ERROR_STOP 1
\set QUIET 1
\pset pager off
\pset format unaligned
\pset tuples_only on
\set seed 0.4242
\getenv seed COUNTERS_PROPERTY_SEED
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
DROP SCHEMA IF EXISTS counters_property_chains CASCADE;
DROP EXTENSION IF EXISTS counters;
CREATE EXTENSION counters;
CREATE SCHEMA counters_property_chains;
SET search_path = counters_property_chains, public;

CREATE TABLE forums (id int PRIMARY KEY, region text NOT NULL);
CREATE TABLE threads (id int PRIMARY KEY, forum_id int, published boolean NOT NULL, weight int NOT NULL);
CREATE TABLE replies (id int PRIMARY KEY, thread_id int NOT NULL);
CREATE TABLE reactions (id serial PRIMARY KEY, reply_id int, kind text NOT NULL, score int NOT NULL);
INSERT INTO forums SELECT g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END FROM generate_series(1, 5) g;
INSERT INTO threads SELECT g, 1 + g % 6, g % 4 > 0, g % 3 FROM generate_series(1, 20) g;
INSERT INTO replies SELECT g, 1 + g % 22 FROM generate_series(1, 60) g;
INSERT INTO reactions (reply_id, kind, score)
SELECT 1 + g % 64, CASE WHEN g % 3 = 0 THEN 'love' ELSE 'like' END, g % 5 FROM generate_series(1, 500) g;

SELECT counters.create_counter('forum_reactions', $$
	SELECT f.id AS forum_id, r.kind, count(*) AS n, sum(r.score) AS score, sum(t.weight) AS weight,
	       count(*) FILTER (WHERE f.region = 'eu') AS eu
	  FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id
	  JOIN forums f ON t.forum_id = f.id
	 WHERE t.published GROUP BY f.id, r.kind$$);
SELECT counters.create_counter('published_replies', $$
	SELECT t.published, count(*) AS n, sum(r.score) FILTER (WHERE r.kind = 'love') AS love
	  FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id
	 GROUP BY t.published$$, mode => 'log');

CREATE VIEW forum_recount AS
	SELECT f.id AS forum_id, r.kind, count(*) AS n, sum(r.score) AS score, sum(t.weight) AS weight,
	       count(*) FILTER (WHERE f.region = 'eu') AS eu
	  FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id
	  JOIN forums f ON t.forum_id = f.id
	 WHERE t.published GROUP BY f.id, r.kind;
CREATE VIEW published_recount AS
	SELECT t.published, count(*) AS n, coalesce(sum(r.score) FILTER (WHERE r.kind = 'love'), 0) AS love
	  FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id
	 GROUP BY t.published;

CREATE FUNCTION differences() RETURNS bigint LANGUAGE sql AS $$
	SELECT (SELECT count(*) FROM ((TABLE forum_reactions EXCEPT TABLE forum_recount)
	                              UNION ALL (TABLE forum_recount EXCEPT TABLE forum_reactions)) d)
	     + (SELECT count(*) FROM ((SELECT * FROM published_replies WHERE n <> 0 EXCEPT TABLE published_recount)
	                              UNION ALL (TABLE published_recount EXCEPT SELECT * FROM published_replies)) d)
$$;

-- One random step, at any level of the chain (or two levels in one statement).
CREATE FUNCTION step() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	a int := 1 + (random() * 64)::int;
	b int := 1 + (random() * 22)::int;
	c int := 1 + (random() * 6)::int;
BEGIN
	CASE (random() * 19)::int
	WHEN 0 THEN INSERT INTO reactions (reply_id, kind, score)
	            SELECT 1 + (random() * 64)::int, CASE WHEN random() < 0.3 THEN 'love' ELSE 'like' END, (random() * 5)::int
	              FROM generate_series(1, 1 + (random() * 20)::int);
	WHEN 1 THEN UPDATE reactions SET reply_id = a WHERE id IN (SELECT id FROM reactions ORDER BY random() LIMIT 6);
	WHEN 2 THEN UPDATE reactions SET kind = CASE kind WHEN 'like' THEN 'love' ELSE 'like' END, score = score + 1
	             WHERE reply_id = a;
	WHEN 3 THEN DELETE FROM reactions WHERE id IN (SELECT id FROM reactions ORDER BY random() LIMIT 8);
	WHEN 4 THEN UPDATE replies SET thread_id = b WHERE id IN (a, a + 1);
	WHEN 5 THEN IF EXISTS (SELECT FROM replies WHERE id = a + 100) THEN
	                UPDATE replies SET id = a WHERE id = a + 100 AND NOT EXISTS (SELECT FROM replies WHERE id = a);
	            ELSE UPDATE replies SET id = a + 100 WHERE id = a; END IF;
	WHEN 6 THEN IF random() < 0.3 THEN DELETE FROM replies WHERE id = a;
	            ELSE INSERT INTO replies VALUES (a, b) ON CONFLICT (id) DO UPDATE SET thread_id = excluded.thread_id; END IF;
	WHEN 7 THEN UPDATE threads SET forum_id = c WHERE id = b;
	WHEN 8 THEN UPDATE threads SET published = NOT published WHERE id IN (b, b + 100);
	WHEN 9 THEN UPDATE threads SET weight = weight + 1 WHERE id = b;
	WHEN 10 THEN UPDATE threads SET forum_id = CASE WHEN forum_id IS NULL THEN c END WHERE id = b;
	WHEN 11 THEN IF EXISTS (SELECT FROM threads WHERE id = b + 100) THEN
	                 UPDATE threads SET id = b WHERE id = b + 100 AND NOT EXISTS (SELECT FROM threads WHERE id = b);
	             ELSE UPDATE threads SET id = b + 100 WHERE id = b; END IF;
	WHEN 12 THEN IF random() < 0.3 THEN DELETE FROM threads WHERE id = b;
	             ELSE INSERT INTO threads VALUES (b, c, true, 1) ON CONFLICT (id) DO UPDATE SET published = NOT threads.published; END IF;
	WHEN 13 THEN UPDATE forums SET region = CASE region WHEN 'eu' THEN 'us' ELSE 'eu' END WHERE id = c;
	WHEN 14 THEN IF EXISTS (SELECT FROM forums WHERE id = c + 10) THEN
	                 UPDATE forums SET id = c WHERE id = c + 10 AND NOT EXISTS (SELECT FROM forums WHERE id = c);
	             ELSE UPDATE forums SET id = c + 10 WHERE id = c; END IF;
	WHEN 15 THEN IF random() < 0.3 THEN DELETE FROM forums WHERE id = c;
	             ELSE INSERT INTO forums VALUES (c, 'eu') ON CONFLICT DO NOTHING; END IF;
	WHEN 16 THEN WITH m AS (UPDATE threads SET forum_id = c WHERE id = b RETURNING id)
	             INSERT INTO replies SELECT 200 + (random() * 50)::int, id FROM m ON CONFLICT DO NOTHING;
	WHEN 17 THEN WITH m AS (UPDATE replies SET thread_id = b WHERE id = a RETURNING id)
	             INSERT INTO reactions (reply_id, kind, score) SELECT id, 'love', 2 FROM m;
	ELSE UPDATE reactions SET reply_id = NULL WHERE id IN (SELECT id FROM reactions ORDER BY random() LIMIT 2);
	END CASE;
END $$;

-- A batch: a few steps, some inside an exception block that fails (rolled back).
CREATE FUNCTION batch() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. 1 + (random() * 4)::int LOOP
		IF random() < 0.2 THEN
			BEGIN
				PERFORM step();
				PERFORM step();
				RAISE EXCEPTION 'rolled back';
			EXCEPTION WHEN raise_exception THEN NULL;
			END;
		ELSE
			PERFORM step();
		END IF;
	END LOOP;
END $$;

SELECT setseed(:seed);
SELECT plan(58);
SELECT diag('seed ' || :'seed');
SELECT is(differences(), 0::bigint, 'every counter equals its definition at the start');
CREATE TABLE sizes (n bigint);
SELECT 'SELECT batch()',
       format('SELECT is(differences(), 0::bigint, %L)', 'every counter equals its definition after batch ' || g),
       'INSERT INTO sizes SELECT count(*) FROM forum_reactions'
  FROM generate_series(1, 50) g \gexec
SELECT 'SELECT counters.compact()', format('SELECT is(differences(), 0::bigint, %L)', 'after compaction ' || g)
  FROM generate_series(1, 3) g \gexec
SELECT is((SELECT count(*) FROM counters.verify()), 0::bigint, 'counters.verify() is empty, every level included');
SELECT ok((SELECT count(*) FROM sizes WHERE n > 0) >= 40, 'the counter had rows after most batches');
SELECT is((SELECT count(*) FROM counters.counter WHERE options->>'part_of' IS NOT NULL), 5::bigint,
          'the levels of both counters are there');
SELECT is((SELECT count(*) FROM reactions) > 0, true, 'reactions remain');
SELECT * FROM finish();
SET client_min_messages = warning;
DROP SCHEMA counters_property_chains CASCADE;
DROP EXTENSION counters;
