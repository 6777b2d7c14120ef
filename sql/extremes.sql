--
-- extremes: min() and max() in a definition, as users write them (the time of a thread's last reply, the lowest
-- offer), kept in exact mode. An addition moves the extreme as a sum moves; removing the current extreme reads the
-- key's next one through an index on (keys, argument), which the declaration requires. Compared after every step with
-- a recount by the definition's own aggregates over the source: inserts, deletes of the extreme and of others,
-- moves between keys, NULLs in and out, FILTER and WHERE, text in a collation, a bulk statement, savepoints, TRUNCATE,
-- a partitioned source, a composite key with NULLs; verify and rebuild; redefinitions to and from an extreme (the
-- table kept); counter-cache columns; what is refused, and why; the index dropped (a scan reads, slower, never wrong).
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA extremes_test;
SET search_path = extremes_test, regress;

CREATE TABLE replies (id serial PRIMARY KEY, thread_id int NOT NULL, created_at timestamptz, stars int,
                      author text COLLATE "C", hidden boolean NOT NULL DEFAULT false);
INSERT INTO replies (thread_id, created_at, stars, author, hidden)
SELECT g % 7, '2026-01-01'::timestamptz + (g * 37 % 200) * interval '1 hour',
       CASE WHEN g % 9 = 0 THEN NULL ELSE g * 5 % 11 END, 'u' || (g * 13 % 17), g % 10 = 0
  FROM generate_series(1, 300) g;

-- refused until the indexes exist: the hint is the statement to run
\set thread_def 'SELECT thread_id, count(*) AS replies, max(created_at) AS last_reply_at, min(stars) AS lowest, max(stars) FILTER (WHERE NOT hidden) AS best_visible, min(author) AS first_author FROM replies WHERE created_at IS NOT NULL GROUP BY thread_id'
SELECT counters.create_counter('thread_stats', :'thread_def');
CREATE INDEX ON replies (thread_id, created_at);
CREATE INDEX ON replies (thread_id, stars DESC);
SELECT counters.create_counter('thread_stats', :'thread_def');
-- text compares in its collation: the index must have it too
CREATE INDEX ON replies (thread_id, author COLLATE "POSIX");
SELECT counters.create_counter('thread_stats', :'thread_def');
CREATE INDEX ON replies (thread_id, author);
SELECT counters.create_counter('thread_stats', :'thread_def');
-- the counter table: each extreme in its argument's type and collation, NULL where no row counts
SELECT attname, format_type(atttypid, atttypmod) AS type, attnotnull, collname
  FROM pg_attribute LEFT JOIN pg_collation c ON c.oid = attcollation AND attcollation <> 0
 WHERE attrelid = 'thread_stats'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum;

CREATE VIEW stats_recount AS
SELECT thread_id, count(*) AS replies, max(created_at) AS last_reply_at, min(stars) AS lowest,
       max(stars) FILTER (WHERE NOT hidden) AS best_visible, min(author) AS first_author
  FROM replies WHERE created_at IS NOT NULL GROUP BY thread_id;
-- the recount is not vacuous: every thread has an extreme of each kind
SELECT count(*) AS threads, count(last_reply_at) AS with_last, count(lowest) AS with_lowest FROM stats_recount;
SELECT * FROM diff('thread_stats', 'stats_recount');

-- a new thread, whose only reply has no stars: its extremes are NULL, as the recount's
INSERT INTO replies (thread_id, created_at, stars, author) VALUES (100, '2026-03-01', NULL, 'zed');
SELECT * FROM thread_stats WHERE thread_id = 100;
-- additions beyond the extreme, and short of it
INSERT INTO replies (thread_id, created_at, stars, author) VALUES (100, '2026-04-01', 3, 'amy'), (100, '2026-02-01', 1, 'bob');
SELECT * FROM thread_stats WHERE thread_id = 100;
-- removing the extreme: the next one is read (twice the same extreme: one goes, the other stays)
INSERT INTO replies (thread_id, created_at, stars, author) VALUES (100, '2026-04-01', 1, 'amy');
DELETE FROM replies WHERE id = (SELECT max(id) FROM replies WHERE thread_id = 100 AND stars = 1);
SELECT * FROM thread_stats WHERE thread_id = 100;
DELETE FROM replies WHERE thread_id = 100 AND created_at = '2026-04-01';
SELECT * FROM thread_stats WHERE thread_id = 100;
-- the last rows go: the row goes
DELETE FROM replies WHERE thread_id = 100;
SELECT count(*) FROM thread_stats WHERE thread_id = 100;
SELECT * FROM diff('thread_stats', 'stats_recount');

