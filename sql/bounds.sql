--
-- bounds: counters.set_bounds(name, column, min, max). A statement whose deltas would move a counter value outside
-- its bounds fails with check_violation (23514), naming the counter, column, key, would-be value and bound, and
-- changes nothing. Every path that applies deltas checks them: one key per statement (the direct update and the
-- upsert that creates a row), many keys per statement (the bulk upsert), a counter table with a trigger, and a
-- counter kept in an existing table. After every failure the counters still equal their definition
-- (counters.verify lists nothing). The isolation spec bounds_race and the TAP test test/t/003_bounds_pgbench.pl
-- show the check holds under concurrency.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA bounds_test;
SET search_path = bounds_test;

-- The excursion story: paid participants per excursion, at most 20.
CREATE TABLE excursions (id int PRIMARY KEY, title text, paid_count int NOT NULL DEFAULT 0);
INSERT INTO excursions SELECT g, 'excursion ' || g FROM generate_series(1, 3) g;
CREATE TABLE bookings (
	id           serial PRIMARY KEY,
	excursion_id int REFERENCES excursions,
	paid         boolean NOT NULL DEFAULT false,
	amount       numeric NOT NULL DEFAULT 0
);
SELECT counters.create_counter('seats', $$
	SELECT excursion_id, count(*) FILTER (WHERE paid) AS paid, count(*) AS booked, sum(amount) AS amount
	  FROM bookings GROUP BY excursion_id
$$);
INSERT INTO bookings (excursion_id, paid, amount) SELECT 1, true, 10 FROM generate_series(1, 18);
INSERT INTO bookings (excursion_id, paid, amount) SELECT 2, g % 2 = 0, 10 FROM generate_series(1, 4) g;

-- Setting bounds; the catalog view shows them; setting again replaces them.
SELECT counters.set_bounds('seats', 'paid', max => 25);
SELECT counters.set_bounds('seats', 'paid', max => 20);
SELECT counters.set_bounds('seats', 'amount', min => 0);
SELECT * FROM counters.bounds ORDER BY column_name;
SELECT name, options FROM counters.counters WHERE name = 'seats';

-- The 19th and 20th paid participants are accepted, one statement each (the direct path).
INSERT INTO bookings (excursion_id, paid, amount) VALUES (1, true, 10);
UPDATE bookings SET paid = true WHERE id = (SELECT min(id) FROM bookings WHERE excursion_id = 1 AND NOT paid);
INSERT INTO bookings (excursion_id, paid, amount) VALUES (1, true, 10);
-- The 21st is refused, and so is paying for an unpaid booking of a full excursion.
INSERT INTO bookings (excursion_id, paid, amount) VALUES (1, true, 10);
\echo SQLSTATE :SQLSTATE
INSERT INTO bookings (excursion_id, paid, amount) VALUES (1, false, 0);
UPDATE bookings SET paid = true WHERE id = (SELECT max(id) FROM bookings);
\echo SQLSTATE :SQLSTATE
-- Unpaid bookings are not bounded.
INSERT INTO bookings (excursion_id, amount) VALUES (1, 5);
SELECT * FROM seats ORDER BY excursion_id;
SELECT * FROM counters.verify('seats');

-- A statement is all or nothing: many rows, many keys (the bulk path), one of them over the bound.
INSERT INTO bookings (excursion_id, paid, amount) VALUES (2, true, 10), (3, true, 10), (1, true, 10);
\echo SQLSTATE :SQLSTATE
SELECT * FROM seats ORDER BY excursion_id;
-- Moving a paid booking to a full excursion is refused; cancelling one there makes room.
UPDATE bookings SET excursion_id = 1 WHERE id = (SELECT min(id) FROM bookings WHERE excursion_id = 2 AND paid);
\echo SQLSTATE :SQLSTATE
DELETE FROM bookings WHERE id = (SELECT min(id) FROM bookings WHERE excursion_id = 1 AND paid);
UPDATE bookings SET excursion_id = 1 WHERE id = (SELECT min(id) FROM bookings WHERE excursion_id = 2 AND paid);
SELECT * FROM seats ORDER BY excursion_id;
SELECT * FROM counters.verify('seats');

