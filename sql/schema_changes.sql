--
-- schema_changes: migrations. Renaming the source, its columns or the counter table keeps the counter working (the
-- definition follows the new names); dropping or retyping a column a counter reads fails unless CASCADE, which drops
-- the counter entirely; dropping the source or the counter table drops the counter; disabled triggers and
-- session_replication_role = replica make counters drift, which verify reports and rebuild repairs; row-level
-- security on the source hides no row from the counter. After each step the counters are compared with their
-- definition (counters.verify lists nothing) and leftovers are listed.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA schema_test;
SET search_path = schema_test;
CREATE TABLE posts (id serial PRIMARY KEY, blog_id int NOT NULL, rating int NOT NULL DEFAULT 0,
                    is_deleted boolean NOT NULL DEFAULT false, note text);
INSERT INTO posts (blog_id, rating, is_deleted) SELECT 1 + g % 4, g % 9, g % 7 = 0 FROM generate_series(1, 80) g;
SELECT counters.create_counter('blog_stats', $$
	SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM posts WHERE NOT is_deleted GROUP BY blog_id
$$);
-- what is left of counters and their triggers
CREATE FUNCTION leftovers() RETURNS TABLE (what text, name text) LANGUAGE sql AS $$
	SELECT 'counter', c.name FROM counters.counter c
	UNION ALL SELECT 'trigger', t.tgrelid::regclass || '.' || t.tgname FROM pg_trigger t
	 WHERE t.tgname LIKE 'counters%' AND t.tgrelid::regclass::text NOT LIKE 'pg_%'
	UNION ALL SELECT 'relation', c.relname FROM pg_class c WHERE c.relnamespace = 'schema_test'::regnamespace AND c.relname LIKE 'blog_stats%'
	ORDER BY 1, 2
$$;

-- 1. Renames: the key, value and WHERE columns, the source table, the counter table.
ALTER TABLE posts RENAME COLUMN blog_id TO channel_id;
ALTER TABLE posts RENAME COLUMN rating TO score;
ALTER TABLE posts RENAME COLUMN is_deleted TO hidden;
ALTER TABLE posts RENAME TO articles;
ALTER TABLE blog_stats RENAME COLUMN posts TO post_count;
INSERT INTO articles (channel_id, score) VALUES (1, 5), (2, 7);
UPDATE articles SET hidden = true WHERE id % 5 = 0;
DELETE FROM articles WHERE id % 11 = 0;
SELECT definition FROM counters.counters WHERE name = 'blog_stats';
SELECT * FROM counters.verify();
SELECT * FROM blog_stats ORDER BY blog_id;

-- 2. Dropping a column the counter reads fails, naming what depends on it; retyping one declares the counter again
--    (recounted in the new type); an unused one is fine.
ALTER TABLE articles DROP COLUMN score;
\echo SQLSTATE :SQLSTATE
ALTER TABLE articles ALTER COLUMN channel_id TYPE bigint;
\echo SQLSTATE :SQLSTATE
SELECT * FROM counters.verify();
-- A retype that fails inside a savepoint (or an exception block) takes its re-declaration with it: the next,
-- unrelated ALTER TABLE of the transaction neither fails nor brings back a counter dropped in between.
BEGIN;
SAVEPOINT a;
ALTER TABLE articles ALTER COLUMN channel_id TYPE bigint USING (channel_id / 0);
ROLLBACK TO a;
ALTER TABLE articles ADD COLUMN tmp int;
SELECT counters.drop_counter('blog_stats');
ALTER TABLE articles DROP COLUMN tmp;
SELECT count(*) AS counters FROM counters.counter;
ROLLBACK;
DO $$
BEGIN
	ALTER TABLE schema_test.articles ALTER COLUMN channel_id TYPE bigint USING (channel_id / 0);
EXCEPTION WHEN division_by_zero THEN
	NULL;
END $$;
ALTER TABLE articles ADD COLUMN tmp int;
ALTER TABLE articles DROP COLUMN tmp;
SELECT * FROM counters.verify();
-- the migration by hand, as before 0.5, in one transaction: the counter is exact again afterwards (writers wait)
BEGIN;
SELECT pg_get_viewdef('blog_stats_definition') AS definition \gset
SELECT counters.drop_counter('blog_stats');
ALTER TABLE articles ALTER COLUMN channel_id TYPE bigint;
SELECT counters.create_counter('blog_stats', :'definition');
COMMIT;
INSERT INTO articles (id, channel_id, score) VALUES (-1, 2, 1);
SELECT * FROM counters.verify();
DELETE FROM articles WHERE id = -1;
ALTER TABLE articles DROP COLUMN note;
INSERT INTO articles (channel_id, score) VALUES (3, 1);
SELECT * FROM counters.verify();
-- with CASCADE the counter goes entirely: catalog row, view, table, triggers
ALTER TABLE articles DROP COLUMN score CASCADE;
SELECT * FROM leftovers();
INSERT INTO articles (channel_id) VALUES (1);

