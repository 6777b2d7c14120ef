--
-- deferred: deferred counters (issue "Deferred counters"): a transaction's deltas held until it commits and applied
-- then, once per key. After every commit each counter is compared with a recount of its source (check_all); inside a
-- transaction, what a reader sees is shown (the counter without the transaction's held deltas).
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA deferred_test;
SET search_path = deferred_test, regress;

CREATE TABLE blogs (id int PRIMARY KEY, posts_count bigint NOT NULL DEFAULT 0, rating_sum bigint NOT NULL DEFAULT 0);
CREATE TABLE posts (id serial PRIMARY KEY, blog_id int NOT NULL, rating int NOT NULL DEFAULT 1,
                    tag text NOT NULL DEFAULT 'a');
INSERT INTO blogs SELECT g FROM generate_series(1, 5) g;
CREATE INDEX ON posts (blog_id, rating);
CREATE INDEX ON posts (blog_id, tag);
SELECT counters.create_counter('bp', 'SELECT blog_id, count(*) AS n, sum(rating) AS rating_sum, max(rating) AS top,
                                             count(DISTINCT tag) AS tags FROM posts GROUP BY blog_id');
SELECT counters.create_counter('blog_cache', 'SELECT blog_id AS id, count(*) AS posts_count,
                                                     sum(rating) AS rating_sum
                                                FROM posts GROUP BY blog_id', 'blogs');
CREATE VIEW bp_recount AS SELECT blog_id, count(*) AS n, sum(rating) AS rating_sum, max(rating) AS top,
                                 count(DISTINCT tag) AS tags FROM posts GROUP BY blog_id;
CREATE VIEW cache_stored AS SELECT id, posts_count, rating_sum FROM blogs;
CREATE VIEW cache_recount AS
SELECT b.id, count(p.id) AS posts_count, coalesce(sum(p.rating), 0) AS rating_sum
  FROM blogs b LEFT JOIN posts p ON p.blog_id = b.id GROUP BY b.id;
CREATE TABLE checks (counter text, expected text);
INSERT INTO checks VALUES ('bp', 'bp_recount'), ('cache_stored', 'cache_recount');

-- immediate stays the default; set_deferred makes a counter apply at commit
SELECT name, options ? 'deferred' AS deferred FROM counters.counter ORDER BY name;
SELECT counters.set_deferred('bp');
SELECT counters.set_deferred('blog_cache');
SELECT name, options->'deferred' AS deferred FROM counters.counter ORDER BY name;

-- a reader in the transaction sees the counter without its own held deltas (as a deferred constraint is not checked
-- yet); after the commit, every delta is there
BEGIN;
INSERT INTO posts (blog_id, rating, tag) VALUES (1, 5, 'a'), (2, 3, 'b');
INSERT INTO posts (blog_id, rating, tag) VALUES (1, 7, 'b');
INSERT INTO posts (blog_id, rating, tag) VALUES (2, 1, 'b');
SELECT * FROM bp ORDER BY blog_id;
SELECT id, posts_count, rating_sum FROM blogs WHERE id <= 2 ORDER BY id;
COMMIT;
SELECT * FROM bp ORDER BY blog_id;
SELECT * FROM check_all();

-- savepoints: a rolled-back subtransaction's deltas go, a released one's stay; nested, and a PL/pgSQL exception block
BEGIN;
INSERT INTO posts (blog_id, rating) VALUES (3, 2);
SAVEPOINT a;
INSERT INTO posts (blog_id, rating) VALUES (3, 100);
SAVEPOINT b;
DELETE FROM posts WHERE blog_id = 1;
ROLLBACK TO b;
RELEASE a;
SAVEPOINT c;
UPDATE posts SET blog_id = 4 WHERE blog_id = 2;
ROLLBACK TO c;
DO $$
BEGIN
	INSERT INTO deferred_test.posts (blog_id, rating) VALUES (5, 9);
	BEGIN
		INSERT INTO deferred_test.posts (blog_id, rating) VALUES (5, 1000);
		RAISE EXCEPTION 'rolled back';
	EXCEPTION WHEN raise_exception THEN NULL;
	END;
END $$;
COMMIT;
SELECT * FROM bp ORDER BY blog_id;
SELECT * FROM check_all();

-- deltas applied inside a subtransaction that then rolls back are held again (its writes are gone)
BEGIN;
INSERT INTO posts (blog_id, rating, tag) VALUES (4, 4, 'c');
SAVEPOINT s;
SELECT counters.apply_deferred() > 0 AS applied;
SELECT n, top FROM bp WHERE blog_id = 4;
ROLLBACK TO s;
SELECT n, top FROM bp WHERE blog_id = 4;
INSERT INTO posts (blog_id, rating, tag) VALUES (4, 1, 'c');
COMMIT;
SELECT * FROM check_all();

-- removals: max() and count(DISTINCT) taken back across statements, re-read at the apply
BEGIN;
DELETE FROM posts WHERE blog_id = 3 AND rating = 100;
INSERT INTO posts (blog_id, rating, tag) VALUES (3, 50, 'z');
DELETE FROM posts WHERE blog_id = 3 AND rating = 50;
UPDATE posts SET tag = 'a' WHERE blog_id = 1;
DELETE FROM posts WHERE blog_id = 2 AND tag = 'b' AND rating = 1;
COMMIT;
SELECT * FROM bp ORDER BY blog_id;
SELECT * FROM check_all();

-- counters.apply overrides each counter's setting for a transaction (SET LOCAL), as SET CONSTRAINTS does; switching to
-- immediate applies what was held, now
BEGIN;
SET LOCAL counters.apply = immediate;
INSERT INTO posts (blog_id) VALUES (5);
SELECT n FROM bp WHERE blog_id = 5;
SET LOCAL counters.apply = deferred;
INSERT INTO posts (blog_id) VALUES (5);
SELECT n FROM bp WHERE blog_id = 5;
SET LOCAL counters.apply = immediate;
SELECT n FROM bp WHERE blog_id = 5;
COMMIT;
SELECT * FROM check_all();
-- ... and with set_config(), at the end of the next statement that writes the counter
BEGIN;
INSERT INTO posts (blog_id) VALUES (5);
SELECT set_config('counters.apply', 'immediate', true);
SELECT n FROM bp WHERE blog_id = 5;
INSERT INTO posts (blog_id) VALUES (4);
SELECT n FROM bp WHERE blog_id IN (4, 5) ORDER BY blog_id;
COMMIT;
SELECT * FROM check_all();
SHOW counters.apply;
SET counters.apply = sometimes;

-- a counter that is not deferred, deferred for one transaction
CREATE TABLE likes (post_id int NOT NULL);
SELECT counters.create_counter('post_likes', 'SELECT post_id, count(*) AS n FROM likes GROUP BY post_id');
CREATE VIEW likes_recount AS SELECT post_id, count(*) AS n FROM likes GROUP BY post_id;
INSERT INTO checks VALUES ('post_likes', 'likes_recount');
BEGIN;
SET LOCAL counters.apply = deferred;
INSERT INTO likes VALUES (1), (2);
INSERT INTO likes VALUES (1);
SELECT count(*) FROM post_likes;
COMMIT;
SELECT * FROM post_likes ORDER BY post_id;
SELECT * FROM check_all();

-- statements that read or rewrite a counter as a whole apply what is held first: verify(), rebuild(), TRUNCATE,
-- ALTER TABLE, alter_counter(), drop_counter()
BEGIN;
INSERT INTO posts (blog_id, rating) VALUES (1, 3);
SELECT * FROM counters.verify('bp');
SELECT counters.rebuild('bp') >= 0 AS rebuilt;
INSERT INTO posts (blog_id, rating) VALUES (1, 3);
COMMIT;
SELECT * FROM check_all();
BEGIN;
INSERT INTO likes VALUES (7);
SET LOCAL counters.apply = deferred;
INSERT INTO likes VALUES (7), (8);
TRUNCATE likes;
INSERT INTO likes VALUES (9);
COMMIT;
SELECT * FROM post_likes ORDER BY post_id;
SELECT * FROM check_all();
BEGIN;
INSERT INTO posts (blog_id, rating) VALUES (2, 6);
ALTER TABLE posts ADD COLUMN note text;
INSERT INTO posts (blog_id, rating) VALUES (2, 6);
SELECT counters.alter_counter('blog_cache', definition => 'SELECT blog_id AS id, count(*) AS posts_count,
                                                                  sum(rating) AS rating_sum
                                                             FROM posts WHERE rating > 0 GROUP BY blog_id');
INSERT INTO posts (blog_id, rating) VALUES (2, 6);
COMMIT;
SELECT * FROM check_all();
SELECT name, options->'deferred' AS deferred FROM counters.counter WHERE name = 'blog_cache';

-- a counter-cache row that takes another key is recounted for it: what was held for the table is applied first
BEGIN;
INSERT INTO posts (blog_id, rating) VALUES (5, 2), (5, 2);
INSERT INTO blogs (id) VALUES (6);
UPDATE blogs SET id = 7 WHERE id = 5;
UPDATE posts SET blog_id = 7 WHERE blog_id = 5;
INSERT INTO posts (blog_id, rating) VALUES (7, 1), (6, 1);
COMMIT;
SELECT * FROM check_all();

-- bounds are checked when the deltas are applied: the commit fails, with the same error, and nothing is kept
SELECT counters.set_bounds('bp', 'n', min => 0, max => (SELECT n + 3 FROM bp WHERE blog_id = 1));
SELECT n FROM bp WHERE blog_id = 1;
BEGIN;
INSERT INTO posts (blog_id) SELECT 1 FROM generate_series(1, 3);
INSERT INTO posts (blog_id) VALUES (1);
SELECT 'the statements pass' AS deferred;
COMMIT;
SELECT n FROM bp WHERE blog_id = 1;
SELECT * FROM check_all();
-- ... and by apply_deferred(), which a savepoint can catch
BEGIN;
INSERT INTO posts (blog_id) SELECT 1 FROM generate_series(1, 4);
SAVEPOINT s;
SELECT counters.apply_deferred();
ROLLBACK TO s;
DELETE FROM posts WHERE id = (SELECT max(id) FROM posts WHERE blog_id = 1);
COMMIT;
SELECT n FROM bp WHERE blog_id = 1;
SELECT * FROM check_all();
SELECT counters.set_bounds('bp', 'n');

-- thresholds are announced from the values applied at commit (the callback runs then, as the owner)
CREATE TABLE crossings (counter text, key jsonb, col text, old numeric, new numeric, threshold numeric,
                        direction text);
CREATE FUNCTION note_crossing(counter text, key jsonb, col text, old numeric, new numeric, threshold numeric,
                              direction text) RETURNS void
LANGUAGE sql AS $$ INSERT INTO deferred_test.crossings VALUES (counter, key, col, old, new, threshold, direction) $$;
SELECT counters.set_thresholds('post_likes', 'n', '{3}', 'note_crossing(text, jsonb, text, numeric, numeric, numeric, text)');
SELECT counters.set_deferred('post_likes');
BEGIN;
INSERT INTO likes VALUES (20);
INSERT INTO likes VALUES (20);
INSERT INTO likes VALUES (20);
INSERT INTO likes VALUES (20);
SELECT count(*) AS announced_before_commit FROM crossings;
COMMIT;
SELECT counter, key, col, old, new, threshold, direction FROM crossings;
SELECT * FROM check_all();

-- window thresholds likewise: the window sum crosses when the transaction's deltas are applied
CREATE TABLE hits (tag text NOT NULL, day date NOT NULL DEFAULT current_date);
SELECT counters.create_counter('tag_days', 'SELECT tag, day, count(*) AS uses FROM hits GROUP BY tag, day');
SELECT counters.set_window_thresholds('tag_days', 'uses', '{3}', 'day', '2 days',
                                      'note_crossing(text, jsonb, text, numeric, numeric, numeric, text)');
SELECT counters.set_deferred('tag_days');
DELETE FROM crossings;
BEGIN;
INSERT INTO hits (tag) VALUES ('pg');
INSERT INTO hits (tag) VALUES ('pg');
INSERT INTO hits (tag, day) VALUES ('pg', current_date - 1);
SELECT count(*) AS announced_before_commit FROM crossings;
COMMIT;
SELECT counter, key, col, new, threshold, direction FROM crossings;
CREATE VIEW hits_recount AS SELECT tag, day, count(*) AS uses FROM hits GROUP BY tag, day;
INSERT INTO checks VALUES ('tag_days', 'hits_recount');
SELECT * FROM check_all();

-- PREPARE TRANSACTION applies first; the prepared transaction then holds nothing
BEGIN;
INSERT INTO posts (blog_id, rating) VALUES (3, 8);
PREPARE TRANSACTION 'counters_deferred';
COMMIT PREPARED 'counters_deferred';
SELECT * FROM check_all();

-- log and sharded mode: deferral batches their writes (they never lock a key's row)
SELECT counters.alter_counter('post_likes', 'log');
BEGIN;
INSERT INTO likes VALUES (30), (31);
INSERT INTO likes VALUES (30);
DELETE FROM likes WHERE post_id = 31;
COMMIT;
SELECT * FROM check_all();
SELECT counters.alter_counter('post_likes', 'sharded');
BEGIN;
INSERT INTO likes VALUES (30), (32);
UPDATE likes SET post_id = 33 WHERE post_id = 30;
COMMIT;
SELECT * FROM check_all();
SELECT counters.alter_counter('post_likes', 'exact');

-- a bounded memory: a transaction holding more than counters.statement_memory applies in sorted batches
BEGIN;
SET LOCAL counters.statement_memory = 64;
INSERT INTO posts (blog_id, rating, tag) SELECT 100 + g, g % 5, 't' || g % 3 FROM generate_series(1, 3000) g;
INSERT INTO posts (blog_id, rating, tag) SELECT 100 + g, g % 7, 't' || g % 4 FROM generate_series(2000, 6000) g;
UPDATE posts SET rating = rating + 1 WHERE blog_id > 4000;
COMMIT;
SELECT * FROM check_all();

-- through a parent row, and through a chain (set_deferred defers its levels with it)
CREATE TABLE comments (id serial PRIMARY KEY, post_id int NOT NULL);
CREATE INDEX ON comments (post_id);
SELECT counters.create_counter('blog_comments', 'SELECT p.blog_id, count(*) AS n
                                                    FROM comments c JOIN posts p ON c.post_id = p.id
                                                   GROUP BY p.blog_id');
CREATE TABLE reactions (id serial PRIMARY KEY, comment_id int NOT NULL);
CREATE INDEX ON reactions (comment_id);
SELECT counters.create_counter('blog_reactions', 'SELECT p.blog_id, count(*) AS n
                                                     FROM reactions r JOIN comments c ON r.comment_id = c.id
                                                     JOIN posts p ON c.post_id = p.id GROUP BY p.blog_id');
SELECT counters.set_deferred('blog_comments');
SELECT counters.set_deferred('blog_reactions');
SELECT counters.set_deferred('blog_reactions_by_post_id');
SELECT name, options->'deferred' AS deferred FROM counters.counter WHERE name LIKE 'blog_%' ORDER BY name;
CREATE VIEW comments_recount AS
SELECT p.blog_id, count(*) AS n FROM comments c JOIN posts p ON c.post_id = p.id GROUP BY p.blog_id;
CREATE VIEW reactions_recount AS
SELECT p.blog_id, count(*) AS n FROM reactions r JOIN comments c ON r.comment_id = c.id
  JOIN posts p ON c.post_id = p.id GROUP BY p.blog_id;
INSERT INTO checks VALUES ('blog_comments', 'comments_recount'), ('blog_reactions', 'reactions_recount');
BEGIN;
INSERT INTO comments (post_id) SELECT id FROM posts WHERE blog_id <= 3;
INSERT INTO reactions (comment_id) SELECT id FROM comments;
UPDATE posts SET blog_id = 4 WHERE blog_id = 3;
DELETE FROM reactions WHERE id % 3 = 0;
SELECT count(*) AS before_commit FROM blog_reactions;
COMMIT;
SELECT * FROM check_all();

-- a sink: its rows are counted at each statement's end and stored nowhere; deferred, they are held until the commit
CREATE TABLE page_views (page_id int NOT NULL);
SELECT counters.create_counter('page_hits', 'SELECT page_id, count(*) AS n FROM page_views GROUP BY page_id');
SELECT counters.set_sink('page_views');
SELECT counters.set_deferred('page_hits');
BEGIN;
INSERT INTO page_views VALUES (1), (2), (1);
INSERT INTO page_views VALUES (2);
SAVEPOINT s;
INSERT INTO page_views VALUES (3);
ROLLBACK TO s;
SELECT count(*) AS before_commit FROM page_hits;
COMMIT;
SELECT * FROM page_hits ORDER BY page_id;
SELECT count(*) AS stored FROM page_views;

-- set_deferred: errors name the counter
SELECT counters.set_deferred('no_such_counter');
SELECT counters.set_deferred('bp', NULL);
SET ROLE NONE;
CREATE ROLE deferred_tenant;
GRANT USAGE ON SCHEMA deferred_test TO deferred_tenant;
SET ROLE deferred_tenant;
SELECT counters.set_deferred('bp', false);
RESET ROLE;
SET ROLE NONE;
DROP OWNED BY deferred_tenant;
DROP ROLE deferred_tenant;
RESET ROLE;
SELECT counters.set_deferred('bp', false);
SELECT name, options ? 'deferred' AS deferred FROM counters.counter WHERE name = 'bp';

-- a counter dropped in the transaction that holds its deltas
BEGIN;
INSERT INTO likes VALUES (40);
SELECT counters.drop_counter('post_likes');
INSERT INTO likes VALUES (40);
COMMIT;
DELETE FROM checks WHERE counter = 'post_likes';
SELECT * FROM check_all();

DROP SCHEMA deferred_test CASCADE;
