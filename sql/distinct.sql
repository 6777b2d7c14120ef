--
-- distinct: count(DISTINCT x) in a definition, as users write it (distinct commenters per post, distinct visible tags),
-- kept in exact mode. A statement that changes a (key, x) pair's rows reads the pair again through an index on (keys,
-- x), which the declaration requires: the column moves by one when the pair's rows go from none to some, or from some
-- to none. Compared after every step with a recount by the definition's own aggregates over the source: a new value,
-- the same value again, a value's last row gone and one of two gone, moves between keys, NULLs in and out, FILTER and
-- WHERE both ways, updates that keep the pair, a bulk statement, savepoints, REPEATABLE READ, TRUNCATE, a partitioned
-- source; verify and rebuild; top(); counter-cache columns; what is refused.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA distinct_test;
SET search_path = distinct_test, regress;

CREATE TABLE comments (id serial PRIMARY KEY, post_id int NOT NULL, user_id int, tag text COLLATE "C",
                       hidden boolean NOT NULL DEFAULT false, body text);
INSERT INTO comments (post_id, user_id, tag, hidden)
SELECT g % 7, CASE WHEN g % 11 = 0 THEN NULL ELSE g * 7 % 13 END, 't' || (g * 5 % 9), g % 10 = 0
  FROM generate_series(1, 300) g;

\set post_def 'SELECT post_id, count(*) AS comments, count(DISTINCT user_id) AS commenters, count(DISTINCT tag) FILTER (WHERE NOT hidden) AS visible_tags FROM comments WHERE post_id <> 50 GROUP BY post_id'
-- refused until the indexes exist: the hint is the statement to run
SELECT counters.create_counter('post_stats', :'post_def');
CREATE INDEX ON comments (post_id, user_id);
CREATE INDEX ON comments (post_id, tag);
SELECT counters.create_counter('post_stats', :'post_def');
CREATE VIEW stats_recount AS
SELECT post_id, count(*) AS comments, count(DISTINCT user_id) AS commenters,
       count(DISTINCT tag) FILTER (WHERE NOT hidden) AS visible_tags
  FROM comments WHERE post_id <> 50 GROUP BY post_id;
-- the recount is not vacuous: many commenters and tags per post
SELECT count(*) AS posts, min(commenters) AS fewest, max(visible_tags) AS most_tags FROM stats_recount;
SELECT * FROM diff('post_stats', 'stats_recount');

-- a new commenter; the same one again; another, and a comment without one
INSERT INTO comments (post_id, user_id, tag) VALUES (100, 1, 'a');
SELECT * FROM post_stats WHERE post_id = 100;
INSERT INTO comments (post_id, user_id, tag) VALUES (100, 1, 'a'), (100, 2, 'b'), (100, NULL, NULL);
SELECT * FROM post_stats WHERE post_id = 100;
-- one of a commenter's two comments goes (still a commenter); the other's only one goes
DELETE FROM comments WHERE id = (SELECT max(id) FROM comments WHERE post_id = 100 AND user_id = 1);
SELECT * FROM post_stats WHERE post_id = 100;
DELETE FROM comments WHERE post_id = 100 AND user_id = 2;
SELECT * FROM post_stats WHERE post_id = 100;
-- a statement that adds and removes the same pair's rows: one row version (the pairs cancel)
SELECT xmin::text AS x100 FROM post_stats WHERE post_id = 100 \gset
UPDATE comments SET body = 'edited' WHERE post_id = 100;
SELECT xmin::text = :'x100' AS not_written FROM post_stats WHERE post_id = 100;
DELETE FROM comments WHERE post_id = 100;
SELECT count(*) FROM post_stats WHERE post_id = 100;
SELECT * FROM diff('post_stats', 'stats_recount');

-- moves between keys, values to and from NULL, the WHERE and the FILTER both ways
UPDATE comments SET post_id = 3 WHERE id IN (SELECT id FROM comments WHERE post_id = 2 ORDER BY id LIMIT 5);
UPDATE comments SET user_id = NULL WHERE id % 13 = 0;
UPDATE comments SET user_id = 99 WHERE id % 17 = 0;
UPDATE comments SET hidden = NOT hidden WHERE id % 7 = 1;
UPDATE comments SET tag = upper(tag) WHERE id % 5 = 0;
UPDATE comments SET post_id = 50 WHERE id % 23 = 0;
UPDATE comments SET post_id = 4 WHERE post_id = 50 AND id % 2 = 0;
DELETE FROM comments WHERE id % 19 = 0;
SELECT * FROM diff('post_stats', 'stats_recount');

