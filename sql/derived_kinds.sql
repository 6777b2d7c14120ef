--
-- derived_kinds: avg(), bool_or(), bool_and() and every() in a definition, as users write them. Each is kept as two
-- accumulators (a sum and a count, given to the definition when it lacks them) and read through a generated column
-- of the counter table named as the definition names it. Compared after every step with a recount by the
-- definition's own aggregates over the source, grouped as it groups: rows, moves between keys, NULLs in and out,
-- FILTER, bulk statements, a rolled back savepoint, TRUNCATE; log and sharded mode and back; a parent join; verify
-- and rebuild; redefinitions that add, keep, retype and drop them (the table kept); counter-cache columns; what is
-- refused, and a planted aggregate on the caller's search_path that the accumulators do not use.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA derived_kinds_test;
SET search_path = derived_kinds_test, regress;

CREATE TABLE reviews (id serial PRIMARY KEY, product_id int NOT NULL, stars int, price numeric(10,2), verified boolean);
INSERT INTO reviews (product_id, stars, price, verified)
SELECT g % 6, CASE WHEN g % 7 = 0 THEN NULL ELSE 1 + (g * 3) % 5 END, CASE WHEN g % 9 = 0 THEN NULL ELSE g * 0.37 END,
       CASE g % 5 WHEN 0 THEN NULL WHEN 1 THEN false ELSE true END
  FROM generate_series(1, 300) g;

SELECT counters.create_counter('review_stats', $$
    SELECT product_id, count(*) AS reviews, avg(stars) AS avg_stars,
           avg(price) FILTER (WHERE verified) AS avg_verified_price,
           bool_or(NOT verified) AS any_unverified, bool_and(verified) AS all_verified, every(stars >= 2) AS all_good
      FROM reviews GROUP BY product_id
$$);
-- the counter table: each derived column where the definition selects it, generated from accumulators listed last
SELECT attname, format_type(atttypid, atttypmod) AS type, attgenerated <> '' AS generated
  FROM pg_attribute WHERE attrelid = 'review_stats'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum;
-- the definition as stored: the user's aggregates, then the accumulators given to it (bool_or's and every's differ
-- in argument; bool_and shares nothing with bool_or, whose argument is another expression; PostgreSQL 16 on prints
-- a single table's columns without its name)
SELECT replace(pg_get_viewdef('review_stats_definition'), 'reviews.', '') AS definition;

CREATE VIEW stats_read AS
SELECT product_id, reviews, avg_stars, avg_verified_price, any_unverified, all_verified, all_good FROM review_stats;
CREATE VIEW stats_recount AS
SELECT product_id, count(*) AS reviews, avg(stars) AS avg_stars,
       avg(price) FILTER (WHERE verified) AS avg_verified_price,
       bool_or(NOT verified) AS any_unverified, bool_and(verified) AS all_verified, every(stars >= 2) AS all_good
  FROM reviews GROUP BY product_id;
-- the recount is not vacuous: averages with fractions, flags both ways and NULL
SELECT count(*) AS products, count(DISTINCT avg_stars) AS averages, bool_or(any_unverified) AS some_unverified,
       bool_or(NOT all_good) AS some_bad FROM stats_recount;
SELECT * FROM diff('stats_read', 'stats_recount');

