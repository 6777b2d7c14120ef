--
-- dml: every way of writing the source keeps the counters exact. After every step each counter table is compared
-- with a recomputation written out here as a plain GROUP BY over the source (both directions with EXCEPT; groups
-- whose values are all zero are left out of the recomputation, since an absent counter row means zeros). Every check
-- must list no differing rows.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA dml_test;
SET search_path = dml_test, regress;

CREATE TABLE checks (counter regclass PRIMARY KEY, expected regclass NOT NULL);

CREATE TABLE blogs (id int PRIMARY KEY);
INSERT INTO blogs SELECT generate_series(1, 6);
CREATE TABLE posts (
	id           int PRIMARY KEY,
	user_id      int NOT NULL,
	blog_id      int NOT NULL REFERENCES blogs ON DELETE CASCADE ON UPDATE CASCADE,
	rating       int,
	amount       numeric,
	big          bigint,
	is_published boolean NOT NULL DEFAULT true,
	is_deleted   boolean NOT NULL DEFAULT false,
	tag          text,
	title        text
);
INSERT INTO posts (id, user_id, blog_id, rating, amount, big, is_published, is_deleted, tag, title)
SELECT i, i % 3, 1 + i % 4, nullif(i % 5, 0), i * 1.25, i * 1000, i % 4 <> 0, i % 9 = 0,
       CASE i % 3 WHEN 0 THEN 'Red' WHEN 1 THEN 'red' ELSE NULL END, 'post ' || i
  FROM generate_series(1, 30) i;

SELECT counters.create_counter('per_blog', $$
	SELECT blog_id, count(*) AS posts, count(rating) AS rated, sum(rating) AS rating_sum
	  FROM posts WHERE NOT is_deleted GROUP BY blog_id
$$);
SELECT counters.create_counter('per_user_blog', $$
	SELECT user_id, blog_id, count(*) FILTER (WHERE is_published) AS published, sum(amount) AS amount
	  FROM posts GROUP BY user_id, blog_id
$$);
SELECT counters.create_counter('per_tag', $$
	SELECT lower(tag) AS tag, count(*) AS posts, sum(big) AS big_sum FROM posts GROUP BY lower(tag)
$$);
CREATE VIEW expect_per_blog AS
	SELECT blog_id, count(*) AS posts, count(rating) AS rated, coalesce(sum(rating), 0) AS rating_sum
	  FROM posts WHERE NOT is_deleted GROUP BY blog_id;
CREATE VIEW expect_per_user_blog AS
	SELECT user_id, blog_id, count(*) FILTER (WHERE is_published) AS published, coalesce(sum(amount), 0) AS amount
	  FROM posts GROUP BY user_id, blog_id
	HAVING count(*) FILTER (WHERE is_published) <> 0 OR coalesce(sum(amount), 0) <> 0;
CREATE VIEW expect_per_tag AS
	SELECT lower(tag) AS tag, count(*) AS posts, coalesce(sum(big), 0) AS big_sum FROM posts GROUP BY lower(tag);
INSERT INTO checks VALUES ('per_blog', 'expect_per_blog'), ('per_user_blog', 'expect_per_user_blog'),
                          ('per_tag', 'expect_per_tag');
-- initial fill
SELECT (SELECT count(*) FROM per_blog) AS per_blog_rows, (SELECT count(*) FROM per_user_blog) AS per_user_blog_rows,
       (SELECT count(*) FROM per_tag) AS per_tag_rows;
SELECT * FROM check_all();

-- single-row INSERT
INSERT INTO posts VALUES (100, 1, 1, 4, 2.5, 7, true, false, 'Blue', 'single');
SELECT * FROM check_all();
-- multi-row INSERT, with NULLs in counted columns and new keys
INSERT INTO posts VALUES
	(101, 1, 5, NULL, NULL, NULL, true, false, 'BLUE', 'multi'),
	(102, 2, 5, 3, 0.001, -5, false, false, NULL, 'multi'),
	(103, 7, 6, 5, -10, 0, true, true, 'green', 'multi'),
	(104, 7, 6, 1, 10, 9, true, false, 'Green', 'multi');
