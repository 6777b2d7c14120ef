--
-- sinks: counters.set_sink(table) makes a table whose inserted rows are counted and never stored (seeds 2 to 4:
-- views, likes, clicks and shows). A sink keeps no rows to recount, so every statement below writes the same rows to
-- a plain table `shadow` too (a writable CTE inserts them there and passes them on to the sink, or COPY loads the same
-- data into both), and the counters are compared with a GROUP BY of `shadow` after each step.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA sinks_test;
SET search_path = sinks_test, regress;

CREATE TABLE views (id bigserial PRIMARY KEY, post_id int NOT NULL, weight int NOT NULL DEFAULT 1 CHECK (weight > 0),
                    at timestamp NOT NULL DEFAULT '2026-11-24 12:00');
CREATE TABLE shadow (id bigserial, post_id int, weight int NOT NULL DEFAULT 1,
                     at timestamp NOT NULL DEFAULT '2026-11-24 12:00');
CREATE TABLE posts (id int PRIMARY KEY, view_count bigint NOT NULL DEFAULT 0);
INSERT INTO posts SELECT g, 0 FROM generate_series(0, 9) g;

-- Three counters, one per kind: exact, sharded (a hot key), counter-cache columns of posts.
SELECT counters.create_counter('post_views', $$
	SELECT post_id, count(*) AS n, sum(weight) AS weight FROM views GROUP BY post_id$$);
SELECT counters.create_counter('hourly_views', $$
	SELECT date_trunc('hour', at) AS hour, count(*) AS n FROM views GROUP BY date_trunc('hour', at)$$,
	mode => 'sharded');
SELECT counters.create_counter('post_view_cache', $$
	SELECT post_id AS id, count(*) AS view_count FROM views GROUP BY post_id$$, target => 'posts');
CREATE VIEW post_views_expected AS
	SELECT post_id, count(*) AS n, sum(weight) AS weight FROM shadow GROUP BY post_id;
CREATE VIEW hourly_views_expected AS
	SELECT date_trunc('hour', at) AS hour, count(*) AS n FROM shadow GROUP BY date_trunc('hour', at);
CREATE VIEW post_view_cache_expected AS
	SELECT p.id, count(s.post_id) AS view_count FROM posts p LEFT JOIN shadow s ON s.post_id = p.id GROUP BY p.id;
CREATE VIEW post_view_cache_read AS SELECT id, view_count FROM posts;
CREATE TABLE checks (counter text, expected text);
INSERT INTO checks VALUES ('post_views', 'post_views_expected'), ('hourly_views', 'hourly_views_expected'),
                          ('post_view_cache_read', 'post_view_cache_expected');

-- Only an empty table becomes a sink.
INSERT INTO views (post_id) VALUES (1);
SELECT counters.set_sink('views');
DELETE FROM views;
SELECT counters.set_sink('views');
SELECT tgname FROM pg_trigger WHERE tgrelid = 'views'::regclass ORDER BY 1;

-- A new session's first statement (the library loads while the statement runs) counts like any other.
\c -
SET search_path = sinks_test, regress;
WITH r AS (INSERT INTO shadow (post_id) VALUES (1), (1) RETURNING post_id, weight, at)
INSERT INTO views (post_id, weight, at) SELECT * FROM r;
SELECT * FROM check_all();

-- One row, many rows, INSERT ... SELECT, defaults: counted, not stored.
WITH r AS (INSERT INTO shadow (post_id) VALUES (1) RETURNING post_id, weight, at)
INSERT INTO views (post_id, weight, at) SELECT * FROM r;
WITH r AS (INSERT INTO shadow (post_id, weight) VALUES (2, 3), (2, 1), (3, 2) RETURNING post_id, weight, at)
INSERT INTO views (post_id, weight, at) SELECT * FROM r;
WITH r AS (INSERT INTO shadow (post_id, weight, at)
           SELECT g % 10, 1 + g % 4, timestamp '2026-11-24 00:00' + (g % 7) * interval '1 hour'
             FROM generate_series(1, 5000) g RETURNING post_id, weight, at)
