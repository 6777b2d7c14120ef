--
-- target: counters kept in columns of an existing table (the counter-cache pattern), in detail. The fill, updates,
-- keys without a target row, TRUNCATE, two counters writing different columns of one table, the rejections, and
-- drop_counter leaving the user's table alone.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA target_test;
SET search_path = target_test, regress;

CREATE TABLE checks (counter regclass PRIMARY KEY, expected regclass NOT NULL);

CREATE TABLE customers (
	id          int PRIMARY KEY,
	name        text NOT NULL,
	order_count int,                     -- nullable, no default: the fill must set it
	total       numeric DEFAULT 0,
	paid_qty    bigint NOT NULL DEFAULT 0,
	note        text
);
CREATE TABLE orders (
	id          int PRIMARY KEY,
	customer_id int,                     -- no foreign key: orders may name customers that do not exist (yet)
	amount      numeric NOT NULL,
	qty         smallint NOT NULL,
	status      text NOT NULL DEFAULT 'new'
);
INSERT INTO customers VALUES (1, 'ada', 42, 42, 42, 'stale values'), (2, 'bo', NULL, NULL, 7, NULL),
                             (3, 'cy', 0, 0, 0, 'no orders');
INSERT INTO orders VALUES (1, 1, 10.00, 1, 'paid'), (2, 1, 5.50, 2, 'new'), (3, 2, 100, 3, 'paid'),
                          (4, 99, 1, 1, 'paid'),     -- customer 99 has no row in customers
                          (5, NULL, 2, 2, 'paid');   -- neither has a NULL customer

SELECT counters.create_counter('customer_orders', $$
	SELECT customer_id AS id, count(*) AS order_count, sum(amount) AS total FROM orders GROUP BY customer_id
$$, target => 'customers');
-- no table was created: the catalog names customers as target, not created by the counter
SELECT name, source, target, created_target, definition_view FROM counters.counters;
SELECT to_regclass('customer_orders') AS counter_table;
-- The fill overwrote the stale values, set 0 where a customer has no orders, and touched no other column.
SELECT * FROM customers ORDER BY id;
-- What the counter keeps: every customers row, its columns equal to a recomputation, 0 when there are no orders.
CREATE VIEW customers_counted AS SELECT id, order_count, total FROM customers;
CREATE VIEW expect_customers_counted AS
	SELECT c.id, coalesce(x.order_count, 0) AS order_count, coalesce(x.total, 0) AS total
	  FROM customers c
	  LEFT JOIN (SELECT customer_id, count(*) AS order_count, sum(amount) AS total FROM orders GROUP BY customer_id) x
	    ON x.customer_id = c.id;
INSERT INTO checks VALUES ('customers_counted', 'expect_customers_counted');
SELECT * FROM check_all();

-- updates
INSERT INTO orders VALUES (6, 3, 7.25, 1, 'new'), (7, 3, 0.75, 4, 'new');
SELECT * FROM check_all();
UPDATE orders SET customer_id = 2 WHERE id = 2;
UPDATE orders SET amount = amount * 2 WHERE customer_id = 3;
SELECT * FROM check_all();
DELETE FROM orders WHERE id = 1;
SELECT * FROM check_all();
UPDATE orders SET status = 'shipped' WHERE id = 3;        -- no counted column
SELECT * FROM check_all();
SELECT * FROM customers ORDER BY id;

-- A second counter writing other columns of the same table: paid quantities (sum of smallint into bigint).
SELECT counters.create_counter('customer_paid', $$
	SELECT customer_id AS id, sum(qty) AS paid_qty FROM orders WHERE status = 'paid' GROUP BY customer_id
$$, target => 'customers');
CREATE VIEW customers_paid AS SELECT id, paid_qty FROM customers;
CREATE VIEW expect_customers_paid AS
	SELECT c.id, coalesce(x.paid_qty, 0) AS paid_qty
	  FROM customers c
	  LEFT JOIN (SELECT customer_id, sum(qty) AS paid_qty FROM orders WHERE status = 'paid' GROUP BY customer_id) x
	    ON x.customer_id = c.id;
INSERT INTO checks VALUES ('customers_paid', 'expect_customers_paid');
SELECT * FROM check_all();
UPDATE orders SET status = 'paid' WHERE customer_id = 3;
UPDATE orders SET qty = qty + 10, customer_id = 1 WHERE id = 3;
SELECT * FROM check_all();
SELECT id, order_count, total, paid_qty FROM customers ORDER BY id;