SELECT * FROM check_all();

-- UPDATE moving rows between keys
UPDATE posts SET blog_id = 2 WHERE blog_id = 1 AND id % 2 = 0;
SELECT * FROM check_all();
UPDATE posts SET user_id = user_id + 1, tag = upper(tag) WHERE id % 3 = 1;   -- upper(): same lower() key
SELECT * FROM check_all();
UPDATE posts SET blog_id = CASE blog_id WHEN 3 THEN 4 ELSE 3 END WHERE blog_id IN (3, 4);   -- swap two keys
SELECT * FROM check_all();
UPDATE posts SET is_deleted = NOT is_deleted, is_published = NOT is_published WHERE id % 5 = 2;
SELECT * FROM check_all();
UPDATE posts SET id = id + 1000 WHERE id < 5;   -- a column no counter reads, but not the same row
SELECT * FROM check_all();
-- UPDATE of columns no counter reads, and of counted columns to the values they have
UPDATE posts SET title = 'retitled';
UPDATE posts SET blog_id = blog_id, rating = rating;
SELECT * FROM check_all();

-- DELETE
DELETE FROM posts WHERE id % 7 = 3;
SELECT * FROM check_all();

-- COPY FROM STDIN
COPY posts (id, user_id, blog_id, rating, amount, big, is_published, is_deleted, tag, title) FROM STDIN;
200	1	1	5	1.5	100	t	f	copy	copied
201	1	1	\N	\N	\N	f	f	COPY	copied
202	9	6	2	-0.5	-100	t	t	\N	copied
\.
SELECT * FROM check_all();

-- INSERT ... SELECT
INSERT INTO posts (id, user_id, blog_id, rating, amount, big, is_published, is_deleted, tag, title)
SELECT 300 + i, i % 5, 1 + i % 6, i % 6, i / 3.0, i * i, i % 3 <> 0, i % 11 = 0, 'bulk' || (i % 4), 'bulk'
  FROM generate_series(1, 300) i;
SELECT * FROM check_all();
INSERT INTO posts SELECT id + 10000, user_id, blog_id, rating, amount, big, is_published, is_deleted, tag, title
  FROM posts WHERE blog_id = 2;   -- from the source itself
SELECT * FROM check_all();

-- INSERT ... ON CONFLICT DO UPDATE: updates two existing rows (moving them), inserts a new one
INSERT INTO posts VALUES (100, 1, 1, 4, 2.5, 7, true, false, 'Blue', 'upsert'),
                         (101, 2, 6, 2, 1, 1, true, false, 'blue', 'upsert'),
                         (105, 3, 3, 5, 5, 5, true, false, 'red', 'upsert')
ON CONFLICT (id) DO UPDATE SET blog_id = EXCLUDED.blog_id + 1, rating = EXCLUDED.rating, amount = EXCLUDED.amount,
                               big = posts.big + EXCLUDED.big, tag = EXCLUDED.tag;
SELECT * FROM check_all();
-- ... DO UPDATE of a column no counter reads, and DO NOTHING
INSERT INTO posts VALUES (100, 1, 1, 1, 1, 1, true, false, 'x', 'x'), (106, 1, 1, 1, 1, 1, true, false, 'x', 'x')
ON CONFLICT (id) DO UPDATE SET title = 'conflict';
INSERT INTO posts VALUES (100, 1, 1, 1, 1, 1, true, false, 'x', 'x'), (107, 1, 1, 1, 1, 1, true, false, 'x', 'x')
ON CONFLICT DO NOTHING;
SELECT * FROM check_all();