-- a bulk statement: many pairs of many posts, some new, some not; then half of them gone
INSERT INTO comments (post_id, user_id, tag) SELECT g % 9, g % 40, 'b' || g % 6 FROM generate_series(1, 2000) g;
SELECT * FROM diff('post_stats', 'stats_recount');
DELETE FROM comments WHERE id % 2 = 0;
SELECT * FROM diff('post_stats', 'stats_recount');

-- savepoints: a post's comments removed and rolled back, one commenter's removed and kept
BEGIN;
SAVEPOINT a;
DELETE FROM comments WHERE post_id = 1;
ROLLBACK TO a;
DELETE FROM comments WHERE post_id = 1 AND user_id = (SELECT min(user_id) FROM comments WHERE post_id = 1);
SELECT * FROM diff('post_stats', 'stats_recount');
COMMIT;
SELECT * FROM diff('post_stats', 'stats_recount');
BEGIN ISOLATION LEVEL REPEATABLE READ;
INSERT INTO comments (post_id, user_id, tag) VALUES (5, 1000, 'new');
DELETE FROM comments WHERE post_id = 5 AND user_id = (SELECT min(user_id) FROM comments WHERE post_id = 5);
SELECT * FROM diff('post_stats', 'stats_recount');
COMMIT;

-- verify sees a damaged count, rebuild mends it; top() ranks by it
UPDATE post_stats SET commenters = commenters + 5 WHERE post_id = 3;
SELECT column_name, stored - expected AS off FROM counters.verify('post_stats');
SELECT counters.rebuild('post_stats');
SELECT * FROM counters.verify('post_stats');
SELECT (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(key) k) AS keys, value = (SELECT max(commenters) FROM stats_recount) AS most
  FROM counters.top('post_stats', 'commenters', 1);

-- what it cannot be: in log or sharded mode, bounded, thresholded; through a parent row; over an index of another order
SELECT counters.alter_counter('post_stats', mode => 'log');
SELECT counters.set_bounds('post_stats', 'commenters', 0, 10);
SELECT counters.set_thresholds('post_stats', 'commenters', ARRAY[5]);
SELECT counters.create_counter('post_log', 'SELECT post_id, count(DISTINCT user_id) AS n FROM comments GROUP BY post_id',
                               mode => 'sharded');
CREATE TABLE posts (id int PRIMARY KEY, blog_id int NOT NULL, commenters bigint NOT NULL DEFAULT 0);
INSERT INTO posts SELECT g, g % 2 FROM generate_series(0, 9) g;
SELECT counters.create_counter('blog_commenters', $$
    SELECT p.blog_id, count(DISTINCT c.user_id) AS n FROM comments c JOIN posts p ON c.post_id = p.id GROUP BY p.blog_id
$$);
SELECT counters.create_counter('two_args', 'SELECT post_id, count(DISTINCT (user_id, tag)) AS n FROM comments GROUP BY post_id');

-- nor over a sink, which stores no rows to read the pairs from: neither made a sink, nor declared over one
CREATE TABLE clicks (thumb int NOT NULL, visitor int);
CREATE INDEX ON clicks (thumb, visitor);
SELECT counters.create_counter('thumb_visitors', 'SELECT thumb, count(DISTINCT visitor) AS visitors FROM clicks GROUP BY thumb');
SELECT counters.set_sink('clicks');
SELECT counters.drop_counter('thumb_visitors');
SELECT counters.create_counter('thumb_clicks', 'SELECT thumb, count(*) AS n FROM clicks GROUP BY thumb');
SELECT counters.set_sink('clicks');
SELECT counters.create_counter('thumb_visitors', 'SELECT thumb, count(DISTINCT visitor) AS visitors FROM clicks GROUP BY thumb');
SELECT counters.drop_counter('thumb_clicks');

-- TRUNCATE empties it
BEGIN;
TRUNCATE comments;
SELECT count(*) FROM post_stats;
ROLLBACK;
SELECT * FROM diff('post_stats', 'stats_recount');