-- moves between keys, values to and from NULL, the WHERE and the FILTER both ways, edits that keep the value
UPDATE replies SET thread_id = 3 WHERE id IN (SELECT id FROM replies WHERE thread_id = 2 ORDER BY created_at DESC LIMIT 2);
UPDATE replies SET stars = NULL WHERE id % 11 = 0;
UPDATE replies SET stars = 20 WHERE id % 23 = 0;
UPDATE replies SET created_at = NULL WHERE id % 29 = 0;
UPDATE replies SET hidden = NOT hidden WHERE id % 7 = 1;
UPDATE replies SET author = 'A' || author WHERE id % 13 = 0;
-- (rows updated in place, every key and extreme kept: the thread's counter row is not written, nothing is read again)
SELECT xmin::text AS x4 FROM thread_stats WHERE thread_id = 4 \gset
UPDATE replies SET hidden = hidden WHERE thread_id = 4;
SELECT xmin::text = :'x4' AS not_written FROM thread_stats WHERE thread_id = 4;
DELETE FROM replies WHERE id % 19 = 0;
SELECT * FROM diff('thread_stats', 'stats_recount');

-- a bulk statement: every thread's extremes removed at once, and more rows in
DELETE FROM replies r USING (SELECT thread_id, max(created_at) AS m FROM replies GROUP BY thread_id) x
 WHERE r.thread_id = x.thread_id AND r.created_at = x.m;
INSERT INTO replies (thread_id, created_at, stars, author)
SELECT g % 9, '2025-06-01'::timestamptz + g * interval '1 day', g % 4, 'v' || g FROM generate_series(1, 120) g;
SELECT * FROM diff('thread_stats', 'stats_recount');

-- savepoints: a removal of the extreme rolled back, one kept
BEGIN;
SAVEPOINT a;
DELETE FROM replies WHERE thread_id = 1;
ROLLBACK TO a;
DELETE FROM replies WHERE id = (SELECT id FROM replies WHERE thread_id = 1 ORDER BY created_at DESC NULLS LAST LIMIT 1);
SELECT * FROM diff('thread_stats', 'stats_recount');
COMMIT;
SELECT * FROM diff('thread_stats', 'stats_recount');

-- REPEATABLE READ: a removal of the extreme reads what the key's lock shows, and is exact at commit
BEGIN ISOLATION LEVEL REPEATABLE READ;
DELETE FROM replies WHERE id = (SELECT id FROM replies WHERE thread_id = 5 ORDER BY created_at DESC NULLS LAST LIMIT 1);
SELECT * FROM diff('thread_stats', 'stats_recount');
COMMIT;

-- verify sees a damaged extreme (not a number: its values show as NULL), and rebuild mends it
UPDATE thread_stats SET last_reply_at = '1999-01-01', lowest = -5 WHERE thread_id = 3;
SELECT column_name, stored, expected FROM counters.verify('thread_stats') ORDER BY column_name;
SELECT counters.rebuild('thread_stats');
SELECT * FROM counters.verify('thread_stats');

-- what an extreme cannot be: in log or sharded mode, ranked by top(), bounded, thresholded, windowed
SELECT counters.alter_counter('thread_stats', mode => 'log');
SELECT counters.alter_counter('thread_stats', mode => 'sharded');
SELECT * FROM counters.top('thread_stats', 'last_reply_at', 3);
SELECT counters.set_bounds('thread_stats', 'lowest', 0, 10);
SELECT counters.set_thresholds('thread_stats', 'lowest', ARRAY[5]);
SELECT counters.create_counter('thread_log', $$SELECT thread_id, max(created_at) AS last_at FROM replies GROUP BY thread_id$$,
                               mode => 'log');
-- nor through a parent row
CREATE TABLE threads (id int PRIMARY KEY, forum_id int NOT NULL, last_reply_at timestamptz, replies bigint NOT NULL DEFAULT 0);
INSERT INTO threads (id, forum_id) SELECT g, g % 2 FROM generate_series(0, 9) g;
SELECT counters.create_counter('forum_last', $$
    SELECT t.forum_id, max(r.created_at) AS last_at FROM replies r JOIN threads t ON r.thread_id = t.id GROUP BY t.forum_id
$$);

-- TRUNCATE empties it
BEGIN;
TRUNCATE replies;
SELECT count(*) FROM thread_stats;
ROLLBACK;
SELECT * FROM diff('thread_stats', 'stats_recount');

-- the index dropped after the declaration: removals of the extreme scan the rows (slower, never wrong)
DROP INDEX replies_thread_id_created_at_idx;
DELETE FROM replies WHERE id IN (SELECT DISTINCT ON (thread_id) id FROM replies ORDER BY thread_id, created_at DESC NULLS LAST);
SELECT * FROM diff('thread_stats', 'stats_recount');
CREATE INDEX ON replies (thread_id, created_at);

-- redefined: a count turned into an extreme of the same type (NULL allowed now), an extreme into a count (NOT NULL
-- again), an extreme dropped: the table kept
\set new_def 'SELECT thread_id, max(id::bigint) AS replies, max(created_at) AS last_reply_at, min(stars) AS lowest, count(*) AS best_visible FROM replies WHERE created_at IS NOT NULL GROUP BY thread_id'
SELECT counters.alter_counter('thread_stats', definition => :'new_def');
CREATE INDEX ON replies (thread_id, (id::bigint));
SELECT counters.alter_counter('thread_stats', definition => :'new_def');
DROP VIEW stats_recount;
CREATE VIEW stats_recount AS
SELECT thread_id, max(id::bigint) AS replies, max(created_at) AS last_reply_at, min(stars) AS lowest,
       count(*) AS best_visible
  FROM replies WHERE created_at IS NOT NULL GROUP BY thread_id;
SELECT * FROM diff('thread_stats', 'stats_recount');
DELETE FROM replies WHERE id IN (SELECT max(id) FROM replies GROUP BY thread_id);
SELECT * FROM diff('thread_stats', 'stats_recount');
SELECT attname, format_type(atttypid, atttypmod) AS type, attnotnull
  FROM pg_attribute WHERE attrelid = 'thread_stats'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum;

-- counter-cache columns: the thread's last reply and its count, in the threads table
SELECT counters.create_counter('thread_cache', $$
    SELECT thread_id AS id, count(*) AS replies, max(created_at) AS last_reply_at FROM replies GROUP BY thread_id
$$, target => 'threads');
CREATE VIEW cache_read AS SELECT id, replies, last_reply_at FROM threads WHERE replies <> 0 OR last_reply_at IS NOT NULL;
CREATE VIEW cache_recount AS
SELECT thread_id AS id, count(*) AS replies, max(created_at) AS last_reply_at FROM replies
 WHERE thread_id IN (SELECT id FROM threads) GROUP BY thread_id;
SELECT * FROM diff('cache_read', 'cache_recount');
DELETE FROM replies WHERE id IN (SELECT DISTINCT ON (thread_id) id FROM replies ORDER BY thread_id, created_at DESC NULLS LAST);
UPDATE replies SET thread_id = 8 WHERE thread_id = 6;
SELECT * FROM diff('cache_read', 'cache_recount');
DELETE FROM replies WHERE thread_id = 8;
SELECT id, replies, last_reply_at FROM threads WHERE id IN (6, 8) ORDER BY id;
-- a NOT NULL target column is refused: max() of a thread without replies is NULL
CREATE TABLE forums (id int PRIMARY KEY, last_at timestamptz NOT NULL DEFAULT now());
SELECT counters.create_counter('forum_cache', $$SELECT thread_id AS id, max(created_at) AS last_at FROM replies GROUP BY thread_id$$,
                               target => 'forums');

-- a partitioned source and a composite key with NULLs (the index of each partition is read)
CREATE TABLE offers (product_id int, region text, price numeric(10,2), at date) PARTITION BY RANGE (at);
CREATE TABLE offers_2025 PARTITION OF offers FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE offers_2026 (region text, price numeric(10,2), at date, product_id int);
ALTER TABLE offers ATTACH PARTITION offers_2026 FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
CREATE INDEX ON offers (product_id, region, price);
INSERT INTO offers SELECT g % 5, CASE WHEN g % 4 = 0 THEN NULL ELSE 'r' || g % 3 END, 10 + g * 7 % 50,
                          '2025-01-01'::date + g * 3 FROM generate_series(1, 200) g;
SELECT counters.create_counter('lowest_offer', $$
    SELECT product_id, region, min(price) AS lowest, max(price) AS highest, count(*) AS offers FROM offers GROUP BY product_id, region
$$);
CREATE VIEW offers_recount AS
SELECT product_id, region, min(price) AS lowest, max(price) AS highest, count(*) AS offers FROM offers GROUP BY product_id, region;
SELECT * FROM diff('lowest_offer', 'offers_recount');
DELETE FROM offers o USING (SELECT product_id, region, min(price) AS p FROM offers GROUP BY 1, 2) x
 WHERE o.product_id = x.product_id AND o.region IS NOT DISTINCT FROM x.region AND o.price = x.p;
UPDATE offers SET at = at + 365 WHERE product_id = 1 AND at < '2026-01-01';
DELETE FROM offers WHERE price = (SELECT max(price) FROM offers WHERE product_id = 2 AND region IS NULL) AND product_id = 2 AND region IS NULL;
SELECT * FROM diff('lowest_offer', 'offers_recount');

-- partitions taken away whole, holding every key's extremes: two emptied by one TRUNCATE (their rows are subtracted
-- while both still have them), one with partitions of its own detached, one dropped
CREATE TABLE offers_2027 PARTITION OF offers FOR VALUES FROM ('2027-01-01') TO ('2028-01-01');
CREATE TABLE offers_2028 PARTITION OF offers FOR VALUES FROM ('2028-01-01') TO ('2029-01-01') PARTITION BY LIST (region);
CREATE TABLE offers_2028_a PARTITION OF offers_2028 FOR VALUES IN ('r1');
CREATE TABLE offers_2028_b PARTITION OF offers_2028 DEFAULT;
INSERT INTO offers SELECT g % 5, CASE WHEN g % 4 = 0 THEN NULL ELSE 'r' || g % 3 END, 1 + g % 97,
                          '2027-01-01'::date + g * 3 FROM generate_series(1, 200) g;