-- MERGE: delete, update (moving), insert in one statement
MERGE INTO posts p
USING (VALUES (100, 5, 1, false), (101, 2, 3, false), (102, 0, 0, true), (108, 4, 2, false)) s(id, blog_id, rating, del)
   ON p.id = s.id
 WHEN MATCHED AND s.del THEN DELETE
 WHEN MATCHED THEN UPDATE SET blog_id = s.blog_id, rating = s.rating, tag = 'merged'
 WHEN NOT MATCHED THEN INSERT (id, user_id, blog_id, rating, amount, big, tag) VALUES (s.id, 8, s.blog_id, s.rating, 0.5, 50, 'merged');
SELECT * FROM check_all();

-- Data-modifying CTEs: the source written by several parts of one statement
WITH moved AS (DELETE FROM posts WHERE id BETWEEN 300 AND 320 RETURNING *)
INSERT INTO posts SELECT id + 20000, user_id, 6, rating, amount, big, is_published, is_deleted, 'moved', title FROM moved;
SELECT * FROM check_all();
WITH ins AS (INSERT INTO posts VALUES (109, 1, 1, 3, 3, 3, true, false, 'cte', 'cte') RETURNING id)
UPDATE posts SET rating = 1, blog_id = 2 WHERE id IN (301 + 20000, 302 + 20000);
SELECT * FROM check_all();

-- ON DELETE CASCADE and ON UPDATE CASCADE from blogs into the source
DELETE FROM blogs WHERE id = 4;
SELECT * FROM check_all();
UPDATE blogs SET id = 40 WHERE id = 5;
SELECT * FROM check_all();

-- rollback
BEGIN;
INSERT INTO posts VALUES (110, 1, 1, 5, 5, 5, true, false, 'rolled back', 'rb');
UPDATE posts SET blog_id = 3 WHERE blog_id = 2;
DELETE FROM posts WHERE user_id = 0;
SELECT * FROM check_all();
ROLLBACK;
SELECT * FROM check_all();

-- savepoint rollback
BEGIN;
INSERT INTO posts VALUES (111, 1, 1, 5, 5, 5, true, false, 'kept', 'sp');
SAVEPOINT s;
UPDATE posts SET blog_id = 1 WHERE blog_id = 6;
DELETE FROM posts WHERE tag = 'kept';
SELECT * FROM check_all();
ROLLBACK TO SAVEPOINT s;
SELECT * FROM check_all();
UPDATE posts SET rating = 2 WHERE id = 111;
COMMIT;
SELECT * FROM check_all();

-- an error in the middle of a statement
INSERT INTO posts VALUES (112, 1, 1, 1, 1, 1, true, false, 'err', 'err'), (100, 1, 1, 1, 1, 1, true, false, 'err', 'err');
SELECT * FROM check_all();
UPDATE posts SET blog_id = 1, rating = 10 / (id - 200) WHERE id BETWEEN 199 AND 201;
SELECT * FROM check_all();
-- an error after the counters were applied (another AFTER STATEMENT trigger, firing after counters_*)
CREATE FUNCTION fail_on_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT FROM new_rows WHERE title = 'poison') THEN
		RAISE EXCEPTION 'poisoned statement';
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER zz_fail_on_poison AFTER INSERT ON posts REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION fail_on_poison();
INSERT INTO posts VALUES (113, 1, 1, 1, 1, 1, true, false, 'poison', 'poison');
SELECT * FROM check_all();
DROP TRIGGER zz_fail_on_poison ON posts;
-- an error inside a savepoint, the transaction goes on
BEGIN;
SAVEPOINT s;
UPDATE posts SET blog_id = 99 WHERE id = 100;   -- no blog 99
ROLLBACK TO SAVEPOINT s;
UPDATE posts SET blog_id = 2 WHERE id = 100;
COMMIT;
SELECT * FROM check_all();

-- a BEFORE UPDATE row trigger changes counted columns the UPDATE does not name
CREATE FUNCTION move_flagged() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.blog_id := 2;
	NEW.tag := 'moved by trigger';
	NEW.rating := coalesce(NEW.rating, 0) + 1;
	RETURN NEW;
END $$;
CREATE TRIGGER move_flagged BEFORE UPDATE ON posts FOR EACH ROW WHEN (NEW.title = 'move me')
	EXECUTE FUNCTION move_flagged();
