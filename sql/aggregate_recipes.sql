--
-- aggregate_recipes: the aggregates applications keep beyond count and sum, kept exactly today from counts and sums
-- (docs/aggregates.md): avg, bool_or and bool_and read from a counter's counts and sums; count(DISTINCT x) as a
-- counter over a pair counter's table (the pair counter's writes fire the upper counter's triggers); min and max read
-- from a counter of (key, value) pairs. Each is compared, after every step, with a recount by the aggregate itself
-- over the source: avg(), bool_or(), bool_and(), count(DISTINCT), min(), max(), grouped as the definition groups. Rows, moves between keys, NULLs, bulk statements, a rolled
-- back savepoint, the upper counter in sharded mode, a repair of the pair counter, TRUNCATE; what the pair counter
-- refuses while another counter reads its table.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA aggregate_recipes_test;
SET search_path = aggregate_recipes_test, regress;

CREATE TABLE ratings (id serial PRIMARY KEY, product_id int NOT NULL, user_id int, stars int, paid boolean);
INSERT INTO ratings (product_id, user_id, stars, paid)
SELECT g % 7, CASE WHEN g % 11 = 0 THEN NULL ELSE g % 13 END, CASE WHEN g % 5 = 0 THEN NULL ELSE 1 + (g / 7) % (2 + g % 7) END,
       CASE g % 4 WHEN 0 THEN NULL WHEN 1 THEN false ELSE true END
  FROM generate_series(1, 300) g;

-- avg(stars), bool_or(NOT paid) and bool_and(paid): the counts and sums they are made of
SELECT counters.create_counter('product_stats', $$
    SELECT product_id, count(*) AS ratings, count(stars) AS rated, sum(stars) AS stars_sum,
           count(paid) AS paid_known, count(*) FILTER (WHERE paid) AS paid_true,
           count(*) FILTER (WHERE NOT paid) AS unpaid
      FROM ratings GROUP BY product_id
$$);
CREATE VIEW product_stats_read AS
SELECT product_id,
       stars_sum::numeric / NULLIF(rated, 0) AS avg_stars,
       CASE WHEN paid_known > 0 THEN unpaid > 0 END AS any_unpaid,
       CASE WHEN paid_known > 0 THEN paid_true = paid_known END AS all_paid
  FROM product_stats;
CREATE VIEW product_stats_recount AS
SELECT product_id, avg(stars) AS avg_stars, bool_or(NOT paid) AS any_unpaid, bool_and(paid) AS all_paid
  FROM ratings GROUP BY product_id;