SELECT min(lowest) AS lowest, max(highest) AS highest FROM lowest_offer;
SELECT * FROM diff('lowest_offer', 'offers_recount');
TRUNCATE offers_2027, offers_2028_a;
SELECT * FROM diff('lowest_offer', 'offers_recount');
INSERT INTO offers SELECT g % 5, 'r' || g % 3, 1 + g % 97, '2027-01-01'::date + g * 3 FROM generate_series(1, 200) g;
ALTER TABLE offers DETACH PARTITION offers_2028;
SELECT * FROM diff('lowest_offer', 'offers_recount');
TRUNCATE offers;
INSERT INTO offers SELECT g % 5, 'r' || g % 3, 1 + g % 97, '2026-01-01'::date + g * 3 FROM generate_series(1, 200) g;
DROP TABLE offers_2027;
SELECT * FROM diff('lowest_offer', 'offers_recount');
SELECT count(*) > 0 AS counted FROM lowest_offer;

-- an enum and an array: compared by their operator class's comparison (of anyenum, of anyarray)
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE moods (id serial PRIMARY KEY, person int NOT NULL, m mood, tags text[]);
CREATE INDEX ON moods (person, m);
CREATE INDEX ON moods (person, tags);
INSERT INTO moods (person, m, tags)
SELECT g % 4, (enum_range(NULL::mood))[1 + g % 3], ARRAY['t' || g % 5, 'u' || g % 2] FROM generate_series(1, 40) g;
SELECT counters.create_counter('best_mood', 'SELECT person, max(m) AS best, min(tags) AS first_tags FROM moods GROUP BY person');
CREATE VIEW moods_recount AS SELECT person, max(m) AS best, min(tags) AS first_tags FROM moods GROUP BY person;
DELETE FROM moods WHERE m = 'happy' AND person < 2;
DELETE FROM moods WHERE tags = (SELECT min(tags) FROM moods WHERE person = 3);
UPDATE moods SET m = 'happy', tags = NULL WHERE id = 1;
SELECT * FROM diff('best_mood', 'moods_recount');
SELECT counters.drop_counter('best_mood');

SELECT counters.drop_counter('lowest_offer');
SELECT counters.drop_counter('thread_cache');
SELECT counters.drop_counter('thread_stats');
DROP SCHEMA extremes_test CASCADE;
