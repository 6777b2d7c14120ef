--
-- long_keys: a key longer than a btree entry holds (about 2,700 bytes: a URL, a user agent) is counted like any
-- other. A key column of an unbounded string type (text, bytea, varchar or char without a short length limit) is
-- indexed by counters.key_digest(column) -- its bytes when short, a tag and their SHA-256 when long -- and found by a
-- hash index of its own; a row found by a digest is compared with the key exactly. Every mode; both ways of writing
-- a counter row (directly, and through the executor when the counter table has a trigger); compaction, rebuild,
-- verify, top(), a column's retype and window thresholds over a long prefix; keys equal up to their last byte, char
-- keys with trailing spaces, bytea keys, NULL keys. After each step every counter is compared with a recount
-- (differing rows, counted: a long key would make a listing unreadable).
--
\set VERBOSITY terse
CREATE SCHEMA long_test;
SET search_path = long_test, regress;
CREATE TABLE views (id serial PRIMARY KEY, url text, agent bytea, code char(4000), day date NOT NULL DEFAULT current_date,
                    n int NOT NULL DEFAULT 1);
-- a URL of about `len` bytes ending in `i`: URLs of one length differ only in their last characters
CREATE FUNCTION url(i int, len int) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT repeat('/path', len / 5) || i $$;
SELECT counters.create_counter('by_url', 'SELECT url, count(*) AS views, sum(n) AS n FROM views GROUP BY url');
SELECT counters.create_counter('by_url_spi', 'SELECT url, day, count(*) AS views FROM views GROUP BY url, day');
SELECT counters.create_counter('logged_urls', 'SELECT url, count(*) AS views FROM views GROUP BY url', mode => 'log');
SELECT counters.create_counter('sharded_urls', 'SELECT url, count(*) AS views FROM views GROUP BY url',
                               mode => 'sharded');
SELECT counters.create_counter('by_agent', 'SELECT agent, code, count(*) AS views FROM views GROUP BY agent, code');
-- (a trigger on a counter table makes its rows written through the executor: INSERT ... ON CONFLICT by the digest)
CREATE FUNCTION nothing() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
CREATE TRIGGER nothing AFTER INSERT OR UPDATE OR DELETE ON by_url_spi FOR EACH ROW EXECUTE FUNCTION nothing();
\d by_url
\d sharded_urls_slots
CREATE FUNCTION drift() RETURNS TABLE (counter text, differing bigint) LANGUAGE sql AS $$
	SELECT 'by_url', count(*) FROM (
		(SELECT url, views, n FROM by_url EXCEPT SELECT url, count(*), sum(n) FROM views GROUP BY url)
		UNION ALL (SELECT url, count(*), sum(n) FROM views GROUP BY url EXCEPT SELECT url, views, n FROM by_url)) d
	UNION ALL SELECT 'by_url_spi', count(*) FROM (
		(SELECT url, day, views FROM by_url_spi EXCEPT SELECT url, day, count(*) FROM views GROUP BY url, day)
		UNION ALL (SELECT url, day, count(*) FROM views GROUP BY url, day EXCEPT SELECT url, day, views FROM by_url_spi)) d
	UNION ALL SELECT 'logged_urls', count(*) FROM (
		(SELECT url, views FROM logged_urls WHERE views <> 0 EXCEPT SELECT url, count(*) FROM views GROUP BY url)
		UNION ALL (SELECT url, count(*) FROM views GROUP BY url EXCEPT SELECT url, views FROM logged_urls)) d
	UNION ALL SELECT 'sharded_urls', count(*) FROM (
		(SELECT url, views FROM sharded_urls WHERE views <> 0 EXCEPT SELECT url, count(*) FROM views GROUP BY url)
		UNION ALL (SELECT url, count(*) FROM views GROUP BY url EXCEPT SELECT url, views FROM sharded_urls)) d
	UNION ALL SELECT 'by_agent', count(*) FROM (
		(SELECT agent, code, views FROM by_agent EXCEPT SELECT agent, code, count(*) FROM views GROUP BY agent, code)
		UNION ALL (SELECT agent, code, count(*) FROM views GROUP BY agent, code EXCEPT SELECT agent, code, views FROM by_agent)) d
$$;

-- Long URLs (3,000 and 9,000 bytes), each also as a short one, some twice, in one statement and row by row; agents
-- of 5,000 bytes; codes that differ only in trailing spaces (equal as char) and NULL keys.
INSERT INTO views (url, agent, code)
SELECT url(i % 7, CASE WHEN i % 3 = 0 THEN 20 WHEN i % 3 = 1 THEN 3000 ELSE 9000 END),
       convert_to(repeat('Mozilla/5.0 ', 420) || (i % 2), 'UTF8'),
       CASE WHEN i % 4 = 0 THEN NULL ELSE 'code ' || i % 2 || repeat(' ', i % 5) END
  FROM generate_series(1, 60) i;
