--
-- parent_join: counters through a parent row (seed 1: "comments of published posts per blog"). The definition joins
-- the counted table to its parent on a unique key; a row counts with its parent's columns, and a parent's change
-- moves its children's contributions. After every step each counter is compared with the same query run over the
-- tables (check_all: no row means equal).
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA join_test;
SET search_path = join_test, regress;

CREATE TABLE posts (id int PRIMARY KEY, blog_id int NOT NULL, author int NOT NULL, published boolean NOT NULL DEFAULT true);
CREATE TABLE comments (id serial PRIMARY KEY, post_id int REFERENCES posts ON DELETE CASCADE ON UPDATE CASCADE,
                       score int NOT NULL DEFAULT 1);
CREATE INDEX ON comments (post_id);
INSERT INTO posts SELECT g, g % 3, g % 4, g % 2 = 0 FROM generate_series(1, 12) g;
INSERT INTO comments (post_id, score) SELECT 1 + g % 12, g % 5 FROM generate_series(1, 200) g;

-- Parent columns in the key, the WHERE clause, a FILTER and a sum; one counter per mode.
SELECT counters.create_counter('blog_comments', $$
	SELECT p.blog_id, count(*) AS comments, sum(c.score) AS score FROM comments c JOIN posts p ON c.post_id = p.id
	 WHERE p.published GROUP BY p.blog_id$$);
SELECT counters.create_counter('author_comments', $$
	SELECT p.author, count(*) FILTER (WHERE p.published) AS published, sum(c.score + p.blog_id) AS weighted
	  FROM posts p JOIN comments c ON p.id = c.post_id GROUP BY p.author$$, mode => 'log');
SELECT counters.create_counter('post_comments', $$
	SELECT c.post_id, p.blog_id, count(*) AS comments FROM comments c JOIN posts p ON c.post_id = p.id
	 GROUP BY c.post_id, p.blog_id$$, mode => 'sharded');
CREATE VIEW blog_comments_expected AS
	SELECT p.blog_id, count(*) AS comments, sum(c.score) AS score FROM comments c JOIN posts p ON c.post_id = p.id
	 WHERE p.published GROUP BY p.blog_id;
CREATE VIEW author_comments_expected AS
	SELECT p.author, count(*) FILTER (WHERE p.published) AS published, sum(c.score + p.blog_id) AS weighted
	  FROM posts p JOIN comments c ON p.id = c.post_id GROUP BY p.author;
CREATE VIEW post_comments_expected AS
	SELECT c.post_id, p.blog_id, count(*) AS comments FROM comments c JOIN posts p ON c.post_id = p.id
	 GROUP BY c.post_id, p.blog_id;
CREATE TABLE checks (counter text, expected text);
INSERT INTO checks VALUES ('blog_comments', 'blog_comments_expected'), ('author_comments', 'author_comments_expected'),
                          ('post_comments', 'post_comments_expected');
SELECT * FROM check_all();
SELECT tgname FROM pg_trigger WHERE tgrelid = 'posts'::regclass AND NOT tgisinternal ORDER BY 1;