-- count(DISTINCT user_id) per product: a pair counter (one row per product and user), and a counter of its rows
SELECT counters.create_counter('product_user', $$
    SELECT product_id, user_id, count(*) AS ratings FROM ratings WHERE user_id IS NOT NULL GROUP BY product_id, user_id
$$);
SELECT counters.create_counter('product_raters', $$
    SELECT product_id, count(*) AS raters FROM product_user GROUP BY product_id
$$);
-- min(stars) and max(stars) per product: a counter of (product, stars) pairs, read by min() and max() per product
-- (one descent of the pair counter's key index for one product)
SELECT counters.create_counter('product_star_values', $$
    SELECT product_id, stars, count(*) AS ratings FROM ratings WHERE stars IS NOT NULL GROUP BY product_id, stars
$$);
CREATE VIEW product_stars_read AS
SELECT product_id, min(stars) AS min_stars, max(stars) AS max_stars FROM product_star_values GROUP BY product_id;
CREATE VIEW product_stars_recount AS
SELECT product_id, min(stars) AS min_stars, max(stars) AS max_stars
  FROM ratings GROUP BY product_id HAVING count(stars) > 0;
-- (a product whose ratings all have a NULL user counts 0 distinct users: no counter row, an absent row means zero)
CREATE VIEW product_raters_recount AS
SELECT product_id, count(DISTINCT user_id) AS raters FROM ratings GROUP BY product_id HAVING count(user_id) > 0;

CREATE FUNCTION check_recipes() RETURNS TABLE (recipe text, side text, row_value text) LANGUAGE sql AS $$
	SELECT 'avg, bool_or, bool_and', d.side, d.row_value
	  FROM regress.diff('product_stats_read', 'product_stats_recount') d
	UNION ALL
	SELECT 'count(DISTINCT)', d.side, d.row_value
	  FROM regress.diff('product_raters', 'product_raters_recount') d
	UNION ALL
	SELECT 'min, max', d.side, d.row_value
	  FROM regress.diff('product_stars_read', 'product_stars_recount') d
	ORDER BY 1, 2, 3
$$;

-- the recount views are not vacuous: averages, flags both ways, several raters, a maximum per product
SELECT count(*) AS products, count(avg_stars) AS with_avg, count(all_paid) AS with_all_paid,
       bool_or(any_unpaid) AS some_unpaid FROM product_stats_recount;
SELECT sum(raters) AS raters FROM product_raters_recount;
SELECT count(*) AS products, count(DISTINCT max_stars) AS maxima, count(DISTINCT min_stars) AS minima
  FROM product_stars_recount;
SELECT * FROM check_recipes();

-- single rows: a new product, with its first rating unpaid; its only rater rates again; a NULL user; a NULL star
INSERT INTO ratings (product_id, user_id, stars, paid) VALUES (100, 1, 5, false);
INSERT INTO ratings (product_id, user_id, stars, paid) VALUES (100, 1, 3, true), (100, NULL, NULL, NULL);
-- a product whose only rating has no stars and no payment: avg, bool_or and bool_and are NULL, as the recount's
INSERT INTO ratings (product_id, user_id, stars, paid) VALUES (200, NULL, NULL, NULL);
SELECT * FROM product_raters WHERE product_id = 100;
SELECT * FROM product_stats_read WHERE product_id IN (100, 200) ORDER BY product_id;
SELECT * FROM check_recipes();

-- moves: a rating to another product, a rater to another user, NULLs in and out
UPDATE ratings SET product_id = 100 WHERE id = 1;
UPDATE ratings SET user_id = 2 WHERE product_id = 100 AND user_id = 1 AND stars = 3;
UPDATE ratings SET user_id = NULL, paid = NULL WHERE id % 17 = 0;
UPDATE ratings SET stars = NULL, user_id = 3 WHERE id % 19 = 0;
SELECT * FROM check_recipes();

-- product 100's highest and lowest ratings go: its maximum and minimum come back from the remaining rows
SELECT * FROM product_stars_read WHERE product_id = 100;
DELETE FROM ratings WHERE product_id = 100 AND stars = (SELECT max(stars) FROM ratings WHERE product_id = 100);
UPDATE ratings SET stars = 4 WHERE product_id = 100 AND stars = (SELECT min(stars) FROM ratings WHERE product_id = 100);
SELECT * FROM product_stars_read WHERE product_id = 100;
SELECT * FROM check_recipes();

-- the last rating of a user on a product goes: the pair's row goes, and the distinct count falls
DELETE FROM ratings WHERE product_id = 100 AND user_id = 2;
SELECT * FROM product_raters WHERE product_id = 100;
SELECT * FROM check_recipes();

-- bulk statements
UPDATE ratings SET product_id = (product_id + 1) % 7 WHERE id % 3 = 0;
UPDATE ratings SET user_id = user_id + 1 WHERE user_id IS NOT NULL AND id % 2 = 0;
DELETE FROM ratings WHERE id % 5 = 0;
INSERT INTO ratings (product_id, user_id, stars, paid)
SELECT g % 9, g % 23, g % 6, g % 3 = 0 FROM generate_series(1, 200) g;
SELECT * FROM check_recipes();

-- a rolled back savepoint leaves nothing behind
BEGIN;
SAVEPOINT s;
DELETE FROM ratings WHERE product_id = 1;
UPDATE ratings SET user_id = 999 WHERE product_id = 2;
ROLLBACK TO SAVEPOINT s;
INSERT INTO ratings (product_id, user_id, stars, paid) VALUES (1, 500, 1, false);
COMMIT;
SELECT * FROM check_recipes();

-- the upper counter in sharded mode (a hot product), then back to exact
SELECT counters.alter_counter('product_raters', mode => 'sharded');
UPDATE ratings SET user_id = (user_id * 7) % 31 WHERE user_id IS NOT NULL AND id % 4 = 1;
DELETE FROM ratings WHERE id % 7 = 0;
SELECT * FROM check_recipes();
SELECT counters.alter_counter('product_raters', mode => 'exact');
SELECT * FROM check_recipes();

-- the pair counter's table damaged by hand, then rebuilt: the upper counter follows both
DELETE FROM product_user WHERE product_id = 3;
SELECT count(*) > 0 AS damaged FROM check_recipes();
SELECT counters.rebuild('product_user');
SELECT * FROM check_recipes();

-- TRUNCATE empties both, and counting starts again (the pair counter is emptied by a statement whose own triggers,
-- the upper counter's, fire at its end: no relation is left open behind it)
TRUNCATE ratings;
SELECT count(*) AS pairs, (SELECT count(*) FROM product_raters) AS raters FROM product_user;
INSERT INTO ratings (product_id, user_id, stars, paid) VALUES (1, 1, 4, true), (1, 2, 2, false), (1, 2, NULL, NULL);
SELECT * FROM product_raters;
SELECT * FROM check_recipes();

-- the pair counter's table is the upper counter's source: it cannot become a view (log, sharded) under it, nor be
-- dropped from under it; its definition may change
SELECT counters.alter_counter('product_user', mode => 'sharded');
SELECT counters.alter_counter('product_user', mode => 'log');
SELECT counters.alter_counter('product_user', definition => $$
    SELECT product_id, user_id, count(*) AS ratings, sum(stars) AS stars FROM ratings WHERE user_id IS NOT NULL
     GROUP BY product_id, user_id
$$);
-- (a new definition keeps the pair table: the upper counter follows; rebuild_concurrently() would pass through log
-- mode, and is refused before its first step, with the way that works)
SELECT * FROM check_recipes();
CALL counters.rebuild_concurrently('product_user');
SELECT * FROM check_recipes();
SELECT counters.drop_counter('product_user');
SELECT counters.drop_counter('product_raters');
SELECT counters.drop_counter('product_user');
DROP VIEW product_stats_read, product_stars_read CASCADE;
SELECT counters.drop_counter('product_stats');
SELECT counters.drop_counter('product_star_values');
DROP SCHEMA aggregate_recipes_test CASCADE;
