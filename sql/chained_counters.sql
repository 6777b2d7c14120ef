--
-- chained_counters: a counter whose source is a table another counter keeps columns of (issue "Counters at any
-- depth": what works today, guarded). comments -> posts.comment_count (a counter cache), then per blog the sum and the
-- largest of its posts' counts and its posts (a counter cache on blogs, over posts): the upper counter follows the
-- lower one's writes, which fire its capture triggers. Compared after every step with a recount written from the
-- comments themselves, never from either counter.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA chained_test;
SET search_path = chained_test, regress;

CREATE TABLE blogs (id int PRIMARY KEY, comments bigint NOT NULL DEFAULT 0, posts bigint NOT NULL DEFAULT 0,
                    most_commented bigint);
CREATE TABLE posts (id int PRIMARY KEY, blog_id int NOT NULL REFERENCES blogs, comment_count bigint NOT NULL DEFAULT 0);
CREATE TABLE comments (id serial PRIMARY KEY, post_id int NOT NULL REFERENCES posts ON DELETE CASCADE);
CREATE INDEX ON posts (blog_id, comment_count);
INSERT INTO blogs (id) SELECT g FROM generate_series(1, 3) g;
INSERT INTO posts (id, blog_id) SELECT g, 1 + g % 3 FROM generate_series(1, 10) g;
INSERT INTO comments (post_id) SELECT 1 + g % 10 FROM generate_series(1, 100) g;

SELECT counters.create_counter('post_comments',
       'SELECT post_id AS id, count(*) AS comment_count FROM comments GROUP BY post_id', target => 'posts');
SELECT counters.create_counter('blog_comments',
       'SELECT blog_id AS id, sum(comment_count) AS comments, count(*) AS posts, max(comment_count) AS most_commented
          FROM posts GROUP BY blog_id', target => 'blogs');

-- the recount, from the comments: per post, and per blog through its posts
CREATE VIEW post_recount AS
SELECT p.id, count(c.id) AS comment_count FROM posts p LEFT JOIN comments c ON c.post_id = p.id GROUP BY p.id;
CREATE VIEW blog_recount AS
SELECT b.id, coalesce(sum(pr.comment_count), 0) AS comments, count(pr.id) AS posts, max(pr.comment_count) AS most_commented
  FROM blogs b LEFT JOIN posts p ON p.blog_id = b.id LEFT JOIN post_recount pr ON pr.id = p.id GROUP BY b.id;
CREATE VIEW post_read AS SELECT id, comment_count FROM posts;
CREATE VIEW blog_read AS SELECT id, comments, posts, most_commented FROM blogs;
CREATE TABLE checks (counter text, expected text);
INSERT INTO checks VALUES ('post_read', 'post_recount'), ('blog_read', 'blog_recount');
SELECT * FROM check_all();

-- comments added: both levels move in the same statement
INSERT INTO comments (post_id) SELECT 1 + g % 10 FROM generate_series(1, 50) g;
SELECT * FROM check_all();
-- a post moved to another blog (the middle level's key): its count moves with it
UPDATE posts SET blog_id = 3 WHERE id IN (1, 2);
SELECT * FROM check_all();
-- comments moved between posts of different blogs, comments deleted: the largest post count read again
UPDATE comments SET post_id = 5 WHERE id % 7 = 0;
DELETE FROM comments WHERE post_id = 5 AND id % 2 = 0;
DELETE FROM comments WHERE id % 11 = 0;
SELECT * FROM check_all();
-- a post deleted with its comments (the cascade writes the lower counter, the post's row leaves the upper one)
DELETE FROM posts WHERE id = 4;
SELECT * FROM check_all();
-- one transaction: a post moved, comments added to it, a savepoint rolled back
BEGIN;
UPDATE posts SET blog_id = 2 WHERE id = 3;
INSERT INTO comments (post_id) VALUES (3), (3);
SAVEPOINT s;
DELETE FROM comments WHERE post_id = 3;
ROLLBACK TO s;
COMMIT;
SELECT * FROM check_all();
SELECT * FROM counters.verify();

SELECT counters.drop_counter('blog_comments');
SELECT counters.drop_counter('post_comments');
DROP SCHEMA chained_test CASCADE;