INSERT INTO views (post_id, weight, at) SELECT * FROM r;
SELECT count(*) AS stored FROM views;
SELECT * FROM check_all();

-- COPY: the same data into both.
COPY views (post_id, weight) FROM stdin;
4	2
4	1
7	5
\.
COPY shadow (post_id, weight) FROM stdin;
4	2
4	1
7	5
\.
SELECT count(*) AS stored FROM views;
SELECT * FROM check_all();

-- RETURNING returns no row (none is stored); ON CONFLICT DO NOTHING has nothing to conflict with.
INSERT INTO views (post_id) VALUES (5) RETURNING post_id;
INSERT INTO shadow (post_id) VALUES (5);
INSERT INTO views (id, post_id) VALUES (1, 6), (1, 6) ON CONFLICT DO NOTHING;
INSERT INTO shadow (id, post_id) VALUES (1, 6), (1, 6);
-- From a function, in a prepared statement, and rolled back to a savepoint.
CREATE FUNCTION view_post(p int) RETURNS void LANGUAGE sql AS $$
	INSERT INTO views (post_id) VALUES (p); INSERT INTO shadow (post_id) VALUES (p)$$;
SELECT view_post(g % 3) FROM generate_series(1, 30) g;
PREPARE v(int) AS WITH r AS (INSERT INTO shadow (post_id) VALUES ($1) RETURNING post_id)
                  INSERT INTO views (post_id) SELECT post_id FROM r;
EXECUTE v(8); EXECUTE v(8); EXECUTE v(9);
BEGIN;
SAVEPOINT s;
INSERT INTO views (post_id) SELECT 9 FROM generate_series(1, 100);
ROLLBACK TO SAVEPOINT s;
INSERT INTO views (post_id) VALUES (9);
INSERT INTO shadow (post_id) VALUES (9);
COMMIT;
SELECT * FROM check_all();

-- Rows wait for their statement's end in their subtransaction: a failed exception block takes them with it.
DO $$
BEGIN
	BEGIN
		INSERT INTO views (post_id) VALUES (4), (4);
		RAISE EXCEPTION 'rolled back';
	EXCEPTION WHEN raise_exception THEN NULL;
	END;
	INSERT INTO views (post_id) VALUES (4);
	INSERT INTO shadow (post_id) VALUES (4);
END $$;
SELECT * FROM check_all();
-- With counters_sink_end disabled, a commit fails rather than lose the rows waiting for it.
ALTER TABLE views DISABLE TRIGGER counters_sink_end;
INSERT INTO views (post_id) VALUES (4);
BEGIN;
INSERT INTO views (post_id) VALUES (4);
INSERT INTO views (post_id) VALUES (5);
COMMIT;
ALTER TABLE views ENABLE TRIGGER counters_sink_end;
SELECT * FROM check_all();

-- MERGE inserting into a sink counts its rows; an UPDATE or DELETE action is refused like UPDATE and DELETE.
MERGE INTO views v USING (SELECT 3 AS post_id) s ON false WHEN NOT MATCHED THEN INSERT (post_id) VALUES (s.post_id);
INSERT INTO shadow (post_id) VALUES (3);
SELECT * FROM check_all();
UPDATE views SET weight = 2;
DELETE FROM views WHERE post_id = 1;
MERGE INTO views v USING (SELECT 3 AS post_id) s ON v.post_id = s.post_id WHEN MATCHED THEN DELETE;
INSERT INTO views (id, post_id) VALUES (1, 6) ON CONFLICT (id) DO UPDATE SET weight = 2;

