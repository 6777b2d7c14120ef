--
-- odd_columns: counters whose columns are unusual (found by definition fuzzing): a composite-type key, long
-- unicode names that share their first 60 bytes, names like the internal aliases of verify() (k1, s1, e1,
-- in_target), a value declared before the keys. In every mode, after writes that move rows between keys, the
-- counter equals a recount of its definition (compared here as plain text rows) and verify() agrees.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
-- (rebuild() reports progress with timings in NOTICEs)
SET client_min_messages = warning;
CREATE SCHEMA odd_test;
SET search_path = odd_test;
CREATE TYPE place AS (city text, floor int);
CREATE TABLE visits (id int PRIMARY KEY, at place, k1 int, y int);
INSERT INTO visits SELECT g, CASE WHEN g % 5 = 0 THEN NULL WHEN g % 7 = 0 THEN ROW(NULL, NULL)::place
                                  ELSE ROW('c' || g % 3, g % 2)::place END, g % 4, g
  FROM generate_series(1, 200) g;

CREATE FUNCTION recount_differs(counter text) RETURNS TABLE (side text, row_value text)
LANGUAGE plpgsql AS $$
DECLARE
	c record;
BEGIN
	SELECT k.target, k.query INTO c FROM counters.counter k WHERE k.name = counter;
	RETURN QUERY EXECUTE format(
		'SELECT ''counter only'', t::text FROM (TABLE %1$s EXCEPT ALL SELECT * FROM %2$s q) t
		 UNION ALL
		 SELECT ''recomputed only'', t::text FROM (SELECT * FROM %2$s q EXCEPT ALL TABLE %1$s) t ORDER BY 1, 2',
		c.target, c.query);
END $$;

DO $$
DECLARE
	m text;
BEGIN
	FOREACH m IN ARRAY ARRAY['exact', 'log', 'sharded'] LOOP
		PERFORM counters.create_counter('by_place_' || m,
			'SELECT at, count(*) AS visits, sum(k1) AS k1 FROM visits GROUP BY at', mode => m);
		PERFORM counters.create_counter('long_names_' || m,
			'SELECT sum(id) AS "Üxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx1",
			        k1 AS in_target,
			        count(*) AS "Üxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx2",
			        count(y) AS s1,
			        (at).floor AS e1
			   FROM visits GROUP BY k1, (at).floor', mode => m);
	END LOOP;
END $$;
SELECT name, mode FROM counters.counters ORDER BY name;

-- writes: new rows, rows moving between composite keys (to and from NULL and ROW(NULL, NULL)), deletes, in bulk and
-- one row at a time
INSERT INTO visits SELECT g, ROW('c' || g % 2, 1)::place, g % 3, g FROM generate_series(201, 260) g;
UPDATE visits SET at = ROW('c0', 0)::place WHERE id % 6 = 0;
UPDATE visits SET at = NULL WHERE id % 11 = 0;
UPDATE visits SET at = ROW(NULL, NULL)::place, k1 = k1 + 1 WHERE id % 13 = 0;
DELETE FROM visits WHERE id % 9 = 0;
UPDATE visits SET at = ROW('c9', 9)::place WHERE id = 10;
INSERT INTO visits VALUES (1000, NULL, 1, 1), (1001, ROW(NULL, NULL)::place, 2, 2);

SELECT name, (SELECT count(*) FROM recount_differs(name)) AS differing_rows FROM counters.counter ORDER BY name;
SELECT * FROM counters.verify();
SELECT counters.compact(name) >= 0 AS compacted FROM counters.counter WHERE mode <> 'exact' ORDER BY name;
SELECT name, (SELECT count(*) FROM recount_differs(name)) AS differing_rows FROM counters.counter ORDER BY name;
SELECT * FROM counters.verify();

-- verify() finds a wrong value in a column whose name collides with its internal names once cut to 63 bytes
UPDATE long_names_exact SET "Üxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx2" = 0
 WHERE in_target = 1 AND e1 = 1;
SELECT counter, key, column_name, stored = 0 AS zeroed, expected > 0 AS expected_some
  FROM counters.verify('long_names_exact');
SELECT counter, last_verify_wrong FROM counters.stats WHERE counter = 'long_names_exact';
SELECT counters.rebuild('long_names_exact');
SELECT * FROM counters.verify('long_names_exact');
SELECT counter, last_verify_wrong FROM counters.stats WHERE counter = 'long_names_exact';

-- in a read-only transaction (as on a standby) verify() works and records nothing
SELECT verified_at AS before_read_only FROM counters.maintenance WHERE counter = 'long_names_exact' \gset
UPDATE long_names_exact SET "Üxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx2" = 0
 WHERE in_target = 1 AND e1 = 1;
BEGIN TRANSACTION READ ONLY;
SELECT counter, column_name FROM counters.verify('long_names_exact');
COMMIT;
SELECT verified_at = :'before_read_only' AS unchanged, verify_wrong AS wrong FROM counters.maintenance WHERE counter = 'long_names_exact';
SELECT counters.rebuild('long_names_exact');

-- mode switches keep them exact
SELECT counters.alter_counter('by_place_log', 'exact');
SELECT counters.alter_counter('by_place_exact', 'sharded');
SELECT counters.alter_counter('long_names_sharded', 'exact');
SELECT counters.alter_counter('long_names_sharded', 'log');
UPDATE visits SET at = ROW('c1', 1)::place, k1 = 0 WHERE id % 4 = 1;
SELECT name, mode, (SELECT count(*) FROM recount_differs(name)) AS differing_rows FROM counters.counter ORDER BY name;
SELECT * FROM counters.verify();

SELECT counters.drop_counter(name) FROM counters.counter ORDER BY name;
SELECT count(*) AS maintenance_rows_left FROM counters.maintenance;
RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA odd_test CASCADE;
