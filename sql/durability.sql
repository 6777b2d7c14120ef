--
-- durability: what would make a counter silently stop matching its source is refused, or said when it happens.
-- An unlogged source or counter table (crash recovery empties unlogged tables and keeps the others) is refused at
-- declaration and by ALTER TABLE ... SET UNLOGGED, and so is an unlogged partition of a counted table; disabling a
-- capture trigger, or making it fire for the replica role only, warns naming the counters; a counted table renamed or
-- moved to another schema warns that a table taking its old name is not counted (a swap by rename, which verify()
-- cannot see), and the documented recipe (alter_counter with the same definition) counts the new table, checked
-- against a recount.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA durability;
SET search_path = durability, regress;
CREATE TABLE posts (id int PRIMARY KEY, blog_id int NOT NULL, rating int NOT NULL DEFAULT 0);
INSERT INTO posts SELECT g, 1 + g % 3, g % 5 FROM generate_series(1, 30) g;
CREATE TABLE blogs (id int PRIMARY KEY, posts_count bigint NOT NULL DEFAULT 0);
INSERT INTO blogs SELECT g, 0 FROM generate_series(1, 3) g;
SELECT counters.create_counter('blog_posts', 'SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY blog_id');
SELECT counters.create_counter('blog_cache', 'SELECT blog_id AS id, count(*) AS posts_count FROM posts GROUP BY blog_id',
                               target => 'blogs');
SELECT counters.create_counter('blog_log', 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id', mode => 'log');
CREATE UNLOGGED TABLE scratch (id int PRIMARY KEY, blog_id int NOT NULL);
CREATE UNLOGGED TABLE unlogged_blogs (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
CREATE TABLE events (at date NOT NULL, kind int NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE events_2026 PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
SELECT counters.create_counter('event_kinds', 'SELECT kind, count(*) AS n FROM events GROUP BY kind');
CREATE UNLOGGED TABLE events_2027 (at date NOT NULL, kind int NOT NULL);

-- 1. Unlogged tables: refused when declaring, and as a change, leaving everything as it was.
SELECT * FROM errors(
	$$SELECT counters.create_counter('scratch_blogs', 'SELECT blog_id, count(*) AS n FROM scratch GROUP BY blog_id')$$,
	$$SELECT counters.create_counter('cache_unlogged', 'SELECT blog_id AS id, count(*) AS n FROM posts GROUP BY blog_id', target => 'unlogged_blogs')$$,
	'ALTER TABLE posts SET UNLOGGED',
	'ALTER TABLE blog_posts SET UNLOGGED',
	'ALTER TABLE blogs SET UNLOGGED',
	'ALTER TABLE blog_log_log SET UNLOGGED',
	'ALTER TABLE blog_log_totals SET UNLOGGED',
	$$CREATE UNLOGGED TABLE events_2028 PARTITION OF events FOR VALUES FROM ('2028-01-01') TO ('2029-01-01')$$,
	$$ALTER TABLE events ATTACH PARTITION events_2027 FOR VALUES FROM ('2027-01-01') TO ('2028-01-01')$$,
	'ALTER TABLE events_2026 SET UNLOGGED');
SELECT c.relname, c.relpersistence FROM pg_class c
 WHERE c.relnamespace = 'durability'::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1;
SELECT name FROM counters.counter WHERE name IN ('scratch_blogs', 'cache_unlogged');
-- (a table no counter reads is left alone)
ALTER TABLE scratch SET LOGGED;
ALTER TABLE scratch SET UNLOGGED;

-- 2. Disabled triggers: the change is made, with a warning naming each counter that misses the writes.
ALTER TABLE posts DISABLE TRIGGER counters_insert;
INSERT INTO posts VALUES (31, 1, 4);
ALTER TABLE posts ENABLE TRIGGER counters_insert;
ALTER TABLE posts DISABLE TRIGGER ALL;
ALTER TABLE posts ENABLE TRIGGER ALL;
ALTER TABLE posts DISABLE TRIGGER USER;
ALTER TABLE posts ENABLE TRIGGER USER;
ALTER TABLE posts ENABLE REPLICA TRIGGER counters_update;
ALTER TABLE posts ENABLE TRIGGER counters_update;
ALTER TABLE events_2026 DISABLE TRIGGER counters_insert;
ALTER TABLE events_2026 ENABLE TRIGGER counters_insert;
-- (another trigger: no warning)
CREATE FUNCTION nothing() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END';
CREATE TRIGGER audit AFTER INSERT ON posts FOR EACH STATEMENT EXECUTE FUNCTION nothing();
ALTER TABLE posts DISABLE TRIGGER audit;
DROP TRIGGER audit ON posts;
-- the insert made while disabled is what verify() finds and rebuild() repairs
SELECT counter, key FROM counters.verify() ORDER BY 1, 2;
SET client_min_messages = warning;
SELECT counters.rebuild(name) FROM counters.counter WHERE name LIKE 'blog%' ORDER BY name;
RESET client_min_messages;
SELECT count(*) AS differences FROM counters.verify();

-- 3. A swap by rename (pg_repack by hand): each rename of a counted table warns; the counter follows the old table.
BEGIN;
CREATE TABLE posts_new (LIKE posts INCLUDING ALL);
INSERT INTO posts_new SELECT * FROM posts WHERE id % 4 <> 0;
ALTER TABLE posts RENAME TO posts_old;
ALTER TABLE posts_new RENAME TO posts;
COMMIT;
ALTER TABLE posts_old SET SCHEMA regress;
ALTER TABLE regress.posts_old SET SCHEMA durability;
SELECT name, source FROM counters.counters WHERE name LIKE 'blog%' ORDER BY name;
-- the recipe: declare each counter again on the table its definition names, and it counts the new table
SET client_min_messages = warning;
SELECT counters.alter_counter('blog_posts', definition => 'SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY blog_id');
SELECT counters.alter_counter('blog_cache', definition => 'SELECT blog_id AS id, count(*) AS posts_count FROM posts GROUP BY blog_id');
SELECT counters.alter_counter('blog_log', definition => 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id');
RESET client_min_messages;
SELECT name, source, mode FROM counters.counters WHERE name LIKE 'blog%' ORDER BY name;
-- (the old table is counted no more: it lost its triggers, and takes writes)
SELECT count(*) AS triggers_left FROM pg_trigger WHERE tgrelid = 'posts_old'::regclass AND tgname LIKE 'counters%';
INSERT INTO posts_old VALUES (1000, 1, 1);
INSERT INTO posts VALUES (100, 2, 3);
UPDATE posts SET blog_id = 3 WHERE id = 1;
CREATE VIEW expected AS SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM posts GROUP BY blog_id;
SELECT * FROM diff('blog_posts', 'expected');
CREATE VIEW expected_log AS SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id;
SELECT * FROM diff('blog_log', 'expected_log');
SELECT b.id, b.posts_count, (SELECT count(*) FROM posts p WHERE p.blog_id = b.id) AS recount FROM blogs b ORDER BY 1;
DROP TABLE posts_old;

DROP VIEW expected, expected_log;
SELECT counters.drop_counter(name) FROM counters.counter ORDER BY name;
RESET search_path;
DROP SCHEMA durability CASCADE;
