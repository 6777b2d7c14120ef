--
-- generated_columns: definitions over generated columns of the source. From PostgreSQL 18 on a generated column is
-- virtual unless declared STORED: computed when read and never stored, so the rows the triggers see hold nothing for
-- it; the counter computes it from the columns it is generated from, as a query does. Before 18 the same table has
-- stored columns (the only kind there is). Every check compares the counters with a recount of the source.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA generated_test;
SET search_path = generated_test, regress;
CREATE TABLE checks (counter regclass PRIMARY KEY, expected regclass NOT NULL);

-- (VIRTUAL from PostgreSQL 18 on, STORED before)
SELECT CASE WHEN current_setting('server_version_num')::int >= 180000 THEN 'VIRTUAL' ELSE 'STORED' END
       AS generated \gset
CREATE TABLE items (
	id    int PRIMARY KEY,
	shop  int NOT NULL,
	price numeric NOT NULL,
	qty   int NOT NULL,
	total numeric GENERATED ALWAYS AS (price * qty) :generated,
	size  text COLLATE "C" GENERATED ALWAYS AS (CASE WHEN qty >= 10 THEN 'bulk' ELSE 'single' END) :generated,
	big   boolean GENERATED ALWAYS AS (price * qty >= 100) :generated
);
INSERT INTO items (id, shop, price, qty) SELECT g, 1 + g % 3, g * 1.5, g % 12 FROM generate_series(1, 30) g;

-- A generated key, a sum of a generated value, a FILTER and a WHERE on generated columns; in each mode.
SELECT counters.create_counter('by_size', $$
	SELECT shop, size, count(*) AS items, sum(total) AS total, count(*) FILTER (WHERE big) AS big
	  FROM items WHERE total > 0 GROUP BY shop, size
$$);
SELECT counters.create_counter('by_size_log', $$
	SELECT size, sum(total) AS total FROM items GROUP BY size
$$, mode => 'log');
SELECT counters.create_counter('by_size_sharded', $$
	SELECT size, count(*) FILTER (WHERE big) AS big FROM items GROUP BY size
$$, mode => 'sharded');
CREATE VIEW by_size_recount AS
	SELECT shop, size, count(*) AS items, sum(total) AS total, count(*) FILTER (WHERE big) AS big
	  FROM items WHERE total > 0 GROUP BY shop, size;
CREATE VIEW by_size_log_recount AS
	SELECT size, sum(total) AS total FROM items GROUP BY size HAVING sum(total) <> 0;
CREATE VIEW by_size_sharded_recount AS
	SELECT size, count(*) FILTER (WHERE big) AS big FROM items GROUP BY size HAVING count(*) FILTER (WHERE big) <> 0;
INSERT INTO checks VALUES ('by_size', 'by_size_recount'), ('by_size_log', 'by_size_log_recount'),
                          ('by_size_sharded', 'by_size_sharded_recount');
SELECT * FROM by_size ORDER BY shop, size;
SELECT * FROM check_all();

-- Writes that change the generated columns through the columns they come from.
INSERT INTO items (id, shop, price, qty) VALUES (100, 1, 20, 10), (101, 2, 0.5, 1);
UPDATE items SET qty = qty + 5 WHERE id % 4 = 0;
UPDATE items SET price = price * 2 WHERE shop = 2;
UPDATE items SET qty = 0 WHERE id = 100;
DELETE FROM items WHERE id % 7 = 0;
SELECT * FROM by_size ORDER BY shop, size;
SELECT * FROM check_all();
SELECT counters.compact() >= 0 AS compacted;
SELECT * FROM check_all();
SELECT * FROM counters.verify();

SELECT counters.drop_counter('by_size');
SELECT counters.drop_counter('by_size_log');
SELECT counters.drop_counter('by_size_sharded');
RESET search_path;
DROP SCHEMA generated_test CASCADE;