-- Writes to the counted table read the parent row.
INSERT INTO comments (post_id, score) VALUES (2, 10), (3, 10), (4, 1), (NULL, 5);
UPDATE comments SET post_id = 6 WHERE post_id = 4;
UPDATE comments SET score = score + 1 WHERE id % 7 = 0;
DELETE FROM comments WHERE id % 11 = 0;
SELECT * FROM check_all();
-- A parent's change moves its children: a flag flip, a new blog, a change of a column no counter reads.
UPDATE posts SET published = NOT published WHERE id IN (1, 2);
UPDATE posts SET blog_id = 7 WHERE id = 5;
UPDATE posts SET author = author WHERE id = 3;
SELECT * FROM check_all();
-- A BEFORE ROW trigger of the parent's own that changes a counted column: whatever its name (it fires after any
-- trigger whose name sorts before it), the row as finally written counts.
CREATE FUNCTION publish_blog_9() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.blog_id = 9 THEN NEW.published := true; END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER zzzz_publish BEFORE UPDATE ON posts FOR EACH ROW EXECUTE FUNCTION publish_blog_9();
UPDATE posts SET blog_id = 9, published = false WHERE id IN (3, 5);
SELECT * FROM check_all();
DROP TRIGGER zzzz_publish ON posts;
-- Foreign-key actions: a cascaded delete, a cascaded key change.
DELETE FROM posts WHERE id = 6;
UPDATE posts SET id = 100 WHERE id = 8;
SELECT * FROM check_all();
-- One statement writing both tables, in either order (writable CTEs), and moving children between changed parents.
WITH u AS (UPDATE posts SET published = NOT published WHERE id = 10 RETURNING id)
INSERT INTO comments (post_id) SELECT id FROM u;
WITH i AS (INSERT INTO comments (post_id, score) VALUES (2, 7) RETURNING id)
UPDATE posts SET published = NOT published WHERE id = 2;
WITH d AS (DELETE FROM comments WHERE post_id = 12 RETURNING id) UPDATE posts SET blog_id = 5 WHERE id = 12;
WITH p AS (INSERT INTO posts VALUES (77, 2, 1, true) RETURNING id) INSERT INTO comments (post_id) SELECT id FROM p;
WITH m AS (UPDATE comments SET post_id = 3 WHERE post_id = 5 RETURNING id)
UPDATE posts SET published = NOT published WHERE id IN (3, 5);
SELECT * FROM check_all();
-- Rolled back: a transaction, a savepoint, a failing statement after the counters ran.
BEGIN;
UPDATE posts SET published = true;
DELETE FROM comments WHERE id % 3 = 0;
ROLLBACK;
BEGIN;
SAVEPOINT s;
UPDATE posts SET blog_id = blog_id + 10;
ROLLBACK TO SAVEPOINT s;
UPDATE posts SET published = NOT published WHERE id = 7;
COMMIT;
UPDATE posts SET blog_id = 1 / (id - 9) WHERE id IN (3, 9);
SELECT * FROM check_all();
-- Many rows of both tables, in one transaction.
BEGIN;
INSERT INTO posts SELECT g, g % 5, g % 3, g % 3 > 0 FROM generate_series(200, 260) g;
INSERT INTO comments (post_id, score) SELECT 200 + g % 61, g % 4 FROM generate_series(1, 2000) g;
UPDATE posts SET published = NOT published WHERE id % 4 = 0;
UPDATE comments SET post_id = 200 + (id % 7) WHERE id % 9 = 0 AND post_id >= 200;
DELETE FROM posts WHERE id BETWEEN 250 AND 255;
COMMIT;
SELECT * FROM check_all();
SELECT count(*) AS verify_rows FROM counters.verify();
SELECT counters.compact();
SELECT * FROM check_all();
-- The parent's writes read its children through the child key's index; without one, through a statement: the same
-- writes, both ways.
DROP INDEX comments_post_id_idx;
UPDATE posts SET published = NOT published WHERE id IN (1, 2, 201);
UPDATE posts SET blog_id = blog_id + 1 WHERE id IN (3, 202);
UPDATE posts SET id = 300 WHERE id = 203;
DELETE FROM posts WHERE id = 204;
WITH p AS (INSERT INTO posts VALUES (78, 1, 1, true) RETURNING id) INSERT INTO comments (post_id) SELECT id FROM p;
SELECT * FROM check_all();
CREATE INDEX ON comments (post_id);

-- Without a foreign key: children may come before their parent, and stay after it.
CREATE TABLE teams (id bigint PRIMARY KEY, league text NOT NULL);
CREATE TABLE players (id serial PRIMARY KEY, team_id bigint, goals int NOT NULL DEFAULT 0);
CREATE INDEX ON players (team_id);
SELECT counters.create_counter('league_goals', $$
	SELECT t.league, count(*) AS players, sum(pl.goals) AS goals FROM players pl JOIN teams t ON pl.team_id = t.id
	 GROUP BY t.league$$);
CREATE VIEW league_goals_expected AS
	SELECT t.league, count(*) AS players, sum(pl.goals) AS goals FROM players pl JOIN teams t ON pl.team_id = t.id
	 GROUP BY t.league;
INSERT INTO checks VALUES ('league_goals', 'league_goals_expected');
INSERT INTO players (team_id, goals) VALUES (1, 3), (1, 2), (2, 5), (3, 1);
SELECT * FROM check_all();
INSERT INTO teams VALUES (1, 'north'), (2, 'south');
SELECT * FROM check_all();
UPDATE teams SET id = 3 WHERE id = 2;
DELETE FROM teams WHERE id = 1;
SELECT * FROM check_all();
TRUNCATE teams;
SELECT * FROM check_all();
INSERT INTO teams VALUES (1, 'east'), (3, 'west');
TRUNCATE players;
SELECT * FROM check_all();
-- rebuild() and verify() read the definition (the join).
INSERT INTO players (team_id, goals) SELECT 1 + g % 3, g FROM generate_series(1, 30) g;
UPDATE league_goals SET goals = goals + 100;
SELECT count(*) AS verify_rows FROM counters.verify('league_goals');
SELECT counters.rebuild('league_goals');
SELECT * FROM check_all();