-- Keys with no target row are skipped (by design: the counter never inserts into a table it does not own). Orders
-- of customer 99, and orders with a NULL customer, change no row; the customers that exist stay exact.
INSERT INTO orders VALUES (8, 99, 3, 1, 'paid'), (9, NULL, 4, 1, 'paid');
UPDATE orders SET amount = amount + 1 WHERE customer_id = 99 OR customer_id IS NULL;
SELECT * FROM check_all();
SELECT count(*) AS customers FROM customers;
-- A row inserted later starts from the values it is inserted with: deltas of the past were skipped, so here the
-- counter cache of customer 99 is behind its orders until the row is written with the recomputed values.
INSERT INTO customers (id, name, order_count, total) VALUES (99, 'late', 0, 0);
SELECT c.id, c.order_count, c.total, d.order_count AS recomputed_count, d.total AS recomputed_total
  FROM customers c JOIN customer_orders_definition d ON d.id = c.id WHERE c.id = 99;
UPDATE customers c SET order_count = d.order_count, total = d.total
  FROM customer_orders_definition d WHERE d.id = c.id AND c.id = 99;
UPDATE customers c SET paid_qty = d.paid_qty FROM customer_paid_definition d WHERE d.id = c.id AND c.id = 99;
SELECT * FROM check_all();
-- from now on customer 99 is counted
INSERT INTO orders VALUES (10, 99, 5, 5, 'paid');
DELETE FROM orders WHERE id = 4;
SELECT * FROM check_all();
SELECT id, order_count, total, paid_qty FROM customers WHERE id = 99;

-- TRUNCATE of the source sets the counted columns of every row to 0 and leaves the rest alone.
BEGIN;
TRUNCATE orders;
SELECT * FROM customers ORDER BY id;
SELECT * FROM check_all();
ROLLBACK;
SELECT * FROM check_all();
TRUNCATE orders;
SELECT * FROM customers ORDER BY id;
SELECT * FROM check_all();
INSERT INTO orders SELECT i, 1 + i % 4, i * 1.5, i % 3, CASE WHEN i % 2 = 0 THEN 'paid' ELSE 'new' END
  FROM generate_series(1, 20) i;
SELECT * FROM check_all();

-- A row that takes another key (UPDATE of a key column): its counter columns count for the new key, recounted, not
-- carried from the old one. Without a foreign key the orders stay with the old id (no row: skipped) and come back
-- with it; with ON UPDATE CASCADE they follow, and their deltas add to the recount (not to the values the row
-- carried: 20 instead of 10). A key set to what it was changes nothing.
UPDATE customers SET id = 50 WHERE id = 2;
SELECT * FROM check_all();
SELECT id, order_count, total, paid_qty FROM customers WHERE id IN (2, 50);
UPDATE customers SET id = 2 WHERE id = 50;
SELECT * FROM check_all();
UPDATE customers SET id = id, name = name WHERE id = 1;
SELECT * FROM check_all();
CREATE TABLE stores (id int PRIMARY KEY, purchase_count int NOT NULL DEFAULT 0);
CREATE TABLE purchases (id serial PRIMARY KEY, store_id int NOT NULL REFERENCES stores ON UPDATE CASCADE);
INSERT INTO stores SELECT g FROM generate_series(1, 3) g;
INSERT INTO purchases (store_id) SELECT 1 + g % 3 FROM generate_series(1, 30) g;
SELECT counters.create_counter('store_purchases', $$
	SELECT store_id AS id, count(*) AS purchase_count FROM purchases GROUP BY store_id$$, target => 'stores');
CREATE VIEW stores_counted AS SELECT id, purchase_count FROM stores;
CREATE VIEW expect_stores_counted AS
	SELECT s.id, (SELECT count(*) FROM purchases x WHERE x.store_id = s.id) AS purchase_count FROM stores s;
INSERT INTO checks VALUES ('stores_counted', 'expect_stores_counted');
UPDATE stores SET id = 10 WHERE id = 1;
UPDATE stores SET id = id + 100;
SELECT * FROM stores ORDER BY id;
SELECT * FROM check_all();
SELECT tgname, tgattr FROM pg_trigger WHERE tgrelid = 'stores'::regclass AND tgname LIKE 'counters%';
SELECT counters.drop_counter('store_purchases');
SELECT tgname FROM pg_trigger WHERE tgrelid = 'stores'::regclass AND tgname LIKE 'counters%';
DELETE FROM checks WHERE counter = 'stores_counted'::regclass;