-- 3. DROP TABLE of the source: refused while a counter depends on it; with CASCADE nothing is left.
SELECT counters.create_counter('blog_stats', 'SELECT channel_id, count(*) AS posts FROM articles GROUP BY channel_id');
DROP TABLE articles;
\echo SQLSTATE :SQLSTATE
SELECT * FROM leftovers();
CREATE TABLE keep_me AS SELECT * FROM articles;
DROP TABLE articles CASCADE;
SELECT * FROM leftovers();

-- 4. DROP TABLE of the counter table, or TRUNCATE, by itself: refused (2BP01), as for its columns. drop_counter()
--    drops the counter (and the source's triggers with the last one).
ALTER TABLE keep_me ADD PRIMARY KEY (id);
SELECT counters.create_counter('blog_stats', 'SELECT channel_id, count(*) AS posts FROM keep_me GROUP BY channel_id');
DROP TABLE blog_stats;
\echo SQLSTATE :SQLSTATE
TRUNCATE blog_stats;
\echo SQLSTATE :SQLSTATE
SELECT count(*) > 0 AS still_counted FROM blog_stats;
SELECT counters.drop_counter('blog_stats');
SELECT * FROM leftovers();
INSERT INTO keep_me (id, channel_id, hidden) VALUES (1000, 1, false);

-- 5. Triggers disabled: writes are not counted; verify says which keys drifted, rebuild repairs them. Under
--    session_replication_role = replica, the replica triggers count each row.
SELECT counters.create_counter('blog_stats', 'SELECT channel_id, count(*) AS posts FROM keep_me GROUP BY channel_id');
ALTER TABLE keep_me DISABLE TRIGGER counters_insert;
INSERT INTO keep_me (id, channel_id, hidden) VALUES (1001, 2, false), (1002, 2, false);
ALTER TABLE keep_me ENABLE TRIGGER counters_insert;
SET ROLE NONE; SET session_replication_role = replica; RESET ROLE;
DELETE FROM keep_me WHERE id = 1000;
SET ROLE NONE; RESET session_replication_role; RESET ROLE;
SELECT * FROM counters.verify();
SET client_min_messages = warning;
SELECT counters.rebuild('blog_stats');
RESET client_min_messages;
SELECT * FROM counters.verify();

-- 6. Row-level security on the source, forced, with a policy that hides every row from the writing role: the
--    counter still counts every row.
SET ROLE NONE; CREATE ROLE schema_test_writer; RESET ROLE;
GRANT USAGE ON SCHEMA schema_test TO schema_test_writer;
GRANT SELECT, INSERT, UPDATE, DELETE ON keep_me TO schema_test_writer;
ALTER TABLE keep_me ENABLE ROW LEVEL SECURITY;
ALTER TABLE keep_me FORCE ROW LEVEL SECURITY;
CREATE POLICY writer_sees_nothing ON keep_me FOR SELECT USING (false);
CREATE POLICY writer_writes ON keep_me FOR INSERT WITH CHECK (true);
SET ROLE schema_test_writer;
INSERT INTO keep_me (id, channel_id, hidden) VALUES (2001, 1, false), (2002, 4, false);
SELECT count(*) AS rows_the_writer_sees FROM keep_me;
RESET ROLE;
-- (forced, the policy hides the rows from the table's owner too: a recount would undercount, verify refuses)
SELECT * FROM counters.verify();
ALTER TABLE keep_me NO FORCE ROW LEVEL SECURITY;
SELECT * FROM counters.verify();
SELECT * FROM blog_stats ORDER BY channel_id;
SELECT counters.drop_counter('blog_stats');
SET ROLE NONE; DROP OWNED BY schema_test_writer; RESET ROLE;
SET ROLE NONE; DROP ROLE schema_test_writer; RESET ROLE;
RESET search_path;
DROP SCHEMA schema_test CASCADE;
