--
-- storage: the storage parameters of each kind of table a counter keeps (docs/operations.md, "Vacuum and bloat").
-- Counter rows and slots leave half of each page free, so that a statement changing every key updates every row in
-- place (HOT: the key index does not grow, nor does the heap); a log is vacuumed as soon as a compaction leaves a
-- thousand dead rows, unthrottled. A DBA's own settings stay when the counter is declared again (a redefinition, a
-- column retype).
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA storage;
SET search_path = storage, regress;
CREATE TABLE posts (id int PRIMARY KEY, blog_id int NOT NULL, rating int NOT NULL DEFAULT 0, score numeric NOT NULL DEFAULT 0);
INSERT INTO posts SELECT g, g, 1, 0.5 FROM generate_series(1, 5000) g;
CREATE VIEW parameters AS
SELECT c.relname, c.reloptions, t.reloptions AS toast
  FROM pg_class c LEFT JOIN pg_class t ON t.oid = c.reltoastrelid
 WHERE c.relnamespace = 'storage'::regnamespace AND c.relkind = 'r' AND c.relname <> 'posts'
 ORDER BY 1;
SELECT counters.create_counter('blog_posts', 'SELECT blog_id, count(*) AS posts, sum(rating) AS rating, sum(score) AS score FROM posts GROUP BY blog_id');
SELECT counters.create_counter('blog_log', 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id', mode => 'log');
SELECT counters.create_counter('blog_sharded', 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id', mode => 'sharded');
SELECT * FROM parameters;

-- 1. A statement changing every key of 5,000 updates each counter row in place: the table and its key index keep
--    their size (with pages filled, every update would add an index entry, and the heap would double).
SELECT pg_relation_size('blog_posts') AS heap, pg_relation_size('blog_posts_pkey') AS index \gset before_
UPDATE posts SET rating = rating + 1, score = score + 1;
SELECT pg_relation_size('blog_posts') = :before_heap AS same_heap,
       pg_relation_size('blog_posts_pkey') = :before_index AS same_index;
SELECT (SELECT count(*) FROM (SELECT * FROM blog_posts EXCEPT
        SELECT blog_id, count(*), sum(rating), sum(score) FROM posts GROUP BY blog_id) d) AS differ;

-- 2. A DBA's settings, on the counter table and its TOAST table, on a log and on slots, stay through a redefinition
--    and through a column retype (each declares the counter again, in the same mode).
ALTER TABLE blog_posts SET (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.05, toast.autovacuum_enabled = false);
ALTER TABLE blog_log_log SET (autovacuum_vacuum_threshold = 5000);
ALTER TABLE blog_sharded_slots RESET (fillfactor);
SELECT counters.alter_counter('blog_posts', definition => 'SELECT blog_id, count(*) AS posts, sum(rating) AS rating, sum(score) AS score FROM posts GROUP BY blog_id');
SELECT counters.alter_counter('blog_log', definition => 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id');
SELECT counters.alter_counter('blog_sharded', definition => 'SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id');
SELECT * FROM parameters;
ALTER TABLE posts ALTER COLUMN rating TYPE bigint;
SELECT * FROM parameters;

-- 3. Switching modes: the totals keep the counter table's settings; the log and slots take their own.
SELECT counters.alter_counter('blog_posts', mode => 'log');
SELECT counters.alter_counter('blog_log', mode => 'exact');
SELECT counters.alter_counter('blog_log', mode => 'sharded');
SELECT * FROM parameters;
SELECT (SELECT count(*) FROM (SELECT * FROM blog_posts EXCEPT
        SELECT blog_id, count(*), sum(rating), sum(score) FROM posts GROUP BY blog_id) d) AS differ;

SELECT counters.drop_counter(name) FROM counters.counter WHERE source = 'storage.posts'::regclass ORDER BY name;
DROP SCHEMA storage CASCADE;