-- A minimum: refunds may not take an excursion's amount below zero, including a key's first row (an insert).
INSERT INTO bookings (excursion_id, amount) VALUES (3, -1);
\echo SQLSTATE :SQLSTATE
UPDATE bookings SET amount = -1000 WHERE id = (SELECT min(id) FROM bookings WHERE excursion_id = 2);
\echo SQLSTATE :SQLSTATE
SELECT * FROM counters.verify('seats');

-- A trigger on the counter table (the upsert path) checks the same way.
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER touch BEFORE UPDATE ON seats FOR EACH ROW EXECUTE FUNCTION touch();
INSERT INTO bookings (excursion_id, paid, amount) VALUES (1, true, 10);
\echo SQLSTATE :SQLSTATE
INSERT INTO bookings (excursion_id, paid, amount) VALUES (2, true, 10);
DROP TRIGGER touch ON seats;
SELECT * FROM seats ORDER BY excursion_id;
SELECT * FROM counters.verify('seats');

--
-- Rejected bounds: nothing changes.
--
SELECT counters.set_bounds('nosuch', 'paid', max => 1);
\echo SQLSTATE :SQLSTATE
SELECT counters.set_bounds('seats', 'excursion_id', max => 1);
\echo SQLSTATE :SQLSTATE
SELECT counters.set_bounds('seats', 'nosuch', max => 1);
\echo SQLSTATE :SQLSTATE
SELECT counters.set_bounds('seats', 'paid', min => 5, max => 1);
\echo SQLSTATE :SQLSTATE
-- current values already outside: refused, with how many keys
SELECT counters.set_bounds('seats', 'booked', max => 4);
\echo SQLSTATE :SQLSTATE
SELECT * FROM counters.bounds ORDER BY column_name;
-- a counter whose values are not exact at write time
SELECT counters.alter_counter('seats', 'log');
\echo SQLSTATE :SQLSTATE
SELECT mode FROM counters.counters WHERE name = 'seats';

--
-- Bounds on a counter kept in an existing table (excursions.paid_count).
--
SELECT counters.create_counter('paid_cache', $$
	SELECT excursion_id AS id, count(*) FILTER (WHERE paid) AS paid_count FROM bookings GROUP BY excursion_id
$$, target => 'excursions');
UPDATE excursions e SET paid_count = (SELECT count(*) FROM bookings b WHERE b.excursion_id = e.id AND b.paid);
SELECT counters.set_bounds('paid_cache', 'paid_count', max => 20);
INSERT INTO bookings (excursion_id, paid) VALUES (3, true);
SELECT counters.set_bounds('seats', 'paid');
INSERT INTO bookings (excursion_id, paid) VALUES (1, true);
\echo SQLSTATE :SQLSTATE
SELECT id, paid_count FROM excursions ORDER BY id;
SELECT * FROM counters.verify();

--
-- Removing bounds: two NULLs; the counter is unbounded again and can switch modes.
--
SELECT counters.set_bounds('seats', 'amount');
SELECT counters.set_bounds('paid_cache', 'paid_count');
SELECT * FROM counters.bounds;
INSERT INTO bookings (excursion_id, paid, amount) VALUES (1, true, -500);
SELECT counters.alter_counter('seats', 'log');
SELECT counters.set_bounds('seats', 'paid', max => 100);
\echo SQLSTATE :SQLSTATE
SELECT counters.alter_counter('seats', 'exact');
SELECT * FROM counters.verify();

SELECT counters.drop_counter('seats');
SELECT counters.drop_counter('paid_cache');
RESET search_path;
DROP SCHEMA bounds_test CASCADE;