INSERT INTO views (url) VALUES (url(1, 3000));
INSERT INTO views (url) VALUES (url(1, 3000));
INSERT INTO views (url, n) VALUES (NULL, 5);
SELECT count(*) AS keys, min(length(url)) AS shortest, max(length(url)) AS longest FROM by_url;
SELECT count(*) AS keys, max(length(agent)) AS longest_agent, count(DISTINCT code) AS codes FROM by_agent;
SELECT * FROM drift() WHERE differing <> 0;
-- a lookup by a long key uses its hash index
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT views FROM by_url WHERE url = (SELECT url(1, 3000));
RESET enable_seqscan;
SELECT views FROM by_url WHERE url = url(1, 3000);

-- UPDATEs moving rows between long keys (and to a key of another length), DELETEs, a rolled-back savepoint.
UPDATE views SET url = url(id % 5, 9000) WHERE id % 4 = 1;
UPDATE views SET url = url(3, 4000), agent = NULL WHERE id % 6 = 2;
DELETE FROM views WHERE id % 9 = 0;
BEGIN;
SAVEPOINT s;
INSERT INTO views (url) SELECT url(42, 5000) FROM generate_series(1, 3);
ROLLBACK TO SAVEPOINT s;
UPDATE views SET url = url(id, 2800) WHERE id = 1;
COMMIT;
SELECT * FROM drift() WHERE differing <> 0;
SELECT count(*) FILTER (WHERE length(url) > 2700) AS long_keys FROM by_url;

-- Compaction folds long keys of the log and the slots into the totals (an upsert by the digest).
SELECT counters.compact() > 0 AS folded;
SELECT (SELECT count(*) FROM logged_urls_log) AS log_rows, (SELECT count(*) FROM sharded_urls_slots) AS slot_rows;
SELECT * FROM drift() WHERE differing <> 0;

-- verify() and rebuild() compare and repair long keys: a value changed behind the counters' back is found and fixed.
UPDATE by_url SET views = views + 1 WHERE url = url(2, 9000);
DELETE FROM by_url_spi WHERE url = url(4, 3000);
SELECT counter, length(key ->> 'url') AS key_length, column_name, stored, expected FROM counters.verify() ORDER BY 1, 2, 4;
SELECT counters.rebuild('by_url') AS fixed_by_url, counters.rebuild('by_url_spi') AS fixed_by_url_spi;
SELECT count(*) AS wrong FROM counters.verify();
SELECT * FROM drift() WHERE differing <> 0;

-- top() returns long keys
SELECT length(key ->> 'url') AS key_length, value FROM counters.top('by_url', 'views', 3) ORDER BY 2 DESC, 1;

-- Switching modes keeps the digests: the log's index and the slots' unique index are made from the totals' one.
SELECT counters.alter_counter('by_url', 'sharded');
INSERT INTO views (url) SELECT url(i % 3, 6000) FROM generate_series(1, 10) i;
SELECT counters.alter_counter('by_url', 'log');
INSERT INTO views (url) SELECT url(i % 3, 6000) FROM generate_series(1, 10) i;
SELECT counters.alter_counter('by_url', 'exact');
SELECT * FROM drift() WHERE differing <> 0;

-- A retype of the column declares the counters again, digests and all.
ALTER TABLE views ALTER COLUMN url TYPE varchar;
INSERT INTO views (url) VALUES (url(8, 7000)), (url(8, 7000));
SELECT * FROM drift() WHERE differing <> 0;
\d by_url

-- A key of a bounded type (varchar(100)) keeps its plain key constraint.
CREATE TABLE tags (id int PRIMARY KEY, tag varchar(100) NOT NULL);
SELECT counters.create_counter('by_tag', 'SELECT tag, count(*) AS n FROM tags GROUP BY tag');
\d by_tag

-- Window thresholds over a long prefix: the state table keeps it (unique by its digest).
CREATE TABLE hits (id serial PRIMARY KEY, url text NOT NULL, day date NOT NULL);
SELECT counters.create_counter('url_daily', 'SELECT url, day, count(*) AS hits FROM hits GROUP BY url, day');
SELECT counters.set_window_thresholds('url_daily', 'hits', '{2}', 'day', '3 days');
INSERT INTO hits (url, day) SELECT url(i % 2, 8000), current_date FROM generate_series(1, 5) i;
SELECT length(prefix ->> 'url') AS prefix_length, threshold FROM counters.window_state('url_daily') ORDER BY 1;

SET search_path = regress;
SELECT counters.drop_counter(name) FROM counters.counter WHERE source::text LIKE 'long_test.%' ORDER BY name;
DROP SCHEMA long_test CASCADE;