-- What is refused, with what to do.
CREATE TABLE tags (id int PRIMARY KEY, name text NOT NULL, code text UNIQUE);
CREATE TABLE post_tags (post_id int NOT NULL, tag_id int NOT NULL, tag_code text);
SELECT counters.create_counter('tag_posts', 'SELECT t.name, count(*) AS n FROM post_tags pt JOIN tags t ON pt.tag_id = t.id GROUP BY t.name');
CREATE INDEX ON post_tags (tag_id);
SELECT counters.create_counter('tag_posts', 'SELECT t.name, count(*) AS n FROM post_tags pt LEFT JOIN tags t ON pt.tag_id = t.id GROUP BY t.name');
SELECT counters.create_counter('tag_posts', 'SELECT t.name, count(*) AS n FROM post_tags pt JOIN tags t ON pt.tag_code = t.code GROUP BY t.name');
SELECT counters.create_counter('tag_posts', 'SELECT t.name, count(*) AS n FROM post_tags pt JOIN tags t ON pt.tag_id = t.id AND t.name <> '''' GROUP BY t.name');
SELECT counters.create_counter('tag_posts', 'SELECT t.name, count(*) AS n FROM post_tags pt JOIN tags t ON pt.tag_id = t.id OR pt.post_id = t.id GROUP BY t.name');
SELECT counters.create_counter('tag_posts', 'SELECT t.name, count(*) AS n FROM post_tags pt JOIN tags t ON pt.post_id = t.id GROUP BY t.name');
SELECT counters.create_counter('tag_posts', 'SELECT p.blog_id, count(*) AS n FROM post_tags pt JOIN posts p ON pt.tag_id = p.author GROUP BY p.blog_id');
SELECT counters.create_counter('tag_posts', 'SELECT t.name, count(*) AS n FROM post_tags pt JOIN tags t ON pt.post_id = t.id JOIN posts p ON pt.post_id = p.id GROUP BY t.name');
SELECT counters.create_counter('tag_names', 'SELECT pt.tag_id, count(*) AS n FROM post_tags pt JOIN post_tags p2 ON pt.tag_id = p2.post_id GROUP BY pt.tag_id');
-- (an aggregate no kind keeps, over a parent's column: the hint's recipe names its argument "x")
SELECT counters.create_counter('tag_posts', 'SELECT t.name, count(DISTINCT t.code) AS n FROM post_tags pt JOIN tags t ON pt.tag_id = t.id GROUP BY t.name');
SET ROLE NONE;
CREATE ROLE join_other;
GRANT USAGE ON SCHEMA join_test TO join_other;
CREATE TABLE join_test.their_tags (id int PRIMARY KEY, name text);
ALTER TABLE join_test.their_tags OWNER TO join_other;
SET ROLE counters_app;
SELECT counters.create_counter('tag_posts', 'SELECT t.name, count(*) AS n FROM post_tags pt JOIN their_tags t ON pt.tag_id = t.id GROUP BY t.name');
-- A joined parent cannot get inheritance children or become a partition or a child (a write through it would not
-- fire its triggers): refused, as for the counted table, and writes to the counted table go on.
CREATE TABLE old_posts () INHERITS (posts);
CREATE TABLE posts_archive (LIKE posts);
ALTER TABLE posts_archive INHERIT posts;
CREATE TABLE posts_by_id (LIKE posts) PARTITION BY RANGE (id);
ALTER TABLE posts_by_id ATTACH PARTITION posts FOR VALUES FROM (0) TO (1000000);
CREATE TABLE all_posts (LIKE posts);
ALTER TABLE posts INHERIT all_posts;
DROP TABLE posts_archive, posts_by_id, all_posts;
INSERT INTO comments (post_id) VALUES (1);
SELECT * FROM check_all();

-- A parent's column changes type: the counters that read it are declared again in the new type, and recounted.
DROP VIEW author_comments_expected;
ALTER TABLE posts ALTER COLUMN author TYPE bigint;
CREATE VIEW author_comments_expected AS
	SELECT p.author, count(*) FILTER (WHERE p.published) AS published, sum(c.score + p.blog_id) AS weighted
	  FROM posts p JOIN comments c ON p.id = c.post_id GROUP BY p.author;
SELECT name, mode FROM counters.counter WHERE name = 'author_comments';
SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'author_comments_totals'::regclass AND attname = 'author';
UPDATE posts SET author = author + 10 WHERE id % 3 = 0;
INSERT INTO comments (post_id) SELECT id FROM posts ORDER BY id LIMIT 2;
SELECT * FROM check_all();

-- Dropping the last counter joined to a parent removes the parent's triggers.
SELECT counters.drop_counter('blog_comments');
SELECT counters.drop_counter('author_comments');
SELECT tgname FROM pg_trigger WHERE tgrelid = 'posts'::regclass AND NOT tgisinternal ORDER BY 1;
SELECT counters.drop_counter('post_comments');
SELECT tgname FROM pg_trigger WHERE tgrelid = 'posts'::regclass AND NOT tgisinternal ORDER BY 1;

SET ROLE NONE;
DROP SCHEMA join_test CASCADE;
DROP ROLE join_other;
SET ROLE counters_app;
