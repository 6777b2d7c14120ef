--
-- deputy: authorize, then act. A tenant with nothing but CREATE on one schema tries to make the extension run its code
-- as another role -- the confused deputy: the extension checked *who* a counter's code runs as, not *that the caller
-- was allowed to make it run as that role*. Each attack plants an IMMUTABLE function (planning folds it, i.e. runs
-- it) that records whose rights it ran with, tries to make the tenant a superuser and to read another tenant's rows;
-- after each, the record must be empty or show the tenant alone. Then what reading a catalog row, adopting a
-- description and writing under the replica role must never do: stop everyone, or miss a write silently.
-- (Runs as counters_app; SET ROLE NONE is the superuser.)
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA dep_test;
SET search_path = dep_test, regress;
SET ROLE NONE; CREATE ROLE counters_dep_tenant; CREATE ROLE counters_dep_victim; RESET ROLE;
GRANT USAGE, CREATE ON SCHEMA dep_test TO counters_dep_tenant, counters_dep_victim;
-- A table a migration created as the superuser; where the planted code writes what it did (anyone may).
SET ROLE NONE;
CREATE TABLE dep_test.ledger (id int PRIMARY KEY, amount int NOT NULL);
INSERT INTO dep_test.ledger VALUES (1, 10), (2, 20);
CREATE TABLE dep_test.audit (what text, who name, superuser boolean);
GRANT SELECT, INSERT ON dep_test.audit TO PUBLIC;
RESET ROLE;
-- Another tenant's secret.
SET ROLE counters_dep_victim;
CREATE TABLE diary (id int PRIMARY KEY, secret text NOT NULL);
INSERT INTO diary VALUES (1, 'the victim''s secret');
RESET ROLE;
-- The application's counters (counters_app), which the attacks target too.
CREATE TABLE orders (id int PRIMARY KEY, customer int NOT NULL, amount int NOT NULL);
INSERT INTO orders SELECT g, g % 3, g FROM generate_series(1, 9) g;
SELECT counters.create_counter('dep_orders', 'SELECT customer, count(*) AS n, sum(amount) AS amount FROM orders GROUP BY customer');
CREATE VIEW dep_orders_expected AS SELECT customer, count(*) AS n, sum(amount) AS amount FROM orders GROUP BY customer;
GRANT INSERT ON orders TO PUBLIC;

SET ROLE counters_dep_tenant;
CREATE FUNCTION attack() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO dep_test.audit SELECT 'ran', current_user, r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
	BEGIN
		EXECUTE 'ALTER ROLE counters_dep_tenant SUPERUSER';
	EXCEPTION WHEN OTHERS THEN NULL;
	END;
	BEGIN
		INSERT INTO dep_test.audit SELECT 'read ' || secret, current_user, false FROM dep_test.diary;
	EXCEPTION WHEN OTHERS THEN NULL;
	END;