-- A composite key: a unique constraint on exactly the key columns, in any order.
CREATE TABLE customer_status (status text NOT NULL, customer_id int NOT NULL, n int NOT NULL DEFAULT 0,
                              UNIQUE (customer_id, status));
INSERT INTO customer_status (customer_id, status) VALUES (1, 'paid'), (1, 'new'), (2, 'paid'), (2, 'new'), (5, 'new');
SELECT counters.create_counter('status_counts', $$
	SELECT status, customer_id, count(*) AS n FROM orders GROUP BY customer_id, status
$$, target => 'customer_status');
CREATE VIEW customer_status_counted AS SELECT status, customer_id, n FROM customer_status;
CREATE VIEW expect_customer_status_counted AS
	SELECT s.status, s.customer_id, count(o.id) AS n
	  FROM customer_status s LEFT JOIN orders o ON o.customer_id = s.customer_id AND o.status = s.status
	 GROUP BY s.status, s.customer_id;
INSERT INTO checks VALUES ('customer_status_counted', 'expect_customer_status_counted');
SELECT * FROM check_all();
UPDATE orders SET status = 'new' WHERE customer_id = 2;
UPDATE orders SET customer_id = 5 WHERE id IN (1, 2, 3);
SELECT * FROM check_all();
SELECT * FROM customer_status ORDER BY customer_id, status;

-- Rejections: a column the target lacks (42703), a value column that is not of an integer or numeric type (42804),
-- key columns that are not a unique key of the target (42P17): no unique index, a partial one, one on more columns,
-- an expression index.
CREATE TABLE ledger (account int, label text, n int, amount float8, total numeric);
INSERT INTO ledger VALUES (1, 'a', 5, 0, 5), (2, 'b', 6, 0, 6);
-- What each rejection must leave as it is, ledger's rows too (rejected(:'SQLSTATE') says what it left behind;
-- setup.sql).
SELECT baseline('ledger');
SELECT counters.create_counter('bad', 'SELECT customer_id AS account, count(*) AS orders FROM orders GROUP BY customer_id', 'ledger');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT customer_id AS account, count(*) AS label FROM orders GROUP BY customer_id', 'ledger');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT customer_id AS account, sum(amount) AS amount FROM orders GROUP BY customer_id', 'ledger');
SELECT * FROM rejected(:'SQLSTATE');
-- a sum of numeric into an integer column (42804): it would be rounded at every write
SELECT counters.create_counter('bad', 'SELECT customer_id AS account, sum(amount) AS n FROM orders GROUP BY customer_id', 'ledger');
SELECT * FROM rejected(:'SQLSTATE');
SELECT counters.create_counter('bad', 'SELECT customer_id AS account, count(*) AS n FROM orders GROUP BY customer_id', 'ledger');
SELECT * FROM rejected(:'SQLSTATE');
CREATE UNIQUE INDEX ledger_account_partial ON ledger (account) WHERE account > 0;
CREATE UNIQUE INDEX ledger_account_label ON ledger (account, label);
CREATE UNIQUE INDEX ledger_account_expr ON ledger ((account + 0));
SELECT baseline('ledger');
SELECT counters.create_counter('bad', 'SELECT customer_id AS account, count(*) AS n FROM orders GROUP BY customer_id', 'ledger');
SELECT * FROM rejected(:'SQLSTATE');
-- a unique index on exactly the key columns makes it acceptable
CREATE UNIQUE INDEX ledger_account ON ledger (account);
SELECT counters.create_counter('ledger_orders', 'SELECT customer_id AS account, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer_id', 'ledger');
CREATE VIEW ledger_counted AS SELECT account, n, total FROM ledger;
CREATE VIEW expect_ledger_counted AS
	SELECT l.account, count(o.id) AS n, coalesce(sum(o.amount), 0) AS total
	  FROM ledger l LEFT JOIN orders o ON o.customer_id = l.account GROUP BY l.account;
INSERT INTO checks VALUES ('ledger_counted', 'expect_ledger_counted');
SELECT * FROM check_all();