UPDATE posts SET title = 'move me' WHERE id IN (105, 106, 200, 201);
SELECT * FROM check_all();
DROP TRIGGER move_flagged ON posts;

-- NULL values in sum() and count(x): from NULL to a value and back
UPDATE posts SET rating = NULL, amount = NULL, big = NULL WHERE id % 4 = 0;
SELECT * FROM check_all();
UPDATE posts SET rating = 3, amount = 0.3, big = 3 WHERE rating IS NULL AND id % 8 = 0;
SELECT * FROM check_all();

-- numeric sums: signs, scales, tiny and huge values
UPDATE posts SET amount = amount * -1.0001 WHERE id % 3 = 0;
INSERT INTO posts VALUES (114, 1, 1, 1, 0.00000000000000000001, 1, true, false, 'num', 'num'),
                         (115, 1, 1, 1, 123456789012345678901234567890.5, 1, true, false, 'num', 'num');
SELECT * FROM check_all();
UPDATE posts SET amount = amount / 7 WHERE tag = 'num';
SELECT * FROM check_all();
DELETE FROM posts WHERE tag = 'num';
SELECT * FROM check_all();

-- bigint sums: a statement that would overflow a stored sum fails and changes nothing
INSERT INTO posts VALUES (118, 1, 1, 1, 1, 9223372036854775000, true, false, 'huge', 'huge');
SELECT * FROM check_all();
INSERT INTO posts VALUES (119, 1, 2, 1, 1, 9223372036854775000, true, false, 'huge', 'huge');
\echo SQLSTATE :SQLSTATE
SELECT * FROM check_all();
-- ... or whose own delta overflows
INSERT INTO posts VALUES (119, 1, 2, 1, 1, 9223372036854775807, true, false, 'HUGE2', 'huge'),
                         (120, 1, 2, 1, 1, 9223372036854775807, true, false, 'huge2', 'huge');
\echo SQLSTATE :SQLSTATE
SELECT * FROM check_all();
INSERT INTO posts VALUES (119, 1, 2, 1, 1, -9223372036854775808, true, false, 'huge3', 'huge'),
                         (120, 1, 2, 1, 1, -1, true, false, 'huge3', 'huge');
\echo SQLSTATE :SQLSTATE
SELECT * FROM check_all();
-- a statement whose rows sum to a value in range is fine, whatever the order of its rows
INSERT INTO posts VALUES (119, 1, 2, 1, 1, 9223372036854775807, true, false, 'huge4', 'huge'),
                         (120, 1, 2, 1, 1, 9223372036854775807, true, false, 'huge4', 'huge'),
                         (121, 1, 2, 1, 1, -9223372036854775807, true, false, 'huge4', 'huge');
SELECT * FROM check_all();
-- a row holding the smallest bigint moves to another key and goes away again
INSERT INTO posts VALUES (122, 1, 2, 1, 1, -9223372036854775808, true, false, 'min', 'huge');
SELECT * FROM check_all();
UPDATE posts SET tag = 'min2' WHERE id = 122;
SELECT * FROM check_all();
DELETE FROM posts WHERE title = 'huge';
SELECT * FROM check_all();

-- TRUNCATE, rolled back
BEGIN;
TRUNCATE posts;
SELECT * FROM check_all();
ROLLBACK;
SELECT * FROM check_all();

-- Data-modifying CTEs: two UPDATEs of the source in one statement, each setting different columns
WITH a AS (UPDATE posts SET tag = 'cte a' WHERE id = 109 RETURNING 1),
     b AS (UPDATE posts SET title = 'cte b' WHERE id = 105 RETURNING 1)
SELECT (SELECT count(*) FROM a) AS a, (SELECT count(*) FROM b) AS b;
SELECT * FROM check_all();
WITH a AS (UPDATE posts SET title = 'cte a' WHERE id = 105 RETURNING 1)
UPDATE posts SET tag = 'cte main', blog_id = 1 WHERE id = 109;
SELECT * FROM check_all();