END $$;
-- (IMMUTABLE, wrapping the attack: planning a definition that calls it on a constant runs it)
CREATE FUNCTION planted(x int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	PERFORM dep_test.attack();
	RETURN x;
END $$;
CREATE TABLE mine (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO mine VALUES (1, 1), (2, 2);
RESET ROLE;

--
-- 1. create_counter() over a table the caller does not own: refused before the definition is parsed or planned as
--    anyone -- whichever relation it names, wherever (the counted table, a join, a subquery, a WITH query, the target).
--
SET ROLE counters_dep_tenant;
SELECT * FROM regress.errors(
	$$SELECT counters.create_counter('d_ledger', 'SELECT id, count(*) AS n FROM dep_test.ledger WHERE dep_test.planted(0) = 0 GROUP BY id')$$,
	$$SELECT counters.create_counter('d_diary', 'SELECT id, count(*) AS n FROM dep_test.diary WHERE dep_test.planted(0) = 0 GROUP BY id')$$,
	$$SELECT counters.create_counter('d_orders', 'SELECT customer, count(*) AS n FROM dep_test.orders WHERE dep_test.planted(0) = 0 GROUP BY customer')$$,
	$$SELECT counters.create_counter('d_join', 'SELECT m.id, count(*) AS n FROM dep_test.mine m JOIN dep_test.ledger l ON m.id = l.id WHERE dep_test.planted(0) = 0 GROUP BY m.id')$$,
	$$SELECT counters.create_counter('d_sub', 'SELECT id, count(*) AS n FROM dep_test.mine WHERE id IN (SELECT id FROM dep_test.diary WHERE dep_test.planted(0) = 0) GROUP BY id')$$,
	$$SELECT counters.create_counter('d_with', 'WITH l AS (SELECT * FROM dep_test.ledger) SELECT id, count(*) AS n FROM l WHERE dep_test.planted(0) = 0 GROUP BY id')$$,
	$$SELECT counters.create_counter('d_target', 'SELECT id, count(*) AS amount FROM dep_test.mine WHERE dep_test.planted(0) = 0 GROUP BY id', target => 'dep_test.ledger')$$,
	$$SELECT counters.create_counter('d_gone', 'SELECT id, count(*) AS n FROM dep_test.nothing_here WHERE dep_test.planted(0) = 0 GROUP BY id')$$);
-- (an alter_counter() with a new definition over another's table: refused the same way; the tenant's own counter)
SELECT counters.create_counter('d_mine', 'SELECT v, count(*) AS n FROM mine GROUP BY v');
SELECT * FROM regress.errors(
	$$SELECT counters.alter_counter('d_mine', definition => 'SELECT id AS v, count(*) AS n FROM dep_test.ledger WHERE dep_test.planted(0) = 0 GROUP BY id')$$);
RESET ROLE;
-- nothing ran, as anyone
SELECT what, who, superuser FROM audit ORDER BY 1, 2;
SELECT rolsuper AS tenant_is_superuser FROM pg_roles WHERE rolname = 'counters_dep_tenant';
-- the tenant's own table: its code runs as the tenant, restricted (planning it here, writing it later)
SET ROLE counters_dep_tenant;
SELECT counters.create_counter('d_own', 'SELECT v, count(*) AS n FROM mine WHERE dep_test.planted(0) = 0 GROUP BY v');
RESET ROLE;
SELECT what, who, superuser FROM audit GROUP BY 1, 2, 3 ORDER BY 1, 2;
SET ROLE NONE; TRUNCATE dep_test.audit; RESET ROLE;

--
-- 2. A forged description on the tenant's own view. counters.attach() no longer puts triggers on a table without
--    counters; the tenant puts counters.capture() there by hand, comments a view over its table as a counter whose
--    target is the catalog (or the superuser's ledger), and writes: the description is not honoured (its view's owner
--    may not declare a counter over those), a WARNING names the view, and the planted code never runs.
--
SET ROLE counters_dep_tenant;
CREATE TABLE bait (id int PRIMARY KEY, v int NOT NULL);
SELECT * FROM regress.errors($$SELECT counters.attach('bait')$$);
CREATE TRIGGER counters_insert AFTER INSERT ON bait REFERENCING NEW TABLE AS counters_new
	FOR EACH STATEMENT EXECUTE FUNCTION counters.capture();
CREATE VIEW forged AS SELECT id, count(*) AS n FROM dep_test.bait WHERE dep_test.planted(0) = 0 GROUP BY id;
COMMENT ON VIEW forged IS 'counters: {"name": "d_forged", "mode": "exact", "target": "counters.counter", "owns_target": false}';
CREATE VIEW forged_ledger AS SELECT id, count(*) AS amount FROM dep_test.bait WHERE dep_test.planted(0) = 0 GROUP BY id;
COMMENT ON VIEW forged_ledger IS 'counters: {"name": "d_forged_ledger", "mode": "exact", "target": "dep_test.ledger", "owns_target": false}';
CREATE VIEW malformed AS SELECT id FROM dep_test.bait;
COMMENT ON VIEW malformed IS 'counters: {';
CREATE VIEW nameless AS SELECT id, count(*) AS n FROM dep_test.bait GROUP BY id;
COMMENT ON VIEW nameless IS 'counters: {"name": "", "mode": "exact", "target": "dep_test.bait", "owns_target": false}';
INSERT INTO bait VALUES (1, 1);
\echo SQLSTATE :SQLSTATE
RESET ROLE;
SELECT what, who, superuser FROM audit ORDER BY 1, 2;
SELECT rolsuper AS tenant_is_superuser FROM pg_roles WHERE rolname = 'counters_dep_tenant';
SELECT name FROM counters.counter WHERE name LIKE 'd\_forged%' OR name = '';

--
-- 3. A restore, then the superuser's first write. The catalog's rows are not dumped; a restored database declares each
--    counter again from its description. Here the rows are gone as after a restore (the superuser deletes them; a new
--    session compiles nothing yet), and the tenant has put descriptions on views over the application's table (a view
--    needs no privilege on the table it reads): one naming the superuser's ledger as its target, one the application's
--    own counter table, one a table of the tenant's own, one squatting the application's counter's name. The
--    superuser's first write declares the application's counter again as the application, honours none of the
--    tenant's, and counts.
--
SET ROLE counters_dep_tenant;
CREATE TABLE tenant_counts (customer int PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
INSERT INTO tenant_counts SELECT g, 0 FROM generate_series(0, 2) g;
CREATE VIEW over_orders AS SELECT customer AS id, count(*) AS amount FROM dep_test.orders WHERE dep_test.planted(0) = 0 GROUP BY customer;
COMMENT ON VIEW over_orders IS 'counters: {"name": "d_over_ledger", "mode": "exact", "target": "dep_test.ledger", "owns_target": false}';
CREATE VIEW over_orders2 AS SELECT customer, count(*) AS n, sum(amount) AS amount FROM dep_test.orders WHERE dep_test.planted(0) = 0 GROUP BY customer;
COMMENT ON VIEW over_orders2 IS 'counters: {"name": "d_over_app", "mode": "exact", "target": "dep_test.dep_orders", "owns_target": true}';
CREATE VIEW over_orders3 AS SELECT customer, count(*) AS n FROM dep_test.orders WHERE dep_test.planted(0) = 0 GROUP BY customer;
COMMENT ON VIEW over_orders3 IS 'counters: {"name": "d_over_mine", "mode": "exact", "target": "dep_test.tenant_counts", "owns_target": false}';
CREATE VIEW over_orders4 AS SELECT customer, count(*) AS n, sum(amount) AS amount FROM dep_test.orders WHERE dep_test.planted(0) = 0 GROUP BY customer;
COMMENT ON VIEW over_orders4 IS 'counters: {"name": "dep_orders", "mode": "exact", "target": "dep_test.tenant_counts", "owns_target": false}';
RESET ROLE;
SELECT pg_catalog.obj_description('dep_orders_definition'::regclass, 'pg_class') LIKE 'counters: {%' AS described;
SET ROLE NONE; DELETE FROM counters.counter WHERE name = 'dep_orders'; RESET ROLE;
\c -
SET search_path = dep_test, regress;
SET ROLE NONE;
INSERT INTO orders VALUES (10, 1, 100);
RESET ROLE;
SELECT name, source, target, owns_target, pg_get_userbyid(c.relowner) AS owner
  FROM counters.counter k JOIN pg_class c ON c.oid = k.target WHERE name LIKE 'd%' ORDER BY name;
SELECT * FROM regress.diff('dep_orders', 'dep_orders_expected');
SELECT what, who, superuser FROM audit ORDER BY 1, 2;
SELECT rolsuper AS tenant_is_superuser FROM pg_roles WHERE rolname = 'counters_dep_tenant';
SET ROLE NONE; SELECT * FROM dep_test.ledger ORDER BY id; RESET ROLE;
-- the tenant's writes to its own table ran its own code as itself (never anyone else)
SET ROLE counters_dep_tenant;
INSERT INTO mine VALUES (3, 1);
RESET ROLE;
SELECT what, who, superuser FROM audit GROUP BY 1, 2, 3 ORDER BY 1, 2;
SET ROLE NONE; TRUNCATE dep_test.audit; RESET ROLE;
SET ROLE counters_dep_tenant;
DROP VIEW over_orders, over_orders2, over_orders3, over_orders4, forged, forged_ledger, malformed, nameless;
RESET ROLE;

--
-- 4. The catalog: no role may write it (the restore needs no write), and a row written by hand (a superuser's typo,
--    or a row an earlier version let any role write) stops only its own counter, never every DDL statement, the
--    other counters, compact(), verify() or the worker.
--
SET ROLE counters_dep_tenant;
INSERT INTO counters.counter (name, source, target, query, owns_target, options)
	VALUES ('d_poison', 'dep_test.mine', 'dep_test.d_mine', 'dep_test.d_mine_definition', true, '{"max_slots": 1e30}');
\echo SQLSTATE :SQLSTATE
SELECT has_table_privilege('counters.counter', 'INSERT') AS may_insert, has_table_privilege('counters.counter', 'UPDATE') AS may_update;
RESET ROLE;
-- a superuser's INSERT is a declaration, validated as one
SET ROLE NONE;
INSERT INTO counters.counter (name, source, target, query, owns_target, options)
	VALUES ('d_poison', 'dep_test.mine', 'dep_test.d_mine', 'dep_test.d_mine_definition', true, '{"max_slots": 1e30}');
\echo SQLSTATE :SQLSTATE
-- a superuser's UPDATE by hand is not checked: the tenant's counter gets options no function would write
UPDATE counters.counter SET options = '{"max_slots": 1e30, "bounds": {"n": {"min": "lots"}}}' WHERE name = 'd_mine';
RESET ROLE;
\c -
SET search_path = dep_test, regress;
-- DDL, the other counters and maintenance go on
CREATE TABLE after_poison (id int);
ALTER TABLE orders ADD COLUMN note text;
INSERT INTO orders VALUES (11, 2, 5);
SELECT * FROM regress.diff('dep_orders', 'dep_orders_expected');
SELECT counters.compact() >= 0 AS compacted;
SELECT counter FROM counters.verify();
SELECT name FROM counters.counters WHERE name LIKE 'd\_%' ORDER BY name;
-- the counter with the bad row fails, naming itself; dropping it works
SET ROLE counters_dep_tenant;
INSERT INTO mine VALUES (4, 2);
\echo SQLSTATE :SQLSTATE
SELECT counters.drop_counter('d_mine');
INSERT INTO mine VALUES (4, 2);
RESET ROLE;

--
-- 5. Writes under the replica role (a bulk loader with session_replication_role = replica; the apply worker) count
--    or refuse loudly: a sink's rows are counted (not stored and forgotten), and a join counter's parent refuses the
--    change it cannot move (0A000) instead of missing it.
--
CREATE TABLE hits (page int NOT NULL, weight int NOT NULL DEFAULT 1 CHECK (weight > 0));
CREATE TABLE hits_shadow (page int NOT NULL, weight int NOT NULL DEFAULT 1);
SELECT counters.create_counter('dep_hits', 'SELECT page, count(*) AS n, sum(weight) AS weight FROM hits GROUP BY page');
SELECT counters.set_sink('hits');
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'hits'::regclass AND tgname LIKE '%sink%' ORDER BY 1;
CREATE VIEW dep_hits_expected AS SELECT page, count(*) AS n, sum(weight) AS weight FROM hits_shadow GROUP BY page;
INSERT INTO hits VALUES (1, 1), (2, 3);
INSERT INTO hits_shadow VALUES (1, 1), (2, 3);
SET ROLE NONE; SET session_replication_role = replica; RESET ROLE;
INSERT INTO hits VALUES (1, 2), (3, 1);
INSERT INTO hits_shadow VALUES (1, 2), (3, 1);
-- (a row its CHECK refuses is refused, as the origin role's)
INSERT INTO hits VALUES (1, 0);
\echo SQLSTATE :SQLSTATE
SET ROLE NONE; RESET session_replication_role; RESET ROLE;
SELECT count(*) AS stored FROM hits;
SELECT * FROM regress.diff('dep_hits', 'dep_hits_expected');
-- a join counter
CREATE TABLE threads (id int PRIMARY KEY, forum int NOT NULL);
CREATE TABLE replies (id int PRIMARY KEY, thread_id int NOT NULL);
CREATE INDEX ON replies (thread_id);
INSERT INTO threads VALUES (1, 1), (2, 2);
INSERT INTO replies SELECT g, 1 + g % 2 FROM generate_series(1, 6) g;
SELECT counters.create_counter('dep_forum_replies', 'SELECT t.forum, count(*) AS n FROM replies r JOIN threads t ON r.thread_id = t.id GROUP BY t.forum');
CREATE VIEW dep_forum_replies_expected AS SELECT t.forum, count(*) AS n FROM replies r JOIN threads t ON r.thread_id = t.id GROUP BY t.forum;
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'threads'::regclass ORDER BY 1;
SET ROLE NONE; SET session_replication_role = replica; RESET ROLE;
UPDATE threads SET forum = 3 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
INSERT INTO threads VALUES (3, 3);
\echo SQLSTATE :SQLSTATE
SET ROLE NONE; RESET session_replication_role; RESET ROLE;
SELECT * FROM regress.diff('dep_forum_replies', 'dep_forum_replies_expected');

--
-- 6. A restore whose first write goes to a join counter's parent: the counter is declared again from its description
--    (the parent's triggers adopt too), and the parent's change moves its children.
--
SET ROLE NONE; DELETE FROM counters.counter WHERE name = 'dep_forum_replies'; RESET ROLE;
\c -
SET search_path = dep_test, regress;
UPDATE threads SET forum = 4 WHERE id = 2;
SELECT name FROM counters.counter WHERE name = 'dep_forum_replies';
SELECT * FROM regress.diff('dep_forum_replies', 'dep_forum_replies_expected');

-- clean up
SET client_min_messages = warning;
SELECT counters.drop_counter(name) FROM counters.counter WHERE name LIKE 'dep\_%' ORDER BY name;
SET ROLE counters_dep_tenant;
SELECT counters.drop_counter(name) FROM counters.counter WHERE name LIKE 'd\_%' ORDER BY name;
RESET ROLE;
DROP SCHEMA dep_test CASCADE;
SET ROLE NONE; DROP OWNED BY counters_dep_tenant, counters_dep_victim; DROP ROLE counters_dep_tenant, counters_dep_victim; RESET ROLE;
RESET client_min_messages;
RESET search_path;
