--
-- lifecycle: how counters live through schema changes. Renaming the source, its columns (keys, values, WHERE and
-- FILTER columns), the counter table and its schema; dropping or retyping a column a counter reads (refused, or the
-- whole counter goes with CASCADE) and one it does not read (nothing happens); DROP TABLE of the source, of the
-- counter table and of the definition view; disabled triggers and session_replication_role = replica (drift that
-- verify reports key by key and rebuild repairs); row-level security on the source; DROP EXTENSION ... CASCADE and
-- CREATE EXTENSION again; renaming the columns of a partitioned source. After every step each counter is compared
-- with a recount written out in this test and with counters.verify(), and the catalog rows, triggers and relations
-- are listed so that leftovers would show.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA lifecycle_test;
SET search_path = lifecycle_test;

-- What each counter should hold, as two queries kept as text (a view would depend on the source's columns and get
-- in the way of the DROP COLUMN cases): "stored" reads the counter table, "recount" recomputes from the source with
-- the names of the moment. This test rewrites both texts itself after every rename, so the recount never borrows
-- the extension's idea of the new names. Groups whose values are all zero are not stored: recounts leave them out.
CREATE TABLE checks (counter text PRIMARY KEY, stored text NOT NULL, recount text NOT NULL);
-- Every difference, found either way: by the recount (both directions with EXCEPT) and by counters.verify().
-- No rows means every counter is exact.
CREATE FUNCTION recount_drift() RETURNS TABLE (found_by text, counter text, row_value text)
LANGUAGE plpgsql AS $$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT * FROM checks ORDER BY checks.counter LOOP
		RETURN QUERY EXECUTE format(
			'SELECT ''counter only'', %1$L, c::text FROM (%2$s EXCEPT %3$s) c
			 UNION ALL
			 SELECT ''recount only'', %1$L, e::text FROM (%3$s EXCEPT %2$s) e
			 ORDER BY 1, 3', r.counter, r.stored, r.recount);
	END LOOP;
END $$;
CREATE FUNCTION drift() RETURNS TABLE (found_by text, counter text, row_value text)
LANGUAGE sql AS $$
	SELECT * FROM recount_drift()
	UNION ALL
	(SELECT 'verify', v.counter, concat_ws(' ', v.key, v.column_name, v.stored, v.expected)
	   FROM counters.verify() v ORDER BY 2, 3)
$$;
-- The catalog rows, the triggers of counters on any table, and the relations of this test's schemas.
CREATE FUNCTION catalog_rows() RETURNS TABLE (name text, source regclass, target regclass, definition_view regclass)
LANGUAGE sql AS $$ SELECT name, source, target, definition_view FROM counters.counters ORDER BY name $$;
CREATE FUNCTION capture_triggers() RETURNS TABLE (tgrelid regclass, tgname name, tgenabled "char")
LANGUAGE sql AS $$
	SELECT t.tgrelid::regclass, t.tgname, t.tgenabled FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
	 WHERE p.proname = 'capture' AND p.pronamespace::regnamespace::text = 'counters' ORDER BY t.tgrelid::regclass::text, t.tgname
$$;
CREATE FUNCTION relations() RETURNS TABLE (relation regclass, relkind "char")
LANGUAGE sql AS $$
	SELECT c.oid::regclass, c.relkind FROM pg_class c
	 WHERE c.relnamespace::regnamespace::text LIKE 'lifecycle%' AND c.relkind IN ('r', 'p', 'v')
	   AND c.relname NOT IN ('checks')
	 ORDER BY c.oid::regclass::text
$$;

--
-- 1. Renames of the source and of the columns a counter reads: as a key (plain and inside lower()), as a value, in
--    FILTER and in WHERE. The counters keep counting every kind of write, and the definition (counters.counters
--    and pg_get_viewdef of the definition view) shows the new names.
--
CREATE TABLE blogs (id int PRIMARY KEY, title text NOT NULL, post_count int NOT NULL DEFAULT 0);
INSERT INTO blogs SELECT g, 'blog ' || g FROM generate_series(1, 4) g;
CREATE TABLE posts (
	id         serial PRIMARY KEY,
	blog_id    int NOT NULL,
	user_id    int NOT NULL,
	rating     int NOT NULL DEFAULT 0,
	is_deleted boolean NOT NULL DEFAULT false,
	tag        text,
	note       text
);
INSERT INTO posts (blog_id, user_id, rating, is_deleted, tag, note)
SELECT 1 + g % 4, 1 + g % 5, g % 6, g % 7 = 0, (ARRAY['SQL', 'sql', 'Perf', NULL])[1 + g % 4 + g % 3 / 2], 'n' || g
  FROM generate_series(1, 60) g;
SELECT counters.create_counter('blog_stats', $$
	SELECT blog_id, lower(tag) AS tag, count(*) AS posts, sum(rating) AS rating,
	       count(*) FILTER (WHERE rating >= 4) AS good
	  FROM posts
	 WHERE NOT is_deleted
	 GROUP BY blog_id, lower(tag)
$$);
-- a counter-cache column in blogs, and a counter that reads only user_id
SELECT counters.create_counter('blog_cache', $$
	SELECT blog_id AS id, count(*) AS post_count FROM posts WHERE NOT is_deleted GROUP BY blog_id
$$, target => 'blogs');
SELECT counters.create_counter('user_posts', 'SELECT user_id, count(*) AS posts FROM posts GROUP BY user_id');
INSERT INTO checks VALUES
	('blog_stats', 'TABLE blog_stats',
	 $$SELECT blog_id, lower(tag), count(*), sum(rating), count(*) FILTER (WHERE rating >= 4)
	     FROM posts WHERE NOT is_deleted GROUP BY 1, 2$$),
	('blog_cache', 'SELECT id, title, post_count FROM blogs',
	 $$SELECT b.id, b.title, (SELECT count(*) FROM posts p WHERE p.blog_id = b.id AND NOT p.is_deleted)::int
	     FROM blogs b$$),
	('user_posts', 'TABLE user_posts', 'SELECT user_id, count(*) FROM posts GROUP BY 1');
SELECT * FROM drift();
SELECT * FROM catalog_rows();

ALTER TABLE posts RENAME COLUMN blog_id TO channel_id;      -- a key (and the counter-cache key)
ALTER TABLE posts RENAME COLUMN tag TO label;               -- inside the key expression lower(tag)
ALTER TABLE posts RENAME COLUMN rating TO score;            -- a value and the FILTER condition
ALTER TABLE posts RENAME COLUMN is_deleted TO hidden;       -- the WHERE condition
ALTER TABLE posts RENAME TO articles;                       -- the source
UPDATE checks SET recount = $$SELECT channel_id, lower(label), count(*), sum(score), count(*) FILTER (WHERE score >= 4)
                                 FROM articles WHERE NOT hidden GROUP BY 1, 2$$ WHERE counter = 'blog_stats';
UPDATE checks SET recount = $$SELECT b.id, b.title, (SELECT count(*) FROM articles p WHERE p.channel_id = b.id AND NOT p.hidden)::int
                                 FROM blogs b$$ WHERE counter = 'blog_cache';
UPDATE checks SET recount = 'SELECT user_id, count(*) FROM articles GROUP BY 1' WHERE counter = 'user_posts';
-- The definitions follow, through the catalog view and through the definition view itself.
SELECT name, definition FROM counters.counters ORDER BY name;
SELECT pg_get_viewdef('blog_stats_definition'::regclass, true);
SELECT * FROM catalog_rows();
-- Writes after the renames, of every kind: new rows, a key change, a value change across the FILTER condition, soft
-- deletes, a change of the expression key's column, hard deletes, and a statement that changes nothing counted.
INSERT INTO articles (channel_id, user_id, score, label) VALUES (1, 1, 5, 'SQL'), (2, 6, 1, 'New'), (4, 2, 4, NULL);
UPDATE articles SET channel_id = 1 + channel_id % 4 WHERE id % 6 = 0;
UPDATE articles SET score = score + 3 WHERE id % 5 = 1;
UPDATE articles SET hidden = NOT hidden WHERE id % 9 = 0;
UPDATE articles SET label = upper(label) WHERE id % 4 = 2;
DELETE FROM articles WHERE id % 11 = 0;
UPDATE articles SET note = 'edited' WHERE id < 10;
SELECT * FROM drift();

--
-- 2. Dropping a column a counter reads is refused, with PostgreSQL's dependency error naming the counter's
--    definition view; nothing changes. Retyping one declares each counter that reads it again, recounted in the new
--    type, with its mode, options and grants (a NOTICE says so); if that cannot be done (a counter-cache key whose
--    target column keeps the old type), the ALTER fails and nothing changes. A column no counter reads can be
--    retyped, dropped and added. With CASCADE a dropped column takes every counter that reads it, entirely (catalog
--    row, definition view, the table it created, and the triggers when it was the source's last counter), and only
--    those.
--
ALTER TABLE articles DROP COLUMN score;                     -- a value and FILTER column of blog_stats
\echo SQLSTATE :SQLSTATE
ALTER TABLE articles DROP COLUMN hidden;                    -- the WHERE column of blog_stats and blog_cache
\echo SQLSTATE :SQLSTATE
ALTER TABLE articles ALTER COLUMN label TYPE varchar(20);   -- only inside lower(), binary-compatible even
\echo SQLSTATE :SQLSTATE
\set VERBOSITY terse
ALTER TABLE articles ALTER COLUMN channel_id TYPE bigint;   -- a key
\set VERBOSITY default
\echo SQLSTATE :SQLSTATE
ALTER TABLE articles ALTER COLUMN score TYPE numeric;
\echo SQLSTATE :SQLSTATE
SELECT * FROM catalog_rows();
-- A column no counter reads: retyped, dropped (the source's rows now have a dropped attribute), and a new one added.
ALTER TABLE articles ALTER COLUMN note TYPE varchar(100);
ALTER TABLE articles DROP COLUMN note;
ALTER TABLE articles ADD COLUMN views int NOT NULL DEFAULT 0;
INSERT INTO articles (channel_id, user_id, score, label, views) VALUES (3, 3, 4, 'sql', 10), (3, 7, 0, 'perf', 1);
UPDATE articles SET channel_id = 2, views = views + 1 WHERE id % 7 = 3;
DELETE FROM articles WHERE id % 13 = 0;
SELECT * FROM drift();

-- CASCADE: score is read by blog_stats only.
ALTER TABLE articles DROP COLUMN score CASCADE;
DELETE FROM checks WHERE counter = 'blog_stats';
SELECT * FROM catalog_rows();
SELECT * FROM relations();
SELECT * FROM capture_triggers();
INSERT INTO articles (channel_id, user_id, label) VALUES (4, 1, 'x'), (1, 8, NULL);
UPDATE articles SET hidden = true WHERE id % 8 = 1;
SELECT * FROM drift();

-- Retyping a column a counter reads by hand, as before 0.5: drop the counter, retype, declare it again.
SELECT counters.drop_counter('user_posts');
ALTER TABLE articles ALTER COLUMN user_id TYPE bigint;
SELECT counters.create_counter('user_posts', 'SELECT user_id, count(*) AS posts FROM articles GROUP BY user_id');
SELECT format_type(atttypid, atttypmod) AS user_id_type FROM pg_attribute
 WHERE attrelid = 'user_posts'::regclass AND attname = 'user_id';
INSERT INTO articles (channel_id, user_id, label) VALUES (2, 5000000000, 'big');
SELECT * FROM drift();

-- CASCADE again: hidden is read by blog_cache only now. The counter goes; blogs, a table of the user's that the
-- counter only wrote into, stays with its rows and values; user_posts keeps counting with the source's triggers.
CREATE TEMP TABLE blogs_before AS SELECT * FROM blogs;
ALTER TABLE articles DROP COLUMN hidden CASCADE;
DELETE FROM checks WHERE counter = 'blog_cache';
SELECT * FROM catalog_rows();
SELECT * FROM relations();
SELECT count(*) AS blogs_rows_changed FROM (TABLE blogs EXCEPT TABLE blogs_before) x;
SELECT count(*) AS capture_triggers FROM capture_triggers();
INSERT INTO articles (channel_id, user_id, label) VALUES (1, 1, 'after');
SELECT * FROM drift();

--
-- 3. DROP TABLE of the source: refused while counters depend on it (each counter's definition view is named);
--    with CASCADE every counter of it goes, in every mode, with all of its tables, views and the triggers; the
--    counter-cache table of the user's stays.
--
SELECT counters.create_counter('channel_log', 'SELECT channel_id, count(*) AS posts FROM articles GROUP BY channel_id',
                               mode => 'log');
SELECT counters.create_counter('channel_sharded', 'SELECT channel_id, count(*) AS posts FROM articles GROUP BY channel_id',
                               mode => 'sharded');
SELECT counters.create_counter('blog_cache', $$
	SELECT channel_id AS id, count(*) AS post_count FROM articles GROUP BY channel_id
$$, target => 'blogs');
INSERT INTO checks VALUES
	('channel_log', 'TABLE channel_log', 'SELECT channel_id, count(*) FROM articles GROUP BY 1'),
	('channel_sharded', 'TABLE channel_sharded', 'SELECT channel_id, count(*) FROM articles GROUP BY 1'),
	('blog_cache', 'SELECT id, post_count FROM blogs',
	 'SELECT b.id, (SELECT count(*) FROM articles p WHERE p.channel_id = b.id)::int FROM blogs b');
INSERT INTO articles (channel_id, user_id) VALUES (1, 1), (2, 2);
SELECT * FROM drift();
DROP TABLE articles;
\echo SQLSTATE :SQLSTATE
SELECT * FROM catalog_rows();
SELECT * FROM relations();
CREATE TEMP TABLE blogs_before_drop AS SELECT * FROM blogs;
DROP TABLE articles CASCADE;
DELETE FROM checks;
SELECT * FROM catalog_rows();
SELECT * FROM relations();
SELECT * FROM capture_triggers();
SELECT count(*) AS blogs_rows_changed FROM (TABLE blogs EXCEPT TABLE blogs_before_drop) x;
DROP TABLE blogs;

--
-- 4. The counter table itself. Renaming it (or its columns, or moving it to another schema) is followed: the
--    catalog names it by its new name, writes keep being counted. Renaming the schema it lives in must be followed
--    too. A counter's own relations are guarded as its columns are: DROP TABLE of the counter table, DROP VIEW of the
--    definition view or of a log/sharded counter's view, DROP TABLE (... CASCADE) of its totals, log or slots, and
--    TRUNCATE of any of its tables are refused (2BP01): the counter would fail, or read zero while its source keeps
--    its rows. drop_counter() drops it; DROP SCHEMA ... CASCADE of the schema that holds them drops it too. A column
--    dropped from a counter table behind the extension's back makes writes to the source fail with an error naming
--    the counter; a retyped one must never be miscounted.
--
CREATE TABLE comments (id serial PRIMARY KEY, post_id int NOT NULL, score int NOT NULL DEFAULT 1);
INSERT INTO comments (post_id, score) SELECT 1 + g % 5, g % 4 FROM generate_series(1, 40) g;
SELECT counters.create_counter('post_comments', $$
	SELECT post_id, count(*) AS comments, sum(score) AS score FROM comments GROUP BY post_id
$$);
INSERT INTO checks VALUES ('post_comments', 'TABLE post_comments', 'SELECT post_id, count(*), sum(score) FROM comments GROUP BY 1');
INSERT INTO comments (post_id) VALUES (1), (6);
SELECT * FROM drift();
ALTER TABLE post_comments RENAME TO comment_counts;
ALTER TABLE comment_counts RENAME COLUMN comments TO n;
UPDATE checks SET stored = 'TABLE comment_counts' WHERE counter = 'post_comments';
INSERT INTO comments (post_id, score) VALUES (1, 9), (7, 2);
DELETE FROM comments WHERE id = 3;
SELECT * FROM catalog_rows();
SELECT * FROM comment_counts WHERE post_id IN (1, 6, 7) ORDER BY post_id;
SELECT * FROM drift();
-- moved to another schema
CREATE SCHEMA lifecycle_other;
ALTER TABLE comment_counts SET SCHEMA lifecycle_other;
UPDATE checks SET stored = 'TABLE lifecycle_other.comment_counts' WHERE counter = 'post_comments';
INSERT INTO comments (post_id, score) VALUES (2, 5);
UPDATE comments SET post_id = 7 WHERE id % 10 = 0;
SELECT * FROM catalog_rows();
SELECT * FROM drift();
-- That schema renamed: writes must keep being counted into the counter table, wherever it now is... (a statement
-- that changes several keys, or adds one, applies them through a prepared statement, not by the table's oid)
ALTER SCHEMA lifecycle_other RENAME TO lifecycle_moved;
UPDATE checks SET stored = 'TABLE lifecycle_moved.comment_counts' WHERE counter = 'post_comments';
INSERT INTO comments (post_id, score) VALUES (3, 1), (8, 1);         -- post 8 is a new key
SELECT * FROM drift();
-- ...and never into a table that has taken the old name since.
CREATE SCHEMA lifecycle_other;
CREATE TABLE lifecycle_other.comment_counts (post_id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0,
                                             score bigint NOT NULL DEFAULT 0);
INSERT INTO comments (post_id, score) VALUES (3, 2), (4, 2);
INSERT INTO comments (post_id, score) VALUES (5, 2), (9, 2);
SELECT count(*) AS rows_in_the_impostor FROM lifecycle_other.comment_counts;
SELECT * FROM drift();
DROP SCHEMA lifecycle_other CASCADE;
SELECT * FROM catalog_rows();

-- DROP TABLE or TRUNCATE of the counter table: refused, the counter keeps counting.
DROP TABLE lifecycle_moved.comment_counts;
\echo SQLSTATE :SQLSTATE
DROP TABLE lifecycle_moved.comment_counts CASCADE;
\echo SQLSTATE :SQLSTATE
TRUNCATE lifecycle_moved.comment_counts;
\echo SQLSTATE :SQLSTATE
INSERT INTO comments (post_id) VALUES (1);
SELECT * FROM drift();
-- DROP SCHEMA ... CASCADE of its schema: the counter goes, and with it the source's triggers (it was the last one).
DROP SCHEMA lifecycle_moved CASCADE;
DELETE FROM checks;
SELECT * FROM catalog_rows();
SELECT * FROM relations();
SELECT * FROM capture_triggers();
INSERT INTO comments (post_id) VALUES (1);

-- DROP VIEW of the definition view, of a sharded counter's view; DROP TABLE of a log counter's totals and of the
-- log table, with or without CASCADE; TRUNCATE of the log: refused. drop_counter() drops each.
SELECT counters.create_counter('by_view', 'SELECT post_id, count(*) AS n FROM comments GROUP BY post_id');
SELECT counters.create_counter('by_sharded', 'SELECT post_id, count(*) AS n FROM comments GROUP BY post_id', mode => 'sharded');
SELECT counters.create_counter('by_totals', 'SELECT post_id, count(*) AS n FROM comments GROUP BY post_id', mode => 'log');
SELECT counters.create_counter('by_log', 'SELECT post_id, count(*) AS n FROM comments GROUP BY post_id', mode => 'log');
SELECT * FROM relations();
DROP VIEW by_view_definition;
\echo SQLSTATE :SQLSTATE
DROP VIEW by_sharded;
\echo SQLSTATE :SQLSTATE
DROP TABLE by_totals_totals;
\echo SQLSTATE :SQLSTATE
DROP TABLE by_totals_totals CASCADE;
\echo SQLSTATE :SQLSTATE
DROP TABLE by_log_log CASCADE;
\echo SQLSTATE :SQLSTATE
TRUNCATE by_log_log;
\echo SQLSTATE :SQLSTATE
INSERT INTO comments (post_id) VALUES (2);
SELECT count(*) FILTER (WHERE n IS DISTINCT FROM (SELECT count(*) FROM comments c WHERE c.post_id = v.post_id)) AS wrong
  FROM (SELECT post_id, n FROM by_view UNION ALL SELECT post_id, n FROM by_sharded
        UNION ALL SELECT post_id, n FROM by_totals UNION ALL SELECT post_id, n FROM by_log) v;
SELECT counters.drop_counter(name) FROM counters.counter WHERE name LIKE 'by\_%' ORDER BY name;
SELECT * FROM catalog_rows();
SELECT * FROM relations();
SELECT * FROM capture_triggers();
INSERT INTO comments (post_id) VALUES (2);

-- DROP TABLE of a counter-cache target: the counter goes, the source's triggers too.
CREATE TABLE posts_cache (id int PRIMARY KEY, n int NOT NULL DEFAULT 0);
INSERT INTO posts_cache SELECT g FROM generate_series(1, 7) g;
SELECT counters.create_counter('posts_cache', 'SELECT post_id AS id, count(*) AS n FROM comments GROUP BY post_id',
                               target => 'posts_cache');
DROP TABLE posts_cache;
SELECT * FROM catalog_rows();
SELECT * FROM capture_triggers();
INSERT INTO comments (post_id) VALUES (3);

-- Dropping or retyping a counted column of the counter table is refused, naming the counter (2BP01).
SELECT counters.create_counter('post_comments', 'SELECT post_id, count(*) AS comments, sum(score) AS score FROM comments GROUP BY post_id');
ALTER TABLE post_comments DROP COLUMN score;
\echo SQLSTATE :SQLSTATE
ALTER TABLE post_comments ALTER COLUMN comments TYPE numeric;
\echo SQLSTATE :SQLSTATE
ALTER TABLE post_comments RENAME COLUMN score TO score_sum;
INSERT INTO comments (post_id) VALUES (4);
SELECT * FROM counters.verify('post_comments');
-- A value column dropped from the counter table behind the extension's back (event triggers do not fire in
-- replica mode): writes to the source fail with an error naming the counter and saying what to do, and change
-- nothing; verify and rebuild must fail naming the counter too (not with an error about the SQL they generate, nor
-- by reporting that nothing differs); drop_counter cleans up.
SET ROLE NONE; SET session_replication_role = replica; RESET ROLE;
ALTER TABLE post_comments DROP COLUMN score_sum;
SET ROLE NONE; RESET session_replication_role; RESET ROLE;
INSERT INTO comments (post_id) VALUES (4);
\echo SQLSTATE :SQLSTATE
DO $$
BEGIN
	PERFORM * FROM counters.verify('post_comments');
	RAISE NOTICE 'verify succeeded';
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE 'verify failed, naming the counter: %', SQLERRM LIKE '%post_comments%';
END $$;
SET client_min_messages = warning;
DO $$
BEGIN
	PERFORM counters.rebuild('post_comments');
	RAISE WARNING 'rebuild succeeded';
EXCEPTION WHEN OTHERS THEN
	RAISE WARNING 'rebuild failed, naming the counter: %', SQLERRM LIKE '%post_comments%';
END $$;
RESET client_min_messages;
SELECT counters.drop_counter('post_comments');
SELECT * FROM catalog_rows();
SELECT * FROM capture_triggers();
SELECT * FROM relations();
INSERT INTO comments (post_id) VALUES (4);

-- A value column of the counter table retyped (bigint to numeric) after this session has written through the
-- counter. Not supported, but a write afterwards (to a key whose row exists) must either fail or be counted:
-- whichever happens, no drift.
SELECT counters.create_counter('post_comments', 'SELECT post_id, count(*) AS comments FROM comments GROUP BY post_id');
INSERT INTO checks VALUES ('post_comments', 'TABLE post_comments', 'SELECT post_id, count(*) FROM comments GROUP BY 1');
INSERT INTO comments (post_id) VALUES (1);
DO $$
BEGIN
	ALTER TABLE post_comments ALTER COLUMN comments TYPE numeric;
	INSERT INTO comments (post_id) VALUES (1);
EXCEPTION WHEN OTHERS THEN
	NULL;  -- refusing the change or the write is fine; counting wrong is not
END $$;
SELECT * FROM drift();
SELECT counters.drop_counter('post_comments');
DELETE FROM checks;

--
-- 5. Triggers disabled (DISABLE TRIGGER ALL, DISABLE TRIGGER of one capture trigger): those writes are not counted.
--    verify reports exactly the keys that drifted (compared with the drifted keys this test computes itself),
--    counters.rebuild repairs them, and writes are counted again. Under session_replication_role = replica (as
--    logical replication's apply worker runs) the replica triggers count each row; with the statement triggers
--    enabled ALWAYS too (the advice of 0.5's first docs), each row still counts once.
--
-- (the same rows as at the start of 4, whatever the writes of 4 did)
TRUNCATE comments RESTART IDENTITY;
INSERT INTO comments (post_id, score) SELECT 1 + g % 5, g % 4 FROM generate_series(1, 40) g;
SELECT counters.create_counter('post_comments', $$
	SELECT post_id, count(*) AS comments, sum(score) AS score FROM comments GROUP BY post_id
$$);
INSERT INTO checks VALUES ('post_comments', 'TABLE post_comments', 'SELECT post_id, count(*), sum(score) FROM comments GROUP BY 1');
SELECT * FROM drift();
-- The keys whose stored values differ from a recount, by this test's own comparison.
CREATE FUNCTION drifted_keys() RETURNS TABLE (key jsonb)
LANGUAGE sql AS $$
	SELECT jsonb_build_object('post_id', coalesce(s.post_id, r.post_id))
	  FROM post_comments s
	  FULL JOIN (SELECT post_id, count(*) AS comments, sum(score) AS score FROM comments GROUP BY post_id) r
	    ON r.post_id = s.post_id
	 WHERE s.comments IS DISTINCT FROM r.comments OR s.score IS DISTINCT FROM r.score
	 ORDER BY 1
$$;
-- verify's keys and this test's keys, each side's extras: nothing on either side means verify is exact.
CREATE FUNCTION verify_mismatch() RETURNS TABLE (side text, key jsonb)
LANGUAGE sql AS $$
	SELECT 'verify only', k FROM (SELECT v.key FROM counters.verify('post_comments') v EXCEPT SELECT * FROM drifted_keys()) x(k)
	UNION ALL
	SELECT 'recount only', k FROM (SELECT * FROM drifted_keys() EXCEPT SELECT v.key FROM counters.verify('post_comments') v) y(k)
$$;

ALTER TABLE comments DISABLE TRIGGER ALL;
SELECT * FROM capture_triggers();
INSERT INTO comments (post_id, score) VALUES (1, 5), (1, 5), (8, 1);  -- post 8 is new
ALTER TABLE comments ENABLE TRIGGER ALL;
ALTER TABLE comments DISABLE TRIGGER counters_update;
UPDATE comments SET score = score + 10 WHERE post_id = 2;             -- not counted
DELETE FROM comments WHERE id = (SELECT min(id) FROM comments WHERE post_id = 3);  -- counted: only update is off
ALTER TABLE comments ENABLE TRIGGER counters_update;
SET ROLE NONE; SET session_replication_role = replica; RESET ROLE;
DELETE FROM comments WHERE post_id = 4;                               -- the whole key, counted row by row
SET ROLE NONE; RESET session_replication_role; RESET ROLE;
SELECT * FROM drifted_keys();
SELECT counter, key, column_name, stored, expected FROM counters.verify() ORDER BY key, column_name;
SELECT * FROM verify_mismatch();
-- Repair: counters.rebuild writes exactly the keys that differ (post 1 and 2 updated, 8 inserted).
SET client_min_messages = warning;
SELECT counters.rebuild('post_comments') AS rows_changed;
RESET client_min_messages;
SELECT * FROM drift();
INSERT INTO comments (post_id) VALUES (4), (8);
UPDATE comments SET score = 0 WHERE post_id = 2;
SELECT * FROM drift();
-- ENABLE ALWAYS: counted once under the replica role (by the replica triggers); back to ENABLE afterwards.
ALTER TABLE comments ENABLE ALWAYS TRIGGER counters_insert;
ALTER TABLE comments ENABLE ALWAYS TRIGGER counters_update;
ALTER TABLE comments ENABLE ALWAYS TRIGGER counters_delete;
ALTER TABLE comments ENABLE ALWAYS TRIGGER counters_truncate;
SET ROLE NONE; SET session_replication_role = replica; RESET ROLE;
INSERT INTO comments (post_id, score) VALUES (9, 3), (1, 1);
UPDATE comments SET post_id = 5 WHERE post_id = 9;
DELETE FROM comments WHERE id % 6 = 0;
SET ROLE NONE; RESET session_replication_role; RESET ROLE;
SELECT * FROM drift();
ALTER TABLE comments ENABLE TRIGGER ALL;
SELECT * FROM capture_triggers();

--
-- 6. Row-level security on the source, enabled and forced, with policies under which the writing role sees only
--    its own rows but may insert rows for others: the counters count every row, including those the writer cannot
--    see, and the writer needs no privilege on the counter table.
--
SET ROLE NONE; CREATE ROLE lifecycle_writer; RESET ROLE;
GRANT USAGE ON SCHEMA lifecycle_test TO lifecycle_writer;
GRANT SELECT, INSERT, UPDATE, DELETE ON comments TO lifecycle_writer;
GRANT USAGE ON SEQUENCE comments_id_seq TO lifecycle_writer;
ALTER TABLE comments ADD COLUMN author text NOT NULL DEFAULT 'someone else';
ALTER TABLE comments ENABLE ROW LEVEL SECURITY;
ALTER TABLE comments FORCE ROW LEVEL SECURITY;
CREATE POLICY own_rows ON comments USING (author = current_user);      -- SELECT, UPDATE, DELETE: own rows only
CREATE POLICY insert_any ON comments FOR INSERT WITH CHECK (true);     -- INSERT: for anyone
-- (the superuser bypasses row-level security: it sees every row; the table's owner, counters_app, does not)
SET ROLE NONE;
SELECT count(*) AS all_rows FROM comments;
RESET ROLE;
SELECT count(*) AS rows_the_owner_sees FROM comments;
SET ROLE lifecycle_writer;
SELECT count(*) AS rows_the_writer_sees FROM comments;
INSERT INTO comments (post_id, score, author) VALUES (1, 2, 'lifecycle_writer'), (2, 5, 'lifecycle_writer'),
                                                   (10, 7, 'someone else'), (10, 6, 'someone else');
SELECT post_id, score FROM comments ORDER BY id;                     -- only its own two rows
UPDATE comments SET post_id = 11, score = score + 1;                  -- moves the writer's own rows only
DELETE FROM comments WHERE score = 6;                                -- its own row, not the hidden ones with 6
SELECT post_id, score FROM comments ORDER BY id;
SELECT * FROM post_comments;                                         -- no privilege on the counter table
\echo SQLSTATE :SQLSTATE
RESET ROLE;
-- exact, by a recount that sees every row; verify() refuses, as the policies hide rows from the counter's owner
SET ROLE NONE;
SELECT * FROM recount_drift();
RESET ROLE;
SELECT * FROM counters.verify('post_comments');
SELECT * FROM post_comments WHERE post_id IN (1, 2, 10, 11) ORDER BY post_id;
ALTER TABLE comments NO FORCE ROW LEVEL SECURITY;
SELECT * FROM drift();
ALTER TABLE comments DISABLE ROW LEVEL SECURITY;
DROP POLICY own_rows ON comments;
DROP POLICY insert_any ON comments;
REVOKE ALL ON comments FROM lifecycle_writer;
REVOKE ALL ON SEQUENCE comments_id_seq FROM lifecycle_writer;
REVOKE ALL ON SCHEMA lifecycle_test FROM lifecycle_writer;
SET ROLE NONE; DROP ROLE lifecycle_writer; RESET ROLE;

--
-- 7. DROP EXTENSION counters. Without CASCADE it is refused while capture triggers use its trigger function. With
--    CASCADE it removes the capture triggers, its functions, event triggers, catalog and schema; the source tables
--    and their rows stay. The counter tables, definition views and log-mode tables are not members of the extension
--    and not among its configuration tables (only counters.counter is, for pg_dump): they stay behind as plain
--    objects that no longer change. CREATE EXTENSION again starts with an empty catalog; a counter's name can be
--    declared again once its leftovers are dropped (their names are taken), and new counters count, in this same
--    session too.
--
SELECT counters.create_counter('comments_log', 'SELECT post_id, count(*) AS comments FROM comments GROUP BY post_id',
                               mode => 'log');
CREATE TABLE posts_cache (id int PRIMARY KEY, n int NOT NULL DEFAULT 0);
INSERT INTO posts_cache SELECT g FROM generate_series(1, 10) g;
SELECT counters.create_counter('posts_cache', 'SELECT post_id AS id, count(*) AS n FROM comments GROUP BY post_id',
                               target => 'posts_cache');
INSERT INTO checks VALUES
	('comments_log', 'TABLE comments_log', 'SELECT post_id, count(*) FROM comments GROUP BY 1'),
	('posts_cache', 'TABLE posts_cache',
	 'SELECT c.id, (SELECT count(*) FROM comments p WHERE p.post_id = c.id)::int FROM posts_cache c');
INSERT INTO comments (post_id) VALUES (3), (3);
SELECT * FROM drift();
-- The extension's configuration tables (none: its catalog is not dumped), and the relations that are members of it.
SELECT extconfig::regclass[] AS configuration_tables FROM pg_extension WHERE extname = 'counters';
SELECT d.objid::regclass AS member_relation FROM pg_depend d
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND d.classid = 'pg_class'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'counters')
 ORDER BY d.objid::regclass::text;
CREATE TEMP TABLE comments_before AS SELECT * FROM comments;
CREATE TEMP TABLE counter_tables_before AS
	SELECT 'post_comments' AS t, to_jsonb(c) AS r FROM post_comments c
	UNION ALL SELECT 'comments_log_totals', to_jsonb(c) FROM comments_log_totals c
	UNION ALL SELECT 'posts_cache', to_jsonb(c) FROM posts_cache c;
\set VERBOSITY terse
DROP EXTENSION counters;
\set VERBOSITY default
SET client_min_messages = warning;
DROP EXTENSION counters CASCADE;
RESET client_min_messages;
-- Nothing of the extension is left: no trigger calling its code, no function of its library or schema, no event
-- trigger, no schema.
SELECT t.tgrelid::regclass, t.tgname FROM pg_trigger t WHERE t.tgname LIKE 'counters%' OR t.tgfoid IN
	(SELECT oid FROM pg_proc WHERE probin LIKE '%counters%' OR pronamespace::regnamespace::text = 'counters');
SELECT p.oid::regprocedure FROM pg_proc p WHERE p.probin LIKE '%counters%' OR p.pronamespace::regnamespace::text = 'counters'
    OR p.proname LIKE 'counters%';
SELECT evtname FROM pg_event_trigger;
SELECT to_regnamespace('counters') AS counters_schema, (SELECT count(*) FROM pg_extension WHERE extname = 'counters') AS extension;
-- The source and its rows are intact, and so are the leftovers, which stop changing.
SELECT count(*) AS rows_differing FROM (SELECT * FROM comments EXCEPT SELECT * FROM comments_before) a;
SELECT count(*) AS rows_missing FROM (SELECT * FROM comments_before EXCEPT SELECT * FROM comments) b;
SELECT * FROM relations();
INSERT INTO comments (post_id) VALUES (1), (11);
UPDATE comments SET post_id = 2 WHERE post_id = 3;
SELECT count(*) AS leftover_rows_changed FROM (
	SELECT 'post_comments' AS t, to_jsonb(c) AS r FROM post_comments c
	UNION ALL SELECT 'comments_log_totals', to_jsonb(c) FROM comments_log_totals c
	UNION ALL SELECT 'posts_cache', to_jsonb(c) FROM posts_cache c
	EXCEPT TABLE counter_tables_before) x;
-- The extension again, created with the default search_path (its schema is recorded as the first schema of the
-- search_path: public, as the regression run's own CREATE EXTENSION did).
RESET search_path;
CREATE EXTENSION counters;
SELECT extnamespace::regnamespace, extversion = (SELECT default_version FROM pg_available_extensions
                                                  WHERE name = 'counters') AS default_version
  FROM pg_extension WHERE extname = 'counters';
SET search_path = lifecycle_test;
SELECT count(*) AS catalog_rows FROM counters.counter;
-- The old name is taken by the leftover definition view: PostgreSQL's error, and nothing is left behind.
\set SHOW_CONTEXT errors
SELECT counters.create_counter('post_comments', 'SELECT post_id, count(*) AS comments, sum(score) AS score FROM comments GROUP BY post_id');
\set SHOW_CONTEXT never
\echo SQLSTATE :SQLSTATE
SELECT * FROM catalog_rows();
SELECT * FROM capture_triggers();
-- Drop the leftovers, declare again (same name, same source), and in this same session.
DROP VIEW post_comments_definition, comments_log_definition, posts_cache_definition, comments_log;
DROP TABLE post_comments, comments_log_totals, comments_log_log;
SELECT counters.create_counter('post_comments', 'SELECT post_id, count(*) AS comments, sum(score) AS score FROM comments GROUP BY post_id');
SELECT counters.create_counter('posts_cache', 'SELECT post_id AS id, count(*) AS n FROM comments GROUP BY post_id',
                               target => 'posts_cache');
DELETE FROM checks WHERE counter = 'comments_log';
SELECT * FROM catalog_rows();
SELECT * FROM capture_triggers();
INSERT INTO comments (post_id, score) VALUES (1, 4), (12, 1);
UPDATE comments SET score = score + 1 WHERE post_id = 2;
DELETE FROM comments WHERE id % 4 = 0;
SELECT * FROM drift();
SELECT counters.drop_counter('post_comments');
SELECT counters.drop_counter('posts_cache');
DELETE FROM checks;
DROP TABLE posts_cache, comments;
DROP FUNCTION drifted_keys(), verify_mismatch();

--
-- 8. A partitioned source whose partitions do not share the parent's physical layout (one attached with its
--    columns in another order and a dropped column). Renaming the key, value, FILTER and WHERE columns through the
--    parent renames them in every partition (a partition alone may not rename an inherited column); writes through
--    the parent, to a partition directly, moving rows between partitions, and to a partition created afterwards
--    are all counted once. DISABLE TRIGGER ALL on the parent does not reach the partitions' capture triggers:
--    only the writes that name the parent stop being counted, and verify shows exactly those.
--
CREATE TABLE events (id int NOT NULL, region text NOT NULL, kind text, amount int, at date) PARTITION BY LIST (region);
CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu');
CREATE TABLE events_us (junk int, at date, amount int, kind text, region text NOT NULL, id int NOT NULL);
ALTER TABLE events_us DROP COLUMN junk;
ALTER TABLE events ATTACH PARTITION events_us FOR VALUES IN ('us');
CREATE TABLE events_rest PARTITION OF events DEFAULT;
INSERT INTO events SELECT g, (ARRAY['eu', 'us', 'asia'])[1 + g % 3], 'k' || g % 4, g, date '2024-01-01' + g
  FROM generate_series(1, 45) g;
SELECT counters.create_counter('event_kinds', $$
	SELECT kind, count(*) AS events, sum(amount) AS amount, count(*) FILTER (WHERE amount > 10) AS big
	  FROM events
	 WHERE at >= '2024-01-05'
	 GROUP BY kind
$$);
INSERT INTO checks VALUES ('event_kinds', 'TABLE event_kinds',
	$$SELECT kind, count(*), sum(amount), count(*) FILTER (WHERE amount > 10) FROM events WHERE at >= '2024-01-05' GROUP BY 1$$);
SELECT * FROM drift();
ALTER TABLE events RENAME COLUMN kind TO category;
ALTER TABLE events RENAME COLUMN amount TO value;
ALTER TABLE events RENAME COLUMN at TO happened_on;
ALTER TABLE events_us RENAME COLUMN value TO v;
\echo SQLSTATE :SQLSTATE
UPDATE checks SET recount = $$SELECT category, count(*), sum(value), count(*) FILTER (WHERE value > 10) FROM events
                                 WHERE happened_on >= '2024-01-05' GROUP BY 1$$ WHERE counter = 'event_kinds';
SELECT attrelid::regclass, attnum, attname FROM pg_attribute
 WHERE attrelid IN ('events'::regclass, 'events_us'::regclass) AND attnum > 0 AND NOT attisdropped ORDER BY attrelid::regclass::text, attnum;
SELECT definition FROM counters.counters WHERE name = 'event_kinds';
INSERT INTO events VALUES (100, 'us', 'k1', 50, '2024-06-01'), (101, 'eu', 'k9', 5, '2024-06-01');
INSERT INTO events_us (id, region, category, value, happened_on) VALUES (102, 'us', 'k9', 12, '2024-06-02');
UPDATE events SET region = 'eu' WHERE id % 5 = 0;                   -- moves rows between partitions
UPDATE events_us SET value = value + 100 WHERE id % 2 = 0;
UPDATE events SET happened_on = '2023-12-31' WHERE id % 7 = 0;      -- out of the WHERE condition
DELETE FROM events_rest WHERE id % 3 = 0;
CREATE TABLE events_jp PARTITION OF events FOR VALUES IN ('jp');
INSERT INTO events_jp VALUES (200, 'jp', 'k1', 50, '2024-06-01');
INSERT INTO events VALUES (201, 'jp', 'k2', 11, '2024-06-01');
SELECT * FROM drift();
SELECT * FROM capture_triggers() WHERE tgrelid::text LIKE 'events%';
-- DISABLE TRIGGER ALL on the parent: the partitions' triggers stay enabled.
ALTER TABLE events DISABLE TRIGGER ALL;
INSERT INTO events VALUES (300, 'eu', 'k7', 1, '2024-07-01');         -- names the parent: not counted
INSERT INTO events_eu VALUES (301, 'eu', 'k8', 1, '2024-07-01');      -- names the partition: counted
ALTER TABLE events ENABLE TRIGGER ALL;
SELECT counter, key, column_name, stored, expected FROM counters.verify('event_kinds') ORDER BY key, column_name;
SET client_min_messages = warning;
SELECT counters.rebuild('event_kinds') AS rows_changed;
RESET client_min_messages;
SELECT * FROM drift();
SELECT counters.drop_counter('event_kinds');
DELETE FROM checks;
SELECT * FROM catalog_rows();
SELECT * FROM capture_triggers();

-- clean up (the extension stays installed, as the regression run installed it)
RESET search_path;
DROP SCHEMA lifecycle_test CASCADE;
SELECT extname, extnamespace::regnamespace FROM pg_extension WHERE extname = 'counters';