-- the index dropped after the declaration: a scan reads the pairs (slower, never wrong)
DROP INDEX comments_post_id_user_id_idx;
INSERT INTO comments (post_id, user_id) SELECT g % 3, 500 + g % 4 FROM generate_series(1, 20) g;
DELETE FROM comments WHERE user_id >= 500 AND id % 3 = 0;
SELECT * FROM diff('post_stats', 'stats_recount');
CREATE INDEX ON comments (post_id, user_id);

-- counter-cache columns: each post's distinct commenters, in the posts table
SELECT counters.create_counter('post_cache', $$
    SELECT post_id AS id, count(DISTINCT user_id) AS commenters FROM comments GROUP BY post_id
$$, target => 'posts');
CREATE VIEW cache_read AS SELECT id, commenters FROM posts WHERE commenters <> 0;
CREATE VIEW cache_recount AS
SELECT post_id AS id, count(DISTINCT user_id) AS commenters FROM comments
 WHERE post_id IN (SELECT id FROM posts) GROUP BY post_id HAVING count(DISTINCT user_id) <> 0;
SELECT * FROM diff('cache_read', 'cache_recount');
DELETE FROM comments WHERE id IN (SELECT DISTINCT ON (post_id) id FROM comments ORDER BY post_id, id);
UPDATE comments SET post_id = 8 WHERE post_id = 6;
UPDATE comments SET user_id = 1 WHERE post_id = 8;
SELECT * FROM diff('cache_read', 'cache_recount');

-- many keys in one statement (the deltas' hash table grows, moving its entries): each user's distinct posts and last
-- post, through single rows, bulk statements and updates that keep every pair
CREATE INDEX ON comments (user_id, post_id);
SELECT counters.create_counter('user_posts', 'SELECT user_id, count(DISTINCT post_id) AS posts, max(post_id) AS last_post FROM comments GROUP BY user_id');
CREATE VIEW user_posts_recount AS
SELECT user_id, count(DISTINCT post_id) AS posts, max(post_id) AS last_post FROM comments GROUP BY user_id;
INSERT INTO comments (post_id, user_id) SELECT g % 30, g % 700 FROM generate_series(1, 3000) g;
SELECT * FROM diff('user_posts', 'user_posts_recount');
UPDATE comments SET body = 'again' WHERE user_id < 700;
UPDATE comments SET post_id = post_id + 1 WHERE user_id % 3 = 0;
DELETE FROM comments WHERE user_id % 5 = 0 AND post_id % 2 = 0;
SELECT * FROM diff('user_posts', 'user_posts_recount');
SELECT count(*) > 600 AS many_keys FROM user_posts;
SELECT counters.drop_counter('user_posts');

-- a partitioned source: partitions emptied by one TRUNCATE and detached (the pairs are read without their rows)
CREATE TABLE visits (page int NOT NULL, visitor uuid, day date NOT NULL) PARTITION BY RANGE (day);
CREATE TABLE visits_1 PARTITION OF visits FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
CREATE TABLE visits_2 PARTITION OF visits FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
CREATE TABLE visits_3 PARTITION OF visits FOR VALUES FROM ('2026-03-01') TO ('2026-04-01');
CREATE INDEX ON visits (page, visitor);
INSERT INTO visits SELECT g % 4, md5((g % 15)::text)::uuid, '2026-01-01'::date + g % 89 FROM generate_series(1, 600) g;
SELECT counters.create_counter('page_visitors', 'SELECT page, count(DISTINCT visitor) AS visitors, count(*) AS visits FROM visits GROUP BY page');
CREATE VIEW visitors_recount AS SELECT page, count(DISTINCT visitor) AS visitors, count(*) AS visits FROM visits GROUP BY page;
SELECT * FROM diff('page_visitors', 'visitors_recount');
TRUNCATE visits_1, visits_2;
SELECT * FROM diff('page_visitors', 'visitors_recount');
INSERT INTO visits SELECT g % 4, md5((g % 40)::text)::uuid, '2026-01-01'::date + g % 89 FROM generate_series(1, 600) g;
ALTER TABLE visits DETACH PARTITION visits_3;
SELECT * FROM diff('page_visitors', 'visitors_recount');
SELECT sum(visitors) > 0 AS counted FROM page_visitors;

SELECT counters.drop_counter('page_visitors');
SELECT counters.drop_counter('post_cache');
SELECT counters.drop_counter('post_stats');
DROP SCHEMA distinct_test CASCADE;