-- NaN and Infinity cannot be subtracted back out of a sum (Infinity - Infinity is NaN): a counted sum refuses them,
-- and nothing of the statement is applied
INSERT INTO posts VALUES (116, 1, 1, 1, 'NaN', 1, true, false, 'nan', 'nan');
INSERT INTO posts VALUES (117, 2, 1, 1, 'Infinity', 1, true, false, 'inf', 'inf');
SELECT count(*) AS refused_rows FROM posts WHERE tag IN ('nan', 'inf');
SELECT * FROM check_all();
DELETE FROM posts WHERE tag IN ('nan', 'inf');
SELECT * FROM check_all();

-- TRUNCATE for real (directly and through TRUNCATE ... CASCADE), then refilled
TRUNCATE posts;
SELECT (SELECT count(*) FROM per_blog) + (SELECT count(*) FROM per_user_blog) + (SELECT count(*) FROM per_tag) AS counter_rows;
SELECT * FROM check_all();
INSERT INTO posts (id, user_id, blog_id, rating, amount, big, tag)
SELECT i, i % 3, 1 + i % 3, i % 4, i, i, 't' || (i % 2) FROM generate_series(1, 20) i;
SELECT * FROM check_all();
TRUNCATE blogs CASCADE;
SELECT * FROM check_all();