-- single rows: a new product whose one review has no stars and no verdict (every value NULL, as the recount's)
INSERT INTO reviews (product_id, stars, price, verified) VALUES (100, NULL, NULL, NULL);
SELECT * FROM stats_read WHERE product_id = 100;
INSERT INTO reviews (product_id, stars, price, verified) VALUES (100, 1, 9.99, true), (100, 4, 20.01, true);
SELECT * FROM stats_read WHERE product_id = 100;
SELECT * FROM diff('stats_read', 'stats_recount');

-- moves between keys, values to and from NULL, a verdict flipped, deletes
UPDATE reviews SET product_id = 100 WHERE id = 2;
UPDATE reviews SET stars = NULL WHERE id % 11 = 0;
UPDATE reviews SET stars = 5, verified = NOT verified WHERE id % 13 = 0;
UPDATE reviews SET price = NULL, verified = NULL WHERE id % 17 = 0;
DELETE FROM reviews WHERE id % 19 = 0;
SELECT * FROM diff('stats_read', 'stats_recount');

-- bulk, and a rolled back savepoint
UPDATE reviews SET product_id = (product_id + 1) % 7 WHERE id % 3 = 0;
INSERT INTO reviews (product_id, stars, price, verified)
SELECT g % 8, g % 6, g * 1.25, g % 4 <> 0 FROM generate_series(1, 200) g;
BEGIN;
SAVEPOINT s;
DELETE FROM reviews WHERE product_id = 1;
UPDATE reviews SET verified = false WHERE product_id = 2;
ROLLBACK TO SAVEPOINT s;
UPDATE reviews SET stars = 1 WHERE product_id = 3;
COMMIT;
SELECT * FROM diff('stats_read', 'stats_recount');

-- log and sharded mode: the view users read has the derived columns (after the counter's), from the sums of the
-- accumulators' totals and pending rows; the log and the slots have none
DROP VIEW stats_read;
SELECT counters.alter_counter('review_stats', mode => 'log');
CREATE VIEW stats_read AS
SELECT product_id, reviews, avg_stars, avg_verified_price, any_unverified, all_verified, all_good FROM review_stats;
SELECT attname FROM pg_attribute WHERE attrelid = 'review_stats'::regclass AND attnum > 0 ORDER BY attnum;
SELECT count(*) AS generated_in_log FROM pg_attribute
 WHERE attrelid = 'review_stats_log'::regclass AND attgenerated <> '';
UPDATE reviews SET stars = stars + 1 WHERE stars < 5 AND id % 2 = 0;
DELETE FROM reviews WHERE id % 23 = 0;
SELECT * FROM diff('stats_read', 'stats_recount');
DROP VIEW stats_read;
SELECT counters.alter_counter('review_stats', mode => 'sharded');
CREATE VIEW stats_read AS
SELECT product_id, reviews, avg_stars, avg_verified_price, any_unverified, all_verified, all_good FROM review_stats;
UPDATE reviews SET verified = true WHERE verified IS NULL AND id % 3 = 1;
INSERT INTO reviews (product_id, stars, price, verified) VALUES (5, 2, 3.00, false);
SELECT * FROM diff('stats_read', 'stats_recount');
SELECT counters.compact('review_stats') >= 0 AS compacted;
SELECT * FROM diff('stats_read', 'stats_recount');
DROP VIEW stats_read;
SELECT counters.alter_counter('review_stats', mode => 'exact');
CREATE VIEW stats_read AS
SELECT product_id, reviews, avg_stars, avg_verified_price, any_unverified, all_verified, all_good FROM review_stats;
SELECT * FROM diff('stats_read', 'stats_recount');

-- verify and rebuild: the accumulators against the definition, the derived columns follow them
UPDATE review_stats SET avg_stars_sum = avg_stars_sum + 7 WHERE product_id = 4;
SELECT counter, column_name FROM counters.verify('review_stats');
SELECT count(*) > 0 AS damaged FROM diff('stats_read', 'stats_recount');
SELECT counters.rebuild('review_stats');
SELECT * FROM counters.verify('review_stats');
SELECT * FROM diff('stats_read', 'stats_recount');

-- TRUNCATE empties it, and counting starts again
TRUNCATE reviews;
SELECT count(*) AS rows_left FROM review_stats;
INSERT INTO reviews (product_id, stars, price, verified) VALUES (1, 3, 1.50, true), (1, 4, NULL, false);
SELECT * FROM stats_read;
SELECT * FROM diff('stats_read', 'stats_recount');

-- through a parent row: the average of the parent's column over the children, per child key
CREATE TABLE products (id int PRIMARY KEY, weight int, fragile boolean);
CREATE INDEX ON reviews (product_id);
INSERT INTO products SELECT g, g * 10, g % 2 = 0 FROM generate_series(0, 9) g;
INSERT INTO reviews (product_id, stars, price, verified) SELECT g % 10, g % 5, g, true FROM generate_series(1, 60) g;
SELECT counters.create_counter('stars_weight', $$
    SELECT r.stars, count(*) AS n, avg(p.weight) AS avg_weight, bool_or(p.fragile) AS any_fragile
      FROM reviews r JOIN products p ON r.product_id = p.id GROUP BY r.stars
$$);
CREATE VIEW weight_read AS SELECT stars, n, avg_weight, any_fragile FROM stars_weight;
CREATE VIEW weight_recount AS
SELECT r.stars, count(*) AS n, avg(p.weight) AS avg_weight, bool_or(p.fragile) AS any_fragile
  FROM reviews r JOIN products p ON r.product_id = p.id GROUP BY r.stars;
UPDATE products SET weight = weight + 1, fragile = NOT fragile WHERE id % 3 = 0;
UPDATE reviews SET product_id = 9 WHERE id % 4 = 0;
SELECT * FROM diff('weight_read', 'weight_recount');
DROP VIEW weight_read;
SELECT counters.drop_counter('stars_weight');

-- redefinitions keep the table: a derived column added, kept, its accumulator retyped (int to numeric), dropped
SELECT counters.create_counter('product_reviews', 'SELECT product_id, count(*) AS n FROM reviews GROUP BY product_id');
GRANT SELECT ON product_reviews TO PUBLIC;
SELECT counters.alter_counter('product_reviews', definition =>
    'SELECT product_id, count(*) AS n, avg(stars) AS a FROM reviews GROUP BY product_id');
SELECT counters.alter_counter('product_reviews', definition =>
    'SELECT product_id, count(*) AS n, avg(stars) AS a, bool_and(verified) AS v FROM reviews GROUP BY product_id');
SELECT counters.alter_counter('product_reviews', definition =>
    'SELECT product_id, count(*) AS n, avg(stars::numeric(10, 2)) AS a, bool_and(verified) AS v FROM reviews GROUP BY product_id');
SELECT attname, format_type(atttypid, atttypmod) AS type, attgenerated <> '' AS generated
  FROM pg_attribute WHERE attrelid = 'product_reviews'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum;
CREATE VIEW reviews_read AS SELECT product_id, n, a, v FROM product_reviews;
CREATE VIEW reviews_recount AS
SELECT product_id, count(*) AS n, avg(stars) AS a, bool_and(verified) AS v FROM reviews GROUP BY product_id;
SELECT * FROM diff('reviews_read', 'reviews_recount');
DROP VIEW reviews_read;
SELECT counters.alter_counter('product_reviews', definition =>
    'SELECT product_id, count(*) AS n FROM reviews GROUP BY product_id');
SELECT attname FROM pg_attribute
 WHERE attrelid = 'product_reviews'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum;
SELECT has_table_privilege('public', 'product_reviews', 'SELECT') AS still_granted;

-- counter-cache columns: an existing table keeps the accumulators; the average is its owner's generated column
CREATE TABLE product_cache (product_id int PRIMARY KEY, stars_sum bigint NOT NULL DEFAULT 0,
                            stars_count bigint NOT NULL DEFAULT 0,
                            stars numeric GENERATED ALWAYS AS (stars_sum::numeric / NULLIF(stars_count, 0)) STORED);
INSERT INTO product_cache (product_id) SELECT g FROM generate_series(0, 9) g;
SELECT counters.create_counter('product_cache_stars', $$
    SELECT product_id, avg(stars) AS stars FROM reviews GROUP BY product_id
$$, target => 'product_cache');
UPDATE reviews SET stars = 5 WHERE id % 5 = 0;
CREATE VIEW cache_read AS SELECT product_id, stars FROM product_cache WHERE stars_count > 0;
CREATE VIEW cache_recount AS
SELECT product_id, avg(stars) AS stars FROM reviews GROUP BY product_id HAVING count(stars) > 0;
SELECT * FROM diff('cache_read', 'cache_recount');
SELECT counters.drop_counter('product_cache_stars');

-- refused, each naming the counter: DISTINCT and ORDER BY inside; floating point; a numeric without a declared
-- scale (the digits of its average depend on the rows' largest scale); a column name the accumulators
-- take; top() of a derived column (order the table by it instead: its generated column can be indexed); a bound on
-- one (bounds apply to its accumulators); a counter-cache target without the accumulators' columns
CREATE TABLE floats (k int, x double precision);
CREATE TABLE product_cache2 (product_id int PRIMARY KEY, stars numeric);
SELECT * FROM errors(
    $$SELECT counters.create_counter('c1', 'SELECT product_id, avg(DISTINCT stars) FROM reviews GROUP BY product_id')$$,
    $$SELECT counters.create_counter('c2', 'SELECT product_id, bool_or(verified ORDER BY id) FROM reviews GROUP BY product_id')$$,
    $$SELECT counters.create_counter('c3', 'SELECT k, avg(x) FROM floats GROUP BY k')$$,
    $$SELECT counters.create_counter('c6', 'SELECT product_id, avg(price * 1.5) FROM reviews GROUP BY product_id')$$,
    $$SELECT counters.create_counter('c4', 'SELECT product_id, avg(stars) AS a, count(*) AS a_count FROM reviews GROUP BY product_id')$$,
    $$SELECT * FROM counters.top('review_stats', 'avg_stars', 3)$$,
    $$SELECT counters.set_bounds('review_stats', 'avg_stars', min => 0)$$,
    $$SELECT counters.create_counter('c5', 'SELECT product_id, avg(stars) AS stars FROM reviews GROUP BY product_id', target => 'product_cache2')$$);
SELECT count(*) AS left_behind FROM counters.counters WHERE name IN ('c1', 'c2', 'c3', 'c4', 'c5', 'c6');

-- a planted aggregate: a schema before pg_catalog on the caller's search_path has a sum(integer) that counts 1;
-- the definition's own avg() resolves as the caller wrote it, and the sum it is given is pg_catalog's (given
-- accumulators, the definition is stored with every other name qualified, and read with the search_path pinned)
CREATE SCHEMA planted;
CREATE FUNCTION planted.always_one(bigint, integer) RETURNS bigint LANGUAGE sql IMMUTABLE AS 'SELECT 1::bigint';
CREATE AGGREGATE planted.sum(integer) (sfunc = planted.always_one, stype = bigint);
SET search_path = planted, pg_catalog, derived_kinds_test, regress;
SELECT counters.create_counter('planted_avg', 'SELECT product_id, avg(stars) AS a FROM reviews GROUP BY product_id');
SET search_path = derived_kinds_test, regress;
SELECT pg_get_viewdef('planted_avg_definition') LIKE '%planted%' AS uses_planted;
CREATE VIEW planted_read AS SELECT product_id, a FROM planted_avg;
SELECT * FROM diff('planted_read', 'cache_recount');
DROP VIEW planted_read;
SELECT counters.drop_counter('planted_avg');

SELECT counters.drop_counter('product_reviews');
DROP VIEW stats_read;
SELECT counters.drop_counter('review_stats');
DROP SCHEMA planted CASCADE;
DROP SCHEMA derived_kinds_test CASCADE;
