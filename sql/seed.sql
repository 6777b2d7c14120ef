--
-- seed: the seed article's evolving requirements, as one story. Blogs and posts; posts per blog; drafts do not
-- count; soft-deleted posts do not count; posts move between blogs; counts per (user, blog); posts change author;
-- rating sums; and finally the counter-cache pattern: the counts kept in columns of blogs itself. After every step
-- each counter equals a recomputation written out here (both directions with EXCEPT; an absent counter row means
-- zeros).
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA seed_test;
SET search_path = seed_test, regress;

-- by name: counters are dropped and declared again as the requirements change
CREATE TABLE checks (counter text PRIMARY KEY, expected text NOT NULL);

CREATE TABLE users (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE blogs (
	id         int PRIMARY KEY,
	title      text NOT NULL,
	post_count int NOT NULL DEFAULT 0,
	rating_sum numeric NOT NULL DEFAULT 0
);
CREATE TABLE posts (
	id           int PRIMARY KEY,
	blog_id      int NOT NULL REFERENCES blogs ON DELETE CASCADE,
	user_id      int NOT NULL REFERENCES users,
	title        text NOT NULL,
	rating       int,
	is_published boolean NOT NULL DEFAULT true,
	is_deleted   boolean NOT NULL DEFAULT false
);
INSERT INTO users VALUES (1, 'ann'), (2, 'bob'), (3, 'cy');
INSERT INTO blogs (id, title) VALUES (1, 'cooking'), (2, 'cycling'), (3, 'chess');
INSERT INTO posts (id, blog_id, user_id, title) VALUES
	(1, 1, 1, 'bread'), (2, 1, 1, 'soup'), (3, 1, 2, 'pie'), (4, 2, 2, 'alps'), (5, 2, 3, 'gears');

--
-- 1. How many posts does each blog have?
--
SELECT counters.create_counter('posts_per_blog', 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id');
CREATE VIEW expect_posts_per_blog AS SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id;
INSERT INTO checks VALUES ('posts_per_blog', 'expect_posts_per_blog');
SELECT b.title, coalesce(c.posts, 0) AS posts FROM blogs b LEFT JOIN posts_per_blog c ON c.blog_id = b.id ORDER BY b.id;
SELECT * FROM check_all();
INSERT INTO posts (id, blog_id, user_id, title) VALUES (6, 3, 3, 'openings'), (7, 3, 1, 'endgames');
DELETE FROM posts WHERE id = 2;
SELECT * FROM check_all();

--
-- 2. Drafts: only published posts count. The counter is declared again with a WHERE clause.
--
SELECT counters.drop_counter('posts_per_blog');
SELECT counters.create_counter('posts_per_blog', $$
	SELECT blog_id, count(*) AS posts FROM posts WHERE is_published GROUP BY blog_id
$$);
CREATE OR REPLACE VIEW expect_posts_per_blog AS
	SELECT blog_id, count(*) AS posts FROM posts WHERE is_published GROUP BY blog_id;
SELECT * FROM check_all();
INSERT INTO posts (id, blog_id, user_id, title, is_published) VALUES (8, 1, 1, 'cake (draft)', false),
                                                                      (9, 3, 2, 'gambits (draft)', false);
SELECT * FROM check_all();
UPDATE posts SET is_published = true, title = 'cake' WHERE id = 8;     -- published
SELECT * FROM check_all();
UPDATE posts SET is_published = false WHERE id IN (6, 7);              -- back to drafts: chess has none left
SELECT * FROM posts_per_blog ORDER BY blog_id;
SELECT * FROM check_all();
DELETE FROM posts WHERE id = 9;                                         -- a draft goes: nothing changes
SELECT * FROM check_all();

--
-- 3. Soft delete: posts marked is_deleted do not count either.
--
SELECT counters.drop_counter('posts_per_blog');
SELECT counters.create_counter('posts_per_blog', $$
	SELECT blog_id, count(*) AS posts FROM posts WHERE is_published AND NOT is_deleted GROUP BY blog_id
$$);
CREATE OR REPLACE VIEW expect_posts_per_blog AS
	SELECT blog_id, count(*) AS posts FROM posts WHERE is_published AND NOT is_deleted GROUP BY blog_id;
SELECT * FROM check_all();
UPDATE posts SET is_deleted = true WHERE id IN (1, 4);
SELECT * FROM check_all();
UPDATE posts SET is_deleted = false WHERE id = 4;                       -- restored
SELECT * FROM check_all();
DELETE FROM posts WHERE id = 1;                                         -- purging a soft-deleted post
SELECT * FROM check_all();
UPDATE posts SET is_deleted = true, is_published = true WHERE id = 6;   -- deleted draft published: still hidden
SELECT * FROM check_all();

--
-- 4. Moving a post to another blog.
--
UPDATE posts SET blog_id = 2 WHERE id = 3;
SELECT * FROM check_all();
UPDATE posts SET blog_id = 3 WHERE id IN (6, 7);                        -- hidden posts move: nothing changes
SELECT * FROM check_all();
UPDATE posts SET blog_id = CASE blog_id WHEN 1 THEN 2 ELSE 1 END WHERE blog_id IN (1, 2);   -- swap the two blogs
SELECT * FROM posts_per_blog ORDER BY blog_id;
SELECT * FROM check_all();

--
-- 5. Posts per (user, blog), for an author's page.
--
SELECT counters.create_counter('user_blog_posts', $$
	SELECT user_id, blog_id, count(*) AS posts FROM posts WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id
$$);
CREATE VIEW expect_user_blog_posts AS
	SELECT user_id, blog_id, count(*) AS posts FROM posts WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id;
INSERT INTO checks VALUES ('user_blog_posts', 'expect_user_blog_posts');
SELECT u.name, b.title, c.posts FROM user_blog_posts c JOIN users u ON u.id = c.user_id JOIN blogs b ON b.id = c.blog_id
 ORDER BY u.name, b.title;
SELECT * FROM check_all();
INSERT INTO posts (id, blog_id, user_id, title) VALUES (10, 3, 2, 'tactics'), (11, 3, 2, 'puzzles');
UPDATE posts SET is_deleted = false WHERE id = 6;
SELECT * FROM check_all();

--
-- 6. A post changes author (and, in one statement, author and blog).
--
UPDATE posts SET user_id = 1 WHERE id = 10;
SELECT * FROM check_all();
UPDATE posts SET user_id = 3, blog_id = 1 WHERE id IN (4, 11);
SELECT * FROM check_all();
UPDATE users SET name = 'ann b.' WHERE id = 1;                          -- another table: nothing to do
SELECT * FROM check_all();

--
-- 7. Rating sums per (user, blog): the seed's example as it ends up.
--
SELECT counters.drop_counter('user_blog_posts');
-- (regress.seed_example(): setup.sql)
SELECT counters.create_counter('user_blog_posts', regress.seed_example());
CREATE OR REPLACE VIEW expect_user_blog_posts AS
	SELECT user_id, blog_id, count(*) AS posts, coalesce(sum(rating), 0) AS rating_sum
	  FROM posts WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id;
SELECT * FROM check_all();
UPDATE posts SET rating = id % 5 + 1 WHERE id % 2 = 0;
SELECT * FROM check_all();
UPDATE posts SET rating = rating * 2 WHERE rating IS NOT NULL AND user_id = 2;
UPDATE posts SET rating = NULL WHERE id = 4;
SELECT * FROM check_all();
INSERT INTO posts (id, blog_id, user_id, title, rating) VALUES (12, 2, 1, 'tandem', 5), (13, 2, 1, 'commute', -1);
SELECT u.name, b.title, c.posts, c.rating_sum
  FROM user_blog_posts c JOIN users u ON u.id = c.user_id JOIN blogs b ON b.id = c.blog_id ORDER BY u.name, b.title;
SELECT * FROM check_all();

--
-- 8. The counter cache: blogs.post_count and blogs.rating_sum kept by a counter whose target is blogs itself.
-- The columns hold stale values at first; declaring the counter sets them (0 for a blog without counted posts).
--
UPDATE blogs SET post_count = 99, rating_sum = -1 WHERE id = 1;
SELECT counters.create_counter('blog_cache', $$
	SELECT blog_id AS id, count(*) AS post_count, sum(rating) AS rating_sum
	  FROM posts
	 WHERE is_published AND NOT is_deleted
	 GROUP BY blog_id
$$, target => 'blogs');
SELECT name, source, target, created_target FROM counters.counters WHERE name = 'blog_cache';
CREATE VIEW blogs_cached AS SELECT id, post_count, rating_sum FROM blogs;
CREATE VIEW expect_blogs_cached AS
	SELECT b.id, coalesce(x.post_count, 0) AS post_count, coalesce(x.rating_sum, 0) AS rating_sum
	  FROM blogs b
	  LEFT JOIN (SELECT blog_id, count(*) AS post_count, sum(rating) AS rating_sum
	               FROM posts WHERE is_published AND NOT is_deleted GROUP BY blog_id) x ON x.blog_id = b.id;
INSERT INTO checks VALUES ('blogs_cached', 'expect_blogs_cached');
-- the blog list reads its counts from blogs itself
SELECT id, title, post_count, rating_sum FROM blogs ORDER BY id;
SELECT * FROM check_all();
-- a new blog (its columns start at their default, 0), posts in it, one of them turned back into a draft
INSERT INTO blogs (id, title) VALUES (4, 'climbing');
INSERT INTO posts (id, blog_id, user_id, title, rating) VALUES (14, 4, 3, 'ropes', 4), (15, 4, 3, 'knots', NULL),
                                                                (16, 4, 2, 'grades (draft)', 3);
UPDATE posts SET is_published = false WHERE id = 16;
SELECT * FROM check_all();
-- publish, soft delete, move, rate, change author, hard delete: all in a few statements
UPDATE posts SET is_published = true WHERE id = 16;
UPDATE posts SET is_deleted = true WHERE id = 12;
UPDATE posts SET blog_id = 4, rating = 2 WHERE id = 13;
UPDATE posts SET user_id = 1 WHERE blog_id = 4;
DELETE FROM posts WHERE id = 3;
SELECT * FROM check_all();
-- a title change touches no counted column
UPDATE blogs SET title = 'bouldering' WHERE id = 4;
UPDATE posts SET title = upper(title);
SELECT * FROM check_all();
-- deleting a blog deletes its posts (ON DELETE CASCADE): the other counters follow, the blog row is gone
DELETE FROM blogs WHERE id = 3;
SELECT * FROM check_all();
-- everything at once
INSERT INTO posts (id, blog_id, user_id, title, rating, is_published, is_deleted)
SELECT 100 + i, 1 + i % 4 + CASE WHEN i % 4 = 2 THEN 1 ELSE 0 END, 1 + i % 3, 'bulk ' || i, nullif(i % 6, 0), i % 5 <> 0, i % 7 = 0
  FROM generate_series(1, 40) i;
UPDATE posts SET blog_id = 1 WHERE id % 9 = 0;
UPDATE posts SET is_deleted = NOT is_deleted WHERE id % 11 = 0;
DELETE FROM posts WHERE id % 13 = 0;
SELECT id, title, post_count, rating_sum FROM blogs ORDER BY id;
SELECT * FROM check_all();

-- clean up: drop_counter leaves blogs and its columns in place
SELECT counters.drop_counter('blog_cache');
SELECT counters.drop_counter('user_blog_posts');
SELECT counters.drop_counter('posts_per_blog');
SELECT count(*) AS catalog_rows FROM counters.counter;
SELECT count(*) AS blogs FROM blogs;
SET client_min_messages = warning;
DROP SCHEMA seed_test CASCADE;
RESET client_min_messages;
RESET search_path;