-- a key with a nondeterministic collation: keys equal under the collation are one group
CREATE COLLATION case_insensitive (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE labels (id int PRIMARY KEY, label text COLLATE case_insensitive NOT NULL);
INSERT INTO labels VALUES (1, 'Alpha'), (2, 'beta');
SELECT counters.create_counter('per_label', 'SELECT label, count(*) AS n FROM labels GROUP BY label');
CREATE VIEW expect_per_label AS SELECT label, count(*) AS n FROM labels GROUP BY label;
INSERT INTO checks VALUES ('per_label', 'expect_per_label');
INSERT INTO labels VALUES (3, 'ALPHA'), (4, 'Beta');
SELECT * FROM check_all();
DELETE FROM labels WHERE id = 1;
SELECT * FROM check_all();

--
-- A partitioned source: rows written through the parent or a partition, moved between partitions, partitions
-- truncated. m_us has another column order and a dropped column, and was attached (with rows) before declaring.
--
CREATE TABLE measurements (id int NOT NULL, region text NOT NULL, kind text NOT NULL, value int, note text)
	PARTITION BY LIST (region);
CREATE TABLE m_eu PARTITION OF measurements FOR VALUES IN ('eu');
CREATE TABLE m_us (note text, dropped int, value int, kind text NOT NULL, id int NOT NULL, region text NOT NULL);
ALTER TABLE m_us DROP COLUMN dropped;
INSERT INTO m_us (id, region, kind, value, note) VALUES (1, 'us', 'temp', 20, NULL), (2, 'us', 'rain', 5, 'x');
ALTER TABLE measurements ATTACH PARTITION m_us FOR VALUES IN ('us');
CREATE TABLE m_other PARTITION OF measurements DEFAULT;
INSERT INTO measurements VALUES (3, 'eu', 'temp', 15, NULL), (4, 'asia', 'temp', 30, 'ignore'), (5, 'eu', 'rain', NULL, NULL);
SELECT counters.create_counter('by_kind', $$
	SELECT kind, count(*) AS n, sum(value) AS total FROM measurements GROUP BY kind
$$);
SELECT counters.create_counter('by_region_kind', $$
	SELECT region, kind, count(*) AS n, count(value) AS with_value
	  FROM measurements WHERE note IS DISTINCT FROM 'ignore' GROUP BY region, kind
$$);
CREATE VIEW expect_by_kind AS
	SELECT kind, count(*) AS n, coalesce(sum(value), 0) AS total FROM measurements GROUP BY kind;
CREATE VIEW expect_by_region_kind AS
	SELECT region, kind, count(*) AS n, count(value) AS with_value
	  FROM measurements WHERE note IS DISTINCT FROM 'ignore' GROUP BY region, kind;
INSERT INTO checks VALUES ('by_kind', 'expect_by_kind'), ('by_region_kind', 'expect_by_region_kind');
SELECT * FROM check_all();
SELECT tgrelid::regclass AS relation, count(*) AS capture_triggers FROM pg_trigger
 WHERE tgfoid = 'counters.capture()'::regprocedure AND tgrelid::regclass::text LIKE 'm%' GROUP BY 1 ORDER BY 1;
-- INSERT through the parent, into every partition
INSERT INTO measurements SELECT 100 + i, (ARRAY['eu', 'us', 'asia'])[1 + i % 3], (ARRAY['temp', 'rain', 'wind', 'snow'])[1 + i % 4],
                                nullif(i % 7, 0), CASE WHEN i % 10 = 0 THEN 'ignore' END
  FROM generate_series(1, 60) i;
SELECT * FROM check_all();
-- INSERT directly into partitions (m_us in its own column order)
INSERT INTO m_us VALUES (NULL, 7, 'wind', 200, 'us'), ('ignore', 8, 'wind', 201, 'us');
INSERT INTO m_eu VALUES (202, 'eu', 'snow', -3, NULL);
INSERT INTO m_other VALUES (203, 'moon', 'dust', 1, NULL);
SELECT * FROM check_all();
-- COPY through the parent
COPY measurements (id, region, kind, value, note) FROM STDIN;
300	us	hail	4	\N
301	eu	hail	\N	\N
302	mars	hail	9	ignore
\.
SELECT * FROM check_all();
-- UPDATE through the parent moving rows between partitions
UPDATE measurements SET region = 'us' WHERE region = 'eu' AND id % 2 = 0;
UPDATE measurements SET region = CASE region WHEN 'us' THEN 'asia' ELSE 'eu' END, kind = 'moved' WHERE id % 5 = 1;
SELECT * FROM check_all();
-- UPDATE directly in a partition, and through the parent without moving
UPDATE m_us SET kind = 'renamed', value = value * 2 WHERE id % 3 = 0;
UPDATE m_eu SET note = 'ignore' WHERE kind = 'temp';
UPDATE measurements SET value = NULL WHERE kind = 'wind';
SELECT * FROM check_all();
-- MERGE into the parent
MERGE INTO measurements m USING (VALUES (7, 'eu', 'merged', 1), (400, 'us', 'merged', 2)) s(id, region, kind, value)
   ON m.id = s.id
 WHEN MATCHED THEN UPDATE SET region = s.region, kind = s.kind
 WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.region, s.kind, s.value, NULL);
SELECT * FROM check_all();
-- DELETE directly from a partition and through the parent
DELETE FROM m_us WHERE id % 4 = 0;
DELETE FROM measurements WHERE kind = 'snow';
SELECT * FROM check_all();
-- TRUNCATE of one partition (rolled back, then for real)
BEGIN;
TRUNCATE m_us;
SELECT * FROM check_all();
ROLLBACK;
SELECT * FROM check_all();
TRUNCATE m_us;
SELECT * FROM check_all();
TRUNCATE m_eu, m_other;
SELECT * FROM check_all();
-- TRUNCATE of the parent
INSERT INTO measurements SELECT i, (ARRAY['eu', 'us', 'asia'])[1 + i % 3], 'k' || (i % 2), i, NULL FROM generate_series(1, 12) i;
SELECT * FROM check_all();
TRUNCATE measurements;
SELECT (SELECT count(*) FROM by_kind) + (SELECT count(*) FROM by_region_kind) AS counter_rows;
SELECT * FROM check_all();

-- clean up
SELECT counters.drop_counter(name) FROM counters.counter ORDER BY name;
SELECT count(*) AS catalog_rows FROM counters.counter;
SET client_min_messages = warning;
DROP SCHEMA dml_test CASCADE;
RESET client_min_messages;
RESET search_path;
