--
-- chains: a counter through a chain of parent rows (reactions -> replies -> threads -> forums), kept as one exact
-- counter per level, each over the one below and one parent row (issue "Counters at any depth"). After every step the
-- counter is compared with its own definition's query, run over the tables (never with the levels): a change at any
-- level, including a move in the middle of the chain (counter_culture's issue #125), no foreign keys.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA chains_test;
SET search_path = chains_test, regress;

CREATE TABLE forums (id int PRIMARY KEY, region text NOT NULL DEFAULT 'eu');
CREATE TABLE threads (id int PRIMARY KEY, forum_id int, published bool NOT NULL DEFAULT true,
                      weight int NOT NULL DEFAULT 1);
CREATE TABLE replies (id bigint PRIMARY KEY, thread_id int NOT NULL, edited_at date);
CREATE TABLE reactions (id serial PRIMARY KEY, reply_id bigint, kind text NOT NULL DEFAULT 'like',
                        score int NOT NULL DEFAULT 1);
INSERT INTO forums SELECT g, CASE WHEN g % 2 = 0 THEN 'us' ELSE 'eu' END FROM generate_series(1, 4) g;
INSERT INTO threads SELECT g, 1 + g % 4, true, g FROM generate_series(1, 12) g;
INSERT INTO replies SELECT g, 1 + g % 12, CASE WHEN g % 3 = 0 THEN date '2026-01-01' END FROM generate_series(1, 40) g;
INSERT INTO reactions (reply_id, kind, score)
SELECT 1 + g % 40, CASE WHEN g % 3 = 0 THEN 'love' ELSE 'like' END, g % 7 FROM generate_series(1, 400) g;

-- keys from the top and the leaf; values from the leaf (count, sum), the middle (a sum of a thread's column per
-- reaction, a count of a reply's column), FILTER on the top and the leaf; WHERE on the middle
SELECT counters.create_counter('forum_reactions', $$
    SELECT f.id AS forum_id, r.kind, count(*) AS reactions, sum(r.score) AS score, sum(t.weight) AS weight,
           count(p.edited_at) AS on_edited, count(*) FILTER (WHERE f.region = 'eu' AND r.kind = 'like') AS eu_likes
      FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id
      JOIN forums f ON t.forum_id = f.id
     WHERE t.published
     GROUP BY f.id, r.kind $$);
-- one exact counter per level, each a level of the counter, bottom-up
SELECT name, mode, options->>'part_of' AS part_of, source::regclass
  FROM counters.counter ORDER BY created_at, name;

CREATE VIEW forum_recount AS
SELECT f.id AS forum_id, r.kind, count(*) AS reactions, sum(r.score) AS score, sum(t.weight) AS weight,
       count(p.edited_at) AS on_edited, count(*) FILTER (WHERE f.region = 'eu' AND r.kind = 'like') AS eu_likes
  FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id
  JOIN forums f ON t.forum_id = f.id
 WHERE t.published
 GROUP BY f.id, r.kind;
CREATE TABLE checks (counter text, expected text);
INSERT INTO checks VALUES ('forum_reactions', 'forum_recount');
SELECT * FROM check_all();

-- the leaf: reactions added, moved between replies, changed, deleted; one pointing nowhere
INSERT INTO reactions (reply_id, kind, score) VALUES (1, 'like', 3), (2, 'love', 5), (3, 'like', 0), (NULL, 'like', 1),
                                                     (999, 'love', 2);
UPDATE reactions SET reply_id = 7 WHERE id % 9 = 0;
UPDATE reactions SET kind = 'love', score = score + 1 WHERE id % 11 = 0;
DELETE FROM reactions WHERE id % 13 = 0;
SELECT * FROM check_all();
-- the middle: a reply moved to another thread, a thread moved to another forum (counter_culture #125), a thread
-- unpublished (the WHERE), weights changed (a middle value), a reply edited (a middle count)
UPDATE replies SET thread_id = 3 WHERE id IN (5, 6);
SELECT * FROM check_all();
UPDATE threads SET forum_id = 2 WHERE id = 4;
UPDATE threads SET published = false WHERE id IN (2, 9);
UPDATE threads SET weight = weight * 2 WHERE id % 2 = 0;
UPDATE replies SET edited_at = date '2026-02-01' WHERE id % 5 = 0;
SELECT * FROM check_all();
-- the top: a FILTER column changed, a key changed, a forum deleted and inserted again
UPDATE forums SET region = 'us' WHERE id = 1;
UPDATE forums SET id = 7 WHERE id = 3;
DELETE FROM forums WHERE id = 4;
SELECT * FROM check_all();
INSERT INTO forums VALUES (4, 'eu');
-- keys of the middle changed: a thread's id, a reply's id (their children point at nothing, then at the new row)
UPDATE threads SET id = 40 WHERE id = 5;
UPDATE replies SET id = 400 WHERE id = 8;
SELECT * FROM check_all();
UPDATE replies SET thread_id = 40 WHERE thread_id = 5;
UPDATE reactions SET reply_id = 400 WHERE reply_id = 8;
SELECT * FROM check_all();
-- a thread pointing at no forum, then back; a reply deleted, then inserted again (no foreign key: its reactions wait)
UPDATE threads SET forum_id = NULL WHERE id = 6;
DELETE FROM replies WHERE id = 10;
SELECT * FROM check_all();
UPDATE threads SET forum_id = 1 WHERE id = 6;
INSERT INTO replies VALUES (10, 11, NULL);
SELECT * FROM check_all();
-- one transaction over every level, a savepoint rolled back, a writable CTE over two levels
BEGIN;
UPDATE threads SET forum_id = 1 WHERE id = 7;
INSERT INTO reactions (reply_id, kind) SELECT 20 + g % 5, 'love' FROM generate_series(1, 30) g;
SAVEPOINT s;
UPDATE replies SET thread_id = 1 WHERE id > 30;
DELETE FROM reactions WHERE kind = 'love';
ROLLBACK TO s;
WITH moved AS (UPDATE replies SET thread_id = 2 WHERE id = 21 RETURNING id)
INSERT INTO reactions (reply_id, score) SELECT id, 4 FROM moved;
COMMIT;
SELECT * FROM check_all();
-- TRUNCATE of a middle table, then its rows again
TRUNCATE replies;
SELECT * FROM check_all();
INSERT INTO replies SELECT g, 1 + g % 12, NULL FROM generate_series(1, 40) g;
SELECT * FROM check_all();
SELECT * FROM counters.verify();

-- a level made wrong by hand: verify() says which; its upper levels followed it; rebuild() of the counter rebuilds
-- the levels bottom-up, then the counter
UPDATE forum_reactions_by_reply_id SET reactions = reactions + 5 WHERE reply_id = 1;
SELECT counter, key, column_name, stored - expected AS off FROM counters.verify('forum_reactions');
SELECT counters.rebuild('forum_reactions') >= 0 AS rebuilt;
SELECT * FROM counters.verify('forum_reactions');
SELECT * FROM check_all();

-- a BEFORE trigger on a middle table changes the row after the statement named it: counted as stored
CREATE FUNCTION threads_redirect() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.forum_id = 99 THEN
		NEW.forum_id := 2;
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER redirect BEFORE INSERT OR UPDATE ON threads FOR EACH ROW EXECUTE FUNCTION threads_redirect();
UPDATE threads SET forum_id = 99 WHERE id = 7;
INSERT INTO threads VALUES (50, 99, true, 3);
INSERT INTO replies VALUES (500, 50, NULL);
INSERT INTO reactions (reply_id) VALUES (500), (500);
SELECT * FROM check_all();
DROP TRIGGER redirect ON threads;

-- log mode: the counter itself; its levels stay exact
SELECT counters.alter_counter('forum_reactions', mode => 'log');
UPDATE threads SET forum_id = 3 WHERE id = 1;
INSERT INTO reactions (reply_id) SELECT g FROM generate_series(1, 40) g;
SELECT * FROM check_all();
SELECT counters.compact('forum_reactions') >= 0 AS compacted;
SELECT * FROM check_all();
SELECT counters.alter_counter('forum_reactions', mode => 'exact');

-- refused: changing a level (it follows its counter), counting a log counter's pending rows
SELECT * FROM errors(
    $$SELECT counters.drop_counter('forum_reactions_by_thread_id')$$,
    $$SELECT counters.alter_counter('forum_reactions_by_thread_id', mode => 'log')$$,
    $$SELECT counters.alter_counter('forum_reactions_by_reply_id',
          definition => 'SELECT reply_id, count(*) AS reactions FROM chains_test.reactions GROUP BY 1')$$);
SELECT counters.create_counter('reply_log', 'SELECT reply_id, count(*) AS n FROM reactions GROUP BY reply_id',
                               mode => 'log');
SELECT * FROM errors(
    $$SELECT counters.create_counter('over_totals', 'SELECT reply_id, sum(n) AS n FROM chains_test.reply_log_totals GROUP BY 1')$$,
    $$SELECT counters.create_counter('over_log', 'SELECT reply_id, sum(n) AS n FROM chains_test.reply_log_log GROUP BY 1')$$);
SELECT counters.drop_counter('reply_log');
-- refused: what a chain cannot keep exactly, each naming the counter
SELECT * FROM errors(
    $$SELECT counters.create_counter('mixed', 'SELECT f.id, count(*) FROM chains_test.reactions r
        JOIN chains_test.replies p ON r.reply_id = p.id JOIN chains_test.threads t ON p.thread_id = t.id
        JOIN chains_test.forums f ON t.forum_id = f.id WHERE r.score > t.weight GROUP BY f.id')$$,
    $$SELECT counters.create_counter('averaged', 'SELECT t.forum_id, avg(r.score) FROM chains_test.reactions r
        JOIN chains_test.replies p ON r.reply_id = p.id JOIN chains_test.threads t ON p.thread_id = t.id
        GROUP BY t.forum_id')$$,
    $$SELECT counters.create_counter('two_parents', 'SELECT t.forum_id, count(*) FROM chains_test.reactions r
        JOIN chains_test.replies p ON r.reply_id = p.id JOIN chains_test.threads t ON r.reply_id = t.id
        GROUP BY t.forum_id')$$,
    $$SELECT counters.create_counter('not_unique', 'SELECT p.thread_id, count(*) FROM chains_test.reactions r
        JOIN chains_test.replies p ON r.reply_id = p.id JOIN chains_test.threads t ON p.thread_id = t.weight
        GROUP BY p.thread_id')$$,
    $$SELECT counters.create_counter('outer', 'SELECT t.forum_id, count(*) FROM chains_test.reactions r
        JOIN chains_test.replies p ON r.reply_id = p.id LEFT JOIN chains_test.threads t ON p.thread_id = t.id
        GROUP BY t.forum_id')$$);
-- declared without blocking writers: each level's three steps, bottom-up, then the counter's
CALL counters.create_counter_concurrently('online_chain', $$SELECT t.forum_id, count(*) AS n FROM reactions r
    JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id GROUP BY t.forum_id$$, 'log');
SELECT name, mode, options->>'part_of' AS part_of, options ? 'chain' AS whole, options ? 'building' AS building
  FROM counters.counter WHERE name LIKE 'online_chain%' ORDER BY name;
CREATE VIEW online_recount AS SELECT t.forum_id, count(*) AS n FROM reactions r
    JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id GROUP BY t.forum_id;
INSERT INTO checks VALUES ('online_chain', 'online_recount');
SELECT * FROM check_all();
INSERT INTO reactions (reply_id) SELECT g FROM generate_series(1, 20) g;
UPDATE replies SET thread_id = 2 WHERE id % 4 = 0;
SELECT * FROM check_all();
-- rebuilt without blocking writers: the counter, from its levels; a level alone is refused
CALL counters.rebuild_concurrently('online_chain');
SELECT * FROM check_all();
CALL counters.rebuild_concurrently('online_chain_by_thread_id');
CALL counters.alter_counter_concurrently('online_chain', 'SELECT reply_id, count(*) AS n FROM reactions GROUP BY 1');
SELECT counters.drop_counter('online_chain');
DELETE FROM checks WHERE counter = 'online_chain';
DROP VIEW online_recount;

-- redefined: the levels are declared again, the counter keeps its table
SELECT counters.alter_counter('forum_reactions', definition => $$
    SELECT f.id AS forum_id, r.kind, count(*) AS reactions, sum(r.score) AS score, sum(t.weight) AS weight,
           count(p.edited_at) AS on_edited, count(*) FILTER (WHERE f.region = 'us' AND r.kind = 'like') AS eu_likes
      FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id
      JOIN forums f ON t.forum_id = f.id
     GROUP BY f.id, r.kind $$);
CREATE OR REPLACE VIEW forum_recount AS
SELECT f.id AS forum_id, r.kind, count(*) AS reactions, sum(r.score) AS score, sum(t.weight) AS weight,
       count(p.edited_at) AS on_edited, count(*) FILTER (WHERE f.region = 'us' AND r.kind = 'like') AS eu_likes
  FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id
  JOIN forums f ON t.forum_id = f.id
 GROUP BY f.id, r.kind;
SELECT * FROM check_all();
UPDATE threads SET published = false, forum_id = 2 WHERE id = 3;
SELECT * FROM check_all();
SELECT name, options->>'part_of' AS part_of FROM counters.counter ORDER BY name;

-- a column of the leaf changes type: the counter is declared again from its whole definition, its levels with it
-- (the recount view, which the type change would refuse, is dropped and made again from its own text)
SELECT pg_get_viewdef('forum_recount') AS recount \gset
DROP VIEW forum_recount;
ALTER TABLE reactions ALTER COLUMN score TYPE numeric;
CREATE VIEW forum_recount AS :recount
SELECT * FROM check_all();
SELECT name, options->>'part_of' AS part_of, options ? 'chain' AS whole FROM counters.counter ORDER BY name;
UPDATE reactions SET score = score + 0.5 WHERE id % 3 = 0;
SELECT * FROM check_all();

-- a column of a middle table changes type (a value read where threads are joined): the same
-- (the recount view, which the type change would refuse, is dropped and made again from its own text)
SELECT pg_get_viewdef('forum_recount') AS recount \gset
DROP VIEW forum_recount;
ALTER TABLE threads ALTER COLUMN weight TYPE numeric;
CREATE VIEW forum_recount AS :recount
UPDATE threads SET weight = weight + 0.25 WHERE id % 2 = 0;
SELECT * FROM check_all();

-- a chain into counter-cache columns of the top table, by forum
ALTER TABLE forums ADD COLUMN reaction_count bigint NOT NULL DEFAULT 0, ADD COLUMN love_score numeric NOT NULL DEFAULT 0;
SELECT counters.create_counter('forum_cache', $$
    SELECT f.id, count(*) AS reaction_count, sum(r.score) FILTER (WHERE r.kind = 'love') AS love_score
      FROM reactions r JOIN replies p ON r.reply_id = p.id JOIN threads t ON p.thread_id = t.id
      JOIN forums f ON t.forum_id = f.id GROUP BY f.id $$, target => 'forums');
CREATE VIEW cache_read AS SELECT id, reaction_count, love_score FROM forums;
CREATE VIEW cache_recount AS
SELECT f.id, count(r.id) AS reaction_count, coalesce(sum(r.score) FILTER (WHERE r.kind = 'love'), 0) AS love_score
  FROM forums f LEFT JOIN threads t ON t.forum_id = f.id LEFT JOIN replies p ON p.thread_id = t.id
  LEFT JOIN reactions r ON r.reply_id = p.id GROUP BY f.id;
INSERT INTO checks VALUES ('cache_read', 'cache_recount');
SELECT * FROM check_all();
UPDATE threads SET forum_id = 1 WHERE forum_id = 2;
INSERT INTO reactions (reply_id, kind, score) VALUES (12, 'love', 9);
SELECT * FROM check_all();

-- five levels (counter_culture's issue #125: a company moved to another industry must move its employees' counts
-- in every level above it): employees -> teams -> companies -> industries -> sectors
CREATE TABLE sectors (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE industries (id int PRIMARY KEY, sector_id int NOT NULL);
CREATE TABLE companies (id int PRIMARY KEY, industry_id int NOT NULL, listed bool NOT NULL DEFAULT false);
CREATE TABLE teams (id int PRIMARY KEY, company_id int NOT NULL);
CREATE TABLE employees (id serial PRIMARY KEY, team_id int NOT NULL, salary numeric NOT NULL);
INSERT INTO sectors VALUES (1, 'tech'), (2, 'health');
INSERT INTO industries SELECT g, 1 + g % 2 FROM generate_series(1, 4) g;
INSERT INTO companies SELECT g, 1 + g % 4, g % 3 = 0 FROM generate_series(1, 8) g;
INSERT INTO teams SELECT g, 1 + g % 8 FROM generate_series(1, 16) g;
INSERT INTO employees (team_id, salary) SELECT 1 + g % 16, 1000 + g FROM generate_series(1, 200) g;
SELECT counters.create_counter('sector_staff', $$
    SELECT s.name AS sector, c.listed, count(*) AS employees, sum(e.salary) AS payroll
      FROM employees e JOIN teams t ON e.team_id = t.id JOIN companies c ON t.company_id = c.id
      JOIN industries i ON c.industry_id = i.id JOIN sectors s ON i.sector_id = s.id
     GROUP BY s.name, c.listed $$);
CREATE VIEW sector_recount AS
SELECT s.name AS sector, c.listed, count(*) AS employees, sum(e.salary) AS payroll
  FROM employees e JOIN teams t ON e.team_id = t.id JOIN companies c ON t.company_id = c.id
  JOIN industries i ON c.industry_id = i.id JOIN sectors s ON i.sector_id = s.id
 GROUP BY s.name, c.listed;
INSERT INTO checks VALUES ('sector_staff', 'sector_recount');
SELECT count(*) AS levels FROM counters.counter WHERE options->>'part_of' = 'sector_staff';
SELECT * FROM check_all();
UPDATE companies SET industry_id = 2 WHERE id = 3;
SELECT * FROM check_all();
UPDATE industries SET sector_id = 1 WHERE id = 2;
UPDATE companies SET listed = NOT listed WHERE id % 2 = 0;
UPDATE sectors SET name = 'care' WHERE id = 2;
UPDATE teams SET company_id = 1 WHERE id = 5;
UPDATE employees SET salary = salary + 1, team_id = 1 + team_id % 16 WHERE id % 4 = 0;
SELECT * FROM check_all();
SELECT counters.drop_counter('sector_staff');
DELETE FROM checks WHERE counter = 'sector_staff';

-- a time rollup is a counter over a counter: events per hour, then per day and per month over the hourly table
-- (no join: the hourly counter's writes fire the daily one's triggers, in the same statement)
CREATE TABLE events (id serial PRIMARY KEY, at timestamptz NOT NULL, bytes int NOT NULL);
INSERT INTO events (at, bytes)
SELECT timestamptz '2026-01-30 20:00+00' + g * interval '7 minutes', g % 100 FROM generate_series(1, 1000) g;
SET timezone = 'UTC';
SELECT counters.create_counter('events_hourly', $$
    SELECT date_trunc('hour', at AT TIME ZONE 'UTC') AS hour, count(*) AS events, sum(bytes) AS bytes
      FROM events GROUP BY 1 $$);
SELECT counters.create_counter('events_daily', $$
    SELECT date_trunc('day', hour) AS day, sum(events) AS events, sum(bytes) AS bytes FROM events_hourly GROUP BY 1 $$);
SELECT counters.create_counter('events_monthly', $$
    SELECT date_trunc('month', day) AS month, sum(events) AS events, sum(bytes) AS bytes FROM events_daily GROUP BY 1 $$);
CREATE VIEW daily_recount AS SELECT date_trunc('day', at AT TIME ZONE 'UTC') AS day, count(*) AS events,
       sum(bytes) AS bytes FROM events GROUP BY 1;
CREATE VIEW monthly_recount AS SELECT date_trunc('month', at AT TIME ZONE 'UTC') AS month, count(*) AS events,
       sum(bytes) AS bytes FROM events GROUP BY 1;
INSERT INTO checks VALUES ('events_daily', 'daily_recount'), ('events_monthly', 'monthly_recount');
SELECT * FROM check_all();
INSERT INTO events (at, bytes) SELECT timestamptz '2026-02-03 00:00+00' + g * interval '1 hour', 5 FROM generate_series(1, 50) g;
UPDATE events SET at = at + interval '1 month' WHERE id % 10 = 0;
DELETE FROM events WHERE id % 7 = 0;
SELECT * FROM check_all();
-- verify() and rebuild() of the monthly counter go through the daily and hourly ones first, bottom-up
UPDATE events_hourly SET events = events + 1 WHERE hour = (SELECT min(hour) FROM events_hourly);
SELECT counter, column_name, stored - expected AS off FROM counters.verify('events_monthly');
SELECT counters.rebuild('events_monthly') >= 0 AS rebuilt;
SELECT * FROM check_all();
-- the hourly counter redefined (big events only): its table is kept, the daily and monthly ones follow it
SELECT counters.alter_counter('events_hourly', definition => $$
    SELECT date_trunc('hour', at AT TIME ZONE 'UTC') AS hour, count(*) AS events, sum(bytes) AS bytes
      FROM events WHERE bytes >= 10 GROUP BY 1 $$);
CREATE OR REPLACE VIEW daily_recount AS SELECT date_trunc('day', at AT TIME ZONE 'UTC') AS day, count(*) AS events,
       sum(bytes) AS bytes FROM events WHERE bytes >= 10 GROUP BY 1;
CREATE OR REPLACE VIEW monthly_recount AS SELECT date_trunc('month', at AT TIME ZONE 'UTC') AS month,
       count(*) AS events, sum(bytes) AS bytes FROM events WHERE bytes >= 10 GROUP BY 1;
SELECT * FROM check_all();
UPDATE events SET bytes = 50 WHERE id % 5 = 0;
SELECT * FROM check_all();
SELECT * FROM errors($$SELECT counters.drop_counter('events_daily')$$);
SELECT counters.drop_counter('events_monthly');
SELECT counters.drop_counter('events_daily');
SELECT counters.drop_counter('events_hourly');
DELETE FROM checks WHERE counter LIKE 'events%';
RESET timezone;

-- a parent's key that loses its unique index: writes through it stop, naming the level, rather than count a row once
-- per parent row of its key (its join is oriented by its source, whatever indexes exist)
ALTER TABLE threads DROP CONSTRAINT threads_pkey;
\set VERBOSITY terse
INSERT INTO reactions (reply_id) VALUES (1);
\set VERBOSITY default
ALTER TABLE threads ADD PRIMARY KEY (id);
INSERT INTO reactions (reply_id) VALUES (1);
SELECT * FROM check_all();

-- dropped: the levels go with the counter
SELECT counters.drop_counter('forum_cache');
SELECT counters.drop_counter('forum_reactions');
SELECT count(*) AS counters_left FROM counters.counter;
SELECT count(*) AS tables_left FROM pg_class WHERE relname LIKE 'forum\_reactions%' AND relnamespace = 'chains_test'::regnamespace;
DROP SCHEMA chains_test CASCADE;
