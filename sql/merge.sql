--
-- merge: a statement that writes most of an exact counter's keys finds their rows through one ordered scan of the
-- key index, merged with its sorted keys, instead of a descent of the index per key (direct.cpp, DirectMergeAdd);
-- keys the scan does not find there (new keys, rows being changed) take the path of every other key. Keys of fast
-- types and of types compared by their functions (varchar in "C" and in the database's collation, numeric, bool),
-- NULL keys, keys that come back to zero (their rows deleted), new keys among existing ones, rows written earlier in
-- the same transaction, and a statement after its own earlier statement. After each step every counter is compared
-- with a recount of its source.
--
\set VERBOSITY terse
CREATE SCHEMA merge_test;
SET search_path = merge_test, regress;
CREATE TABLE ev (id serial PRIMARY KEY, a int, e boolean NOT NULL, b varchar(20) COLLATE "C", c varchar(20),
                 d numeric, n int NOT NULL DEFAULT 1);
INSERT INTO ev (a, e, b, c, d, n)
SELECT CASE WHEN g % 97 = 0 THEN NULL ELSE g % 1200 END, g % 2 = 0, 'k' || (g % 700), CASE WHEN g % 89 = 0 THEN NULL
       ELSE chr(65 + g % 26) || chr(97 + g % 23) || (g % 40) END, (g % 300) / 7.0, g % 5
  FROM generate_series(1, 4000) g;
SELECT counters.create_counter('m_ints', 'SELECT a, e, count(*) AS rows, sum(n) AS n FROM ev GROUP BY a, e');
SELECT counters.create_counter('m_texts', 'SELECT b, count(*) AS rows, sum(n) AS n FROM ev GROUP BY b');
SELECT counters.create_counter('m_mixed', 'SELECT c, d, count(*) AS rows, sum(n) AS n FROM ev GROUP BY c, d');
CREATE FUNCTION drift() RETURNS TABLE (counter text, differing bigint) LANGUAGE sql AS $$
	SELECT 'm_ints', count(*) FROM (
		(SELECT a, e, rows, n FROM m_ints EXCEPT ALL SELECT a, e, count(*), sum(n) FROM ev GROUP BY a, e)
		UNION ALL (SELECT a, e, count(*), sum(n) FROM ev GROUP BY a, e EXCEPT ALL SELECT a, e, rows, n FROM m_ints)) x
	UNION ALL
	SELECT 'm_texts', count(*) FROM (
		(SELECT b, rows, n FROM m_texts EXCEPT ALL SELECT b, count(*), sum(n) FROM ev GROUP BY b)
		UNION ALL (SELECT b, count(*), sum(n) FROM ev GROUP BY b EXCEPT ALL SELECT b, rows, n FROM m_texts)) x
	UNION ALL
	SELECT 'm_mixed', count(*) FROM (
		(SELECT c, d, rows, n FROM m_mixed EXCEPT ALL SELECT c, d, count(*), sum(n) FROM ev GROUP BY c, d)
		UNION ALL (SELECT c, d, count(*), sum(n) FROM ev GROUP BY c, d EXCEPT ALL SELECT c, d, rows, n FROM m_mixed)) x
$$;
SELECT (SELECT count(*) FROM m_ints) AS int_keys, (SELECT count(*) FROM m_texts) AS text_keys,
       (SELECT count(*) FROM m_mixed) AS mixed_keys;
-- every key's values change (every row)
UPDATE ev SET n = n + 1;
SELECT * FROM drift();
-- a third of the rows move to another key: keys emptied (rows deleted), keys created, the rest changed
UPDATE ev SET a = a + 1500, b = b || 'x', c = lower(c), d = d + 1000 WHERE id % 3 = 0;
SELECT * FROM drift();
-- and back, with NULL keys made and unmade
UPDATE ev SET a = CASE WHEN a IS NULL THEN id % 1200 WHEN id % 11 = 0 THEN NULL ELSE a - 1500 END,
              b = CASE WHEN b LIKE '%x' THEN left(b, -1) ELSE b END, d = CASE WHEN d >= 1000 THEN d - 1000 ELSE d END
 WHERE id % 3 = 0 OR a IS NULL;
SELECT * FROM drift();
-- new rows: existing keys and new ones, interleaved
INSERT INTO ev (a, e, b, c, d, n)
SELECT CASE WHEN g % 2 = 0 THEN g % 1200 ELSE 5000 + g END, g % 3 = 0, 'k' || (g % 1400), 'Q' || (g % 900),
       (g % 600) / 7.0, 3
  FROM generate_series(1, 3000) g;
SELECT * FROM drift();
-- rows written earlier in the same transaction, then every key again; a statement after its own earlier statement
BEGIN;
UPDATE ev SET n = n + 10 WHERE id % 7 = 0;
UPDATE ev SET n = n * 2;
UPDATE ev SET n = n - 1;
COMMIT;
SELECT * FROM drift();
-- most keys come back to zero: their rows go
DELETE FROM ev WHERE id % 10 <> 0;
SELECT * FROM drift();
SELECT count(*) > 0 AS rows_left FROM m_ints;
-- rolled back: nothing of it stays
BEGIN;
UPDATE ev SET n = n + 100;
ROLLBACK;
SELECT * FROM drift();
SELECT counters.drop_counter(name) FROM counters.counter WHERE name LIKE 'm\_%' ORDER BY name;
RESET search_path;
DROP SCHEMA merge_test CASCADE;