-- drop_counter does not drop the user's table: customers keeps its rows and columns, with the last values; the
-- view and (once no counter of orders remains) the triggers go; writes no longer change customers.
DELETE FROM checks;
SELECT counters.drop_counter('customer_orders');
SELECT counters.drop_counter('customer_paid');
SELECT to_regclass('customers') AS customers, to_regclass('customer_orders_definition') AS "view";
SELECT * FROM customers ORDER BY id;
SELECT count(*) AS capture_triggers FROM pg_trigger WHERE tgrelid = 'orders'::regclass;   -- status_counts, ledger_orders
SELECT counters.drop_counter('status_counts');
SELECT counters.drop_counter('ledger_orders');
SELECT count(*) AS capture_triggers FROM pg_trigger WHERE tgrelid = 'orders'::regclass;
SELECT to_regclass('customer_status') AS customer_status, to_regclass('ledger') AS ledger;
INSERT INTO orders VALUES (1000, 1, 1000, 1, 'paid');
TRUNCATE orders;
SELECT * FROM customers ORDER BY id;
SELECT count(*) AS catalog_rows FROM counters.counter;

-- Touch: a timestamp column of the target set to the transaction's start time when the counter changes the row's
-- values (cache keys); rows whose values do not change keep theirs.
CREATE TABLE shops (id int PRIMARY KEY, sales bigint NOT NULL DEFAULT 0, updated_at timestamptz, note text,
                    made date);
CREATE TABLE sales (id serial PRIMARY KEY, shop_id int NOT NULL, amount int NOT NULL);
INSERT INTO shops (id) VALUES (1), (2), (3);
SELECT counters.create_counter('shop_sales', 'SELECT shop_id AS id, count(*) AS sales FROM sales GROUP BY shop_id',
                               'shops');
SELECT counters.set_touch('shop_sales', 'updated_at');
SELECT name, options -> 'touch' AS touch FROM counters.counter WHERE name = 'shop_sales';
BEGIN;
INSERT INTO sales (shop_id, amount) VALUES (1, 5), (1, 7), (2, 1);
SELECT id, sales, updated_at = transaction_timestamp() AS touched_now, updated_at IS NULL AS untouched
  FROM shops ORDER BY id;
COMMIT;
UPDATE shops SET updated_at = NULL;
-- an UPDATE that moves nothing between shops changes no counter value: no row is touched
UPDATE sales SET amount = amount + 1;
SELECT id, updated_at IS NULL AS untouched FROM shops ORDER BY id;
-- a move touches both shops; TRUNCATE touches the rows it zeroes
UPDATE sales SET shop_id = 3 WHERE shop_id = 2;
SELECT id, sales, updated_at IS NOT NULL AS touched FROM shops ORDER BY id;
UPDATE shops SET updated_at = NULL;
TRUNCATE sales;
SELECT id, sales, updated_at IS NOT NULL AS touched FROM shops ORDER BY id;
-- refusals: not a timestamp (text, date, the counter's own bigint column), no such column, a counter with a table of
-- its own, another role
SELECT counters.set_touch('shop_sales', 'note');
\echo SQLSTATE :SQLSTATE
SELECT counters.set_touch('shop_sales', 'made');
\echo SQLSTATE :SQLSTATE
SELECT counters.set_touch('shop_sales', 'sales');
\echo SQLSTATE :SQLSTATE
SELECT counters.set_touch('shop_sales', 'missing');
\echo SQLSTATE :SQLSTATE
SELECT counters.create_counter('own_table', 'SELECT shop_id, count(*) AS n FROM sales GROUP BY shop_id');
SELECT counters.set_touch('own_table', 'updated_at');
\echo SQLSTATE :SQLSTATE
SET ROLE NONE;
CREATE ROLE counters_touch_stranger;
GRANT USAGE ON SCHEMA target_test TO counters_touch_stranger;
SET ROLE counters_touch_stranger;
SELECT counters.set_touch('shop_sales', NULL);
\echo SQLSTATE :SQLSTATE
SET ROLE NONE;
DROP OWNED BY counters_touch_stranger;
DROP ROLE counters_touch_stranger;
RESET ROLE;
-- NULL removes it
SELECT counters.set_touch('shop_sales', NULL);
UPDATE shops SET updated_at = NULL;
INSERT INTO sales (shop_id, amount) VALUES (1, 1);
SELECT id, sales, updated_at IS NULL AS untouched FROM shops WHERE id = 1;
SELECT * FROM counters.verify('shop_sales');
SELECT counters.drop_counter('own_table');
SELECT counters.drop_counter('shop_sales');

SET client_min_messages = warning;
DROP SCHEMA target_test CASCADE;
RESET client_min_messages;
RESET search_path;