-- Rows are checked as an insert checks them: NOT NULL, CHECK; the statement fails and counts nothing.
-- (terse: the failing row's id comes from a sequence)
\set VERBOSITY terse
INSERT INTO views (post_id, weight) VALUES (1, 1), (1, 0);
INSERT INTO views (post_id) VALUES (1), (NULL);
\set VERBOSITY default
SELECT * FROM check_all();

-- A BEFORE INSERT trigger of the table runs first: the row it makes is the row counted.
CREATE FUNCTION double_weight() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.weight := NEW.weight * 2; RETURN NEW; END $$;
CREATE TRIGGER double_weight BEFORE INSERT ON views FOR EACH ROW EXECUTE FUNCTION double_weight();
INSERT INTO views (post_id, weight) VALUES (2, 5);
INSERT INTO shadow (post_id, weight) VALUES (2, 10);
DROP TRIGGER double_weight ON views;
SELECT * FROM check_all();

-- Bounds and thresholds hold for sink rows like any other.
SELECT counters.set_bounds('post_views', 'n', max => 1000);
INSERT INTO views (post_id) SELECT 2 FROM generate_series(1, 1000);
SELECT counters.set_bounds('post_views', 'n', NULL, NULL);
CREATE TABLE crossings (key jsonb, old numeric, new numeric, threshold numeric, direction text);
CREATE FUNCTION on_crossing(counter text, key jsonb, column_name text, old numeric, new numeric,
                            threshold numeric, direction text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO sinks_test.crossings VALUES (key, old, new, threshold, direction)$$;
SELECT counters.set_thresholds('post_views', 'n', '{600}', 'on_crossing'::regproc);
INSERT INTO views (post_id) SELECT 0 FROM generate_series(1, 100);
INSERT INTO shadow (post_id) SELECT 0 FROM generate_series(1, 100);
SELECT * FROM crossings;
SELECT counters.set_thresholds('post_views', 'n', '{}');
SELECT * FROM check_all();

-- An application role that may only insert: counted as the counters' owner, like any write.
SET ROLE NONE;
CREATE ROLE sinks_writer;
GRANT USAGE ON SCHEMA sinks_test TO sinks_writer;
GRANT INSERT ON views, shadow TO sinks_writer;
GRANT USAGE ON SEQUENCE views_id_seq, shadow_id_seq TO sinks_writer;
SET ROLE sinks_writer;
INSERT INTO views (post_id) VALUES (6), (6);
INSERT INTO shadow (post_id) VALUES (6), (6);
SELECT counters.set_sink('views', false);
SET ROLE counters_app;
SELECT * FROM check_all();

-- At REPEATABLE READ and SERIALIZABLE too.
BEGIN ISOLATION LEVEL REPEATABLE READ;
INSERT INTO views (post_id) VALUES (7);
INSERT INTO shadow (post_id) VALUES (7);
COMMIT;
BEGIN ISOLATION LEVEL SERIALIZABLE;
INSERT INTO views (post_id) VALUES (7);
INSERT INTO shadow (post_id) VALUES (7);
COMMIT;
SELECT * FROM check_all();

-- verify() has nothing to recount a sink's counters from: it says so; rebuild() refuses them.
SELECT * FROM counters.verify('post_views');
SELECT counters.rebuild('post_views');
-- Modes switch with the counts kept.
SELECT counters.alter_counter('hourly_views', 'log');
INSERT INTO views (post_id, at) VALUES (1, '2026-11-24 03:30');
INSERT INTO shadow (post_id, at) VALUES (1, '2026-11-24 03:30');
SELECT counters.compact('hourly_views');
SELECT * FROM check_all();

-- What a sink cannot keep: refused when it is made a sink, and at the next insert once DDL added it.
ALTER TABLE views ADD COLUMN post_ref int REFERENCES posts;
INSERT INTO views (post_id) VALUES (1);
ALTER TABLE views DROP COLUMN post_ref;
ALTER TABLE views ADD COLUMN double_weight int GENERATED ALWAYS AS (weight * 2) STORED;
INSERT INTO views (post_id) VALUES (1);
ALTER TABLE views DROP COLUMN double_weight;
-- Row-level security and views with a check option check the rows a statement stores: a sink stores none, so a
-- writer could count rows they refuse (a vote in another user's name). Refused: enabling row-level security on a sink,
-- a view with a check option over it (directly or through another view); and, should row-level security be enabled
-- all the same (here with event triggers off), the next insert.
ALTER TABLE views ENABLE ROW LEVEL SECURITY;
ALTER TABLE views FORCE ROW LEVEL SECURITY;
CREATE VIEW one_post_views AS SELECT * FROM views WHERE post_id = 1 WITH CHECK OPTION;
CREATE VIEW all_views AS SELECT * FROM views;
CREATE VIEW one_post_views AS SELECT * FROM all_views WHERE post_id = 1 WITH LOCAL CHECK OPTION;
ALTER VIEW all_views SET (check_option = cascaded);
CREATE OR REPLACE VIEW all_views AS SELECT * FROM views WITH CHECK OPTION;
-- (a view without one is fine: what is inserted through it is counted)
WITH r AS (INSERT INTO shadow (post_id) VALUES (5) RETURNING post_id, weight, at)
INSERT INTO all_views (post_id, weight, at) SELECT * FROM r;
SELECT * FROM check_all();
DROP VIEW all_views;
SET ROLE NONE;
SET session_replication_role = replica;
ALTER TABLE sinks_test.views ENABLE ROW LEVEL SECURITY;
RESET session_replication_role;
SET ROLE counters_app;
INSERT INTO views (post_id) VALUES (1);
ALTER TABLE views DISABLE ROW LEVEL SECURITY;
CREATE TABLE votes (id serial, post_id int NOT NULL, voter name NOT NULL DEFAULT current_user);
SELECT counters.create_counter('post_votes', 'SELECT post_id, voter, count(*) AS n FROM votes GROUP BY post_id, voter');
ALTER TABLE votes ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_votes ON votes WITH CHECK (voter = current_user);
SELECT counters.set_sink('votes');
ALTER TABLE votes DISABLE ROW LEVEL SECURITY;
CREATE VIEW my_votes AS SELECT * FROM votes WHERE voter = current_user WITH CHECK OPTION;
SELECT counters.set_sink('votes');
DROP VIEW my_votes;
SELECT counters.drop_counter('post_votes');
CREATE TABLE clicks (id serial, post_id int REFERENCES posts);
SELECT counters.create_counter('post_clicks', 'SELECT post_id, count(*) AS n FROM clicks GROUP BY post_id');
SELECT counters.set_sink('clicks');
CREATE TABLE shows (id serial, post_id int);
SELECT counters.set_sink('shows');
CREATE TABLE shows_by_day (day date, post_id int) PARTITION BY RANGE (day);
SELECT counters.create_counter('daily_shows', 'SELECT post_id, count(*) AS n FROM shows_by_day GROUP BY post_id');
SELECT counters.set_sink('shows_by_day');
SELECT counters.set_sink('views', NULL);
SET ROLE NONE;
CREATE ROLE sinks_other;
GRANT USAGE ON SCHEMA sinks_test TO sinks_other;
SET ROLE sinks_other;
SELECT counters.set_sink('sinks_test.views', false);
SET ROLE counters_app;

-- TRUNCATE zeroes its counters, as for any source.
TRUNCATE views;
TRUNCATE shadow;
SELECT * FROM check_all();
INSERT INTO views (post_id) VALUES (1);
INSERT INTO shadow (post_id) VALUES (1);

-- set_sink(false): rows are stored and counted again; UPDATE and DELETE count as usual.
SELECT counters.set_sink('views', false);
WITH r AS (INSERT INTO shadow (post_id) VALUES (3), (3) RETURNING id, post_id)
INSERT INTO views (id, post_id) SELECT id, post_id FROM r;
UPDATE views SET post_id = 4;
UPDATE shadow SET post_id = 4 WHERE id IN (SELECT id FROM views);
SELECT count(*) AS stored FROM views;
SELECT * FROM check_all();
SELECT tgname FROM pg_trigger WHERE tgrelid = 'views'::regclass ORDER BY 1;
DELETE FROM views;
DELETE FROM shadow WHERE post_id = 4;
SELECT counters.set_sink('views');
-- Dropping a sink's last counter makes it a table that stores its rows again, and says so.
SELECT counters.drop_counter('post_view_cache');
SELECT counters.drop_counter('hourly_views');
SELECT counters.drop_counter('post_views');
INSERT INTO views (post_id) VALUES (1);
SELECT count(*) AS stored FROM views;

SET ROLE NONE;
DROP SCHEMA sinks_test CASCADE;
DROP ROLE sinks_writer;
DROP ROLE sinks_other;
SET ROLE counters_app;
