-- Randomized property test of counters: zero drift under thousands of random writes.
--
-- Several counters are declared at once on a plain table (posts, with a generated column, an updatable view and
-- user triggers) and on a two-level partitioned table (events). A PL/pgSQL generator, seeded with setseed(), writes a
-- psql script of random batches -- single- and multi-row INSERT, INSERT ... SELECT, COPY FROM STDIN, UPDATEs that
-- move rows between keys, flip flags, change values, touch no counted column or change nothing, DELETE, upserts,
-- MERGE, writable CTEs, TRUNCATE, savepoints rolled back, statements failing after the counters have run,
-- cross-partition updates, statements naming a partition, partitions created, attached, detached and dropped,
-- counters dropped and re-created -- and after every batch every counter is compared with a GROUP BY recount written
-- here (not the extension's definition view). An absent counter row means all zeros: the recount leaves out groups
-- whose values are all zero and the counter must not store them either.
--
-- Two counters start in log mode, and batches switch counters between exact and log mode and compact them at random.
-- test/pgtap/property_log.sql runs this file with counters_mode=log: every counter with a table of its own but one
-- starts in log mode, and the batches compact more often (one counter or all, between batches and inside batches that
-- commit or roll back; every such compaction is a test that it folded exactly the pending log rows and left the log
-- empty) and switch modes inside batches too. A log-mode counter is read through its view, and each check also
-- requires that its totals hold no row whose values are all zero. test/pgtap/property_sharded.sql does the same with
-- sharded mode (slot rows instead of log rows; switches go between exact and sharded, through exact from log).
--
-- Each batch is a transaction (committed, rolled back, or rolled back to a savepoint and committed); everything lives
-- in schema counters_property, dropped at the end with the extension. After a failed check the counter is reset to its
-- recount, so that every batch reports the drift it caused itself. Reproduce a failure with the seed it prints:
--   COUNTERS_PROPERTY_SEED=0.25 COUNTERS_PROPERTY_KEEP=1 pg_prove -d db test/pgtap/property.sql   (or property_log.sql)
-- (KEEP keeps the generated script in $TMPDIR or /tmp; COUNTERS_PROPERTY_BATCHES changes the number of batches.)
\set ON_ERROR_STOP 1
\set QUIET 1
\pset pager off
\pset format unaligned
\pset tuples_only on
-- counters_mode and seed may be set by a file that includes this one (property_log.sql)
\if :{?counters_mode}
\else
\set counters_mode exact
\endif
\if :{?seed}
\else
\set seed 0.4242
\endif
\getenv seed COUNTERS_PROPERTY_SEED
\set batches 300
\getenv batches COUNTERS_PROPERTY_BATCHES
\set tmpdir /tmp
\getenv tmpdir TMPDIR
-- the number of tests after the random batches (the targeted section at the end of this file)
\set targeted_tests 4

SET client_min_messages = warning;
-- leftovers of a run that stopped half-way
DROP SCHEMA IF EXISTS counters_property CASCADE;
DROP EXTENSION IF EXISTS counters;
CREATE EXTENSION counters;
CREATE SCHEMA counters_property;
SET search_path = counters_property, public;

-- ---------------------------------------------------------------------------------------------------------------
-- schema
-- ---------------------------------------------------------------------------------------------------------------
CREATE TABLE blogs (
	id          int PRIMARY KEY,
	name        text NOT NULL,
	post_count  int,      -- counter-cache columns, NULL until the counter fills them
	rating_sum  bigint,
	score_total numeric
);
INSERT INTO blogs (id, name) SELECT g, 'blog ' || g FROM generate_series(1, 8) g;  -- blog_id 9 and 10 have no row

CREATE TABLE posts (
	id           serial PRIMARY KEY,
	user_id      int,                      -- NULL: an anonymous post (a NULL key in a two-column key)
	blog_id      int NOT NULL,
	is_published boolean NOT NULL,
	is_deleted   boolean NOT NULL,
	rating       int,
	score        numeric,
	tag          text,
	note         text,                     -- read by no counter
	tag_key      text GENERATED ALWAYS AS (upper(tag)) STORED
);
-- An updatable view with its own column order: UPDATEs through it name columns by the view's numbers.
CREATE VIEW posts_v AS SELECT note, tag, rating, blog_id, is_published, id, user_id, score, is_deleted FROM posts;

-- Two levels of partitions, one attached with another column order and a dropped column, a default partition.
CREATE TABLE events (
	id      bigserial,
	day     int NOT NULL,
	user_id int,
	kind    text,
	qty     int,
	amount  numeric,
	PRIMARY KEY (id, day)
) PARTITION BY RANGE (day);
CREATE TABLE events_a PARTITION OF events FOR VALUES FROM (0) TO (10);
CREATE TABLE events_b PARTITION OF events FOR VALUES FROM (10) TO (20) PARTITION BY RANGE (day);
CREATE TABLE events_b_lo PARTITION OF events_b FOR VALUES FROM (10) TO (15);
CREATE TABLE events_b_hi PARTITION OF events_b DEFAULT;
CREATE TABLE events_c (junk int, amount numeric, kind text, qty int, user_id int, day int NOT NULL,
                       id bigint NOT NULL DEFAULT nextval('events_id_seq'));
ALTER TABLE events_c DROP COLUMN junk;
ALTER TABLE events ATTACH PARTITION events_c FOR VALUES FROM (20) TO (30);
CREATE TABLE events_def PARTITION OF events DEFAULT;
-- events_d (FROM 40 TO 50) comes and goes during the run.

-- Some data before the counters exist: the initial fill must count it.
INSERT INTO posts (user_id, blog_id, is_published, is_deleted, rating, score, tag)
SELECT nullif(g % 13, 0), 1 + g % 10, g % 4 <> 0, g % 9 = 0, g % 11 - 2, (g % 17) / 4.0, (ARRAY['Red', 'blue', NULL, 'x'])[1 + g % 4]
  FROM generate_series(1, 120) g;
INSERT INTO events (day, user_id, kind, qty, amount)
SELECT g % 40, nullif(g % 7, 0), (ARRAY['click', 'view', NULL, 'spam', 'Click'])[1 + g % 5], g % 6 - 1, (g % 13) / 2.0
  FROM generate_series(1, 150) g;

-- ---------------------------------------------------------------------------------------------------------------
-- the counters
-- ---------------------------------------------------------------------------------------------------------------
CREATE TABLE counter_defs (name text PRIMARY KEY, definition text NOT NULL, target text, mode text NOT NULL DEFAULT 'exact');
INSERT INTO counter_defs VALUES
	('ub', 'SELECT user_id, blog_id, count(*) AS posts, sum(rating) AS rating_sum FROM posts '
	       'WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id', NULL),
	('pb', 'SELECT blog_id, count(*) FILTER (WHERE is_published) AS published, count(*) FILTER (WHERE is_deleted) AS deleted, '
	       'count(tag) AS tagged, sum(score) AS score_sum FROM posts GROUP BY blog_id', NULL),
	('pt', 'SELECT lower(tag) AS tag, count(*) AS n, sum(rating) FILTER (WHERE is_published) AS published_rating '
	       'FROM posts GROUP BY lower(tag)', NULL),
	('ph', 'SELECT is_published, rating >= 3 AS high, tag_key, count(*) AS n, sum(score) FILTER (WHERE NOT is_deleted) AS live_score '
	       'FROM posts GROUP BY is_published, rating >= 3, tag_key', NULL),
	('bc', 'SELECT blog_id AS id, count(*) AS post_count, sum(rating) AS rating_sum, sum(score) AS score_total '
	       'FROM posts WHERE NOT is_deleted GROUP BY blog_id', 'blogs'),
	('ps', 'SELECT score, count(*) AS n FROM posts WHERE abs(score) < 3 GROUP BY score', NULL),
	('pa', 'SELECT blog_id, count(*) AS n, avg(rating) AS avg_rating, bool_or(is_published) AS any_published, '
	       'bool_and(NOT is_deleted) FILTER (WHERE rating > 0) AS all_live FROM posts GROUP BY blog_id', NULL),
	('ek', 'SELECT user_id, kind, count(*) AS n, sum(amount) AS amount FROM events GROUP BY user_id, kind', NULL),
	('px', 'SELECT user_id, count(*) AS n, max(amount) AS top_amount, min(day) FILTER (WHERE kind IS NOT NULL) AS first_day '
	       'FROM events GROUP BY user_id', NULL),
	('pd', 'SELECT user_id, count(DISTINCT kind) AS kinds, count(DISTINCT day) FILTER (WHERE qty > 0) AS active_days '
	       'FROM events GROUP BY user_id', NULL),
	('ew', 'SELECT day / 7 AS week, count(*) AS n, sum(qty) AS qty FROM events '
	       'WHERE kind IS DISTINCT FROM ''spam'' GROUP BY day / 7', NULL);
-- In the log variant every counter with a table of its own starts in log mode, but ph (exact: two modes on posts), px
-- (max() and min()) and pd (count(DISTINCT)): exact mode only, never switched.
SELECT set_config('prop.counters_mode', :'counters_mode', false) \gset
UPDATE counter_defs SET mode = current_setting('prop.counters_mode')
 WHERE current_setting('prop.counters_mode') <> 'exact' AND target IS NULL AND name NOT IN ('ph', 'px', 'pd');
-- (the indexes px reads a user's next extreme through, and pd a changed (user, value) pair, on every partition)
CREATE INDEX ON events (user_id, amount);
CREATE INDEX ON events (user_id, day);
CREATE INDEX ON events (user_id, kind);
-- the mode switches and re-declarations go between exact and this one
SELECT set_config('prop.other_mode', CASE :'counters_mode' WHEN 'exact' THEN 'log' ELSE :'counters_mode' END, false) \gset
SELECT count(*) FROM counter_defs d, counters.create_counter(d.name, d.definition, d.target, d.mode) \gset
-- two counters start in log mode (insert-only deltas, compacted now and then); batches switch modes at random
SELECT count(*) FROM (VALUES ('ub'), ('ek')) v(name), counters.alter_counter(v.name, 'log') \gset

-- The recounts, written independently of the definitions (CASE instead of FILTER, explicit zero handling).
-- have: the counter's rows; want: the recount, same columns.
CREATE TABLE recounts (name text PRIMARY KEY, have text NOT NULL, want text NOT NULL);
INSERT INTO recounts VALUES
	('ub', 'SELECT user_id, blog_id, posts, rating_sum FROM ub',
	       'SELECT user_id, blog_id, count(*), sum(coalesce(rating, 0)) FROM posts
	         WHERE is_published AND NOT is_deleted GROUP BY user_id, blog_id'),
	('pb', 'SELECT blog_id, published, deleted, tagged, score_sum FROM pb',
	       'SELECT * FROM (SELECT blog_id, sum(CASE WHEN is_published THEN 1 ELSE 0 END) AS published,
	                              sum(CASE WHEN is_deleted THEN 1 ELSE 0 END) AS deleted,
	                              sum(CASE WHEN tag IS NULL THEN 0 ELSE 1 END) AS tagged,
	                              sum(coalesce(score, 0)) AS score_sum
	                         FROM posts GROUP BY blog_id) s
	         WHERE published <> 0 OR deleted <> 0 OR tagged <> 0 OR score_sum <> 0'),
	('pt', 'SELECT tag, n, published_rating FROM pt',
	       'SELECT lower(tag), count(*), sum(CASE WHEN is_published THEN coalesce(rating, 0) ELSE 0 END)
	          FROM posts GROUP BY lower(tag)'),
	('ph', 'SELECT is_published, high, tag_key, n, live_score FROM ph',
	       'SELECT is_published, rating >= 3, upper(tag), count(*), sum(CASE WHEN is_deleted THEN 0 ELSE coalesce(score, 0) END)
	          FROM posts GROUP BY 1, 2, 3'),
	('bc', 'SELECT id, post_count, rating_sum, score_total FROM blogs',
	       'SELECT b.id, count(p.id), coalesce(sum(p.rating), 0), coalesce(sum(p.score), 0)
	          FROM blogs b LEFT JOIN posts p ON p.blog_id = b.id AND NOT p.is_deleted GROUP BY b.id'),
	('ps', 'SELECT score, n FROM ps', -- a numeric key: 0.5 and 0.50 are one group
	       'SELECT score, count(*) FROM posts WHERE score > -3 AND score < 3 GROUP BY score'),
	('pa', 'SELECT blog_id, n, avg_rating, any_published, all_live FROM pa', -- avg(), bool_or(), bool_and() by hand
	       'SELECT blog_id, count(*),
	               CASE WHEN count(rating) > 0 THEN sum(rating)::numeric / count(rating)::numeric END,
	               max(CASE WHEN is_published THEN 1 ELSE 0 END) = 1,
	               CASE WHEN sum(CASE WHEN rating > 0 THEN 1 ELSE 0 END) > 0
	                    THEN sum(CASE WHEN rating > 0 AND is_deleted THEN 1 ELSE 0 END) = 0 END
	          FROM posts GROUP BY blog_id'),
	('px', 'SELECT user_id, n, top_amount, first_day FROM px', -- max() and min() by hand
	       'SELECT user_id, count(*), (SELECT e2.amount FROM events e2 WHERE e2.user_id IS NOT DISTINCT FROM e.user_id
	                                     AND e2.amount IS NOT NULL ORDER BY e2.amount DESC LIMIT 1),
	               min(CASE WHEN kind IS NOT NULL THEN day END)
	          FROM events e GROUP BY user_id'),
	('pd', 'SELECT user_id, kinds, active_days FROM pd', -- count(DISTINCT) by hand
	       'SELECT user_id, sum(k), sum(d) FROM (
	            SELECT user_id, 1 AS k, 0 AS d FROM (SELECT DISTINCT user_id, kind FROM events WHERE kind IS NOT NULL) a
	            UNION ALL SELECT user_id, 0, 1 FROM (SELECT DISTINCT user_id, day FROM events WHERE qty > 0) b) u
	         GROUP BY user_id'),
	('ek', 'SELECT user_id, kind, n, amount FROM ek',
	       'SELECT user_id, kind, count(*), sum(coalesce(amount, 0)) FROM events GROUP BY user_id, kind'),
	('ew', 'SELECT week, n, qty FROM ew',
	       'SELECT day / 7, count(*), sum(coalesce(qty, 0)) FROM events WHERE kind IS NULL OR kind <> ''spam'' GROUP BY 1');

-- A test that two queries return the same rows; on failure it prints the rows only one of them returns.
CREATE FUNCTION same_rows(have text, want text, description text) RETURNS text LANGUAGE sql AS $$
	SELECT is_empty(format('(SELECT %L AS only_in, * FROM (%s EXCEPT ALL %s) a) UNION ALL (SELECT %L, * FROM (%s EXCEPT ALL %s) b)',
	                       'counter', have, want, 'recount', want, have),
	                description) $$;
-- One test per counter: counter = recount. A counter that failed is then set to its recount (the counter tables are
-- plain tables), so that the next batches report only the drift they cause. A counter in log mode is read through its
-- view; its totals must in addition hold no row whose values are all zero (such a row would show up as a row the
-- recount does not have).
CREATE FUNCTION check_counters(label text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	r recounts;
	k counters.counter;
	result text;
	tbl text;
	cols text;
	have text;
	zero text;
BEGIN
	FOR r IN SELECT * FROM recounts ORDER BY name LOOP
		SELECT * INTO k FROM counters.counter c WHERE c.name = r.name;
		tbl := substring(r.have FROM ' FROM (\w+)$');
		cols := substring(r.have FROM '^SELECT (.*) FROM \w+$');
		have := r.have;
		IF k.mode IN ('log', 'sharded') THEN
			SELECT string_agg(format('%I OPERATOR(pg_catalog.=) 0', a.attname), ' AND ') INTO zero
			  FROM pg_attribute a WHERE a.attrelid = k.totals AND a.attnum > 0 AND NOT a.attisdropped AND a.atthasdef
			   AND a.attgenerated = '';
			have := format('%s UNION ALL SELECT %s FROM %s WHERE %s', have, cols, k.totals, zero);
		END IF;
		result := same_rows(have, r.want, format('%s: %s (%s) = recount', label, r.name, k.mode));
		RETURN NEXT result;
		IF result LIKE 'not ok%' THEN
			IF tbl = 'blogs' THEN
				EXECUTE format('UPDATE blogs b SET (%s) = (SELECT %s FROM (%s) w(%s) WHERE w.id = b.id)', cols, cols, r.want, cols);
			ELSIF k.mode IN ('log', 'sharded') THEN
				EXECUTE format('DELETE FROM %s', k.log);
				EXECUTE format('DELETE FROM %s', k.totals);
				EXECUTE format('INSERT INTO %s (%s) %s', k.totals, cols, r.want);
			ELSE
				EXECUTE format('DELETE FROM %I', tbl);
				EXECUTE format('INSERT INTO %I (%s) %s', tbl, cols, r.want);
			END IF;
			RETURN NEXT diag(format('counter %s was reset to its recount', r.name));
		END IF;
	END LOOP;
END
$$;

-- User triggers: a failing AFTER statement trigger that fires after the counters' own ones (trigger name order);
-- BEFORE row triggers that skip some deletes and change inserted values (on posts, and on the partition events_c, where
-- a skipped delete also keeps a row from moving to another partition); a BEFORE UPDATE row trigger changing counted
-- columns that the UPDATE does not name (on posts during the middle third of the run).
CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF current_setting('prop.boom', true) = 'on' THEN
		RAISE EXCEPTION 'boom';
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER zz_boom AFTER INSERT OR UPDATE OR DELETE ON posts FOR EACH STATEMENT EXECUTE FUNCTION boom();
CREATE TRIGGER zz_boom AFTER INSERT OR UPDATE OR DELETE ON events FOR EACH STATEMENT EXECUTE FUNCTION boom();
-- keep_row(column, value): a BEFORE DELETE trigger that skips the delete of rows whose column has that value
CREATE FUNCTION keep_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF to_jsonb(OLD) ->> TG_ARGV[0] = TG_ARGV[1] THEN
		RETURN NULL;
	END IF;
	RETURN OLD;
END
$$;
CREATE TRIGGER keep_row BEFORE DELETE ON posts FOR EACH ROW EXECUTE FUNCTION keep_row('note', 'keep');
CREATE TRIGGER keep_row BEFORE DELETE ON events_c FOR EACH ROW EXECUTE FUNCTION keep_row('kind', 'Click');
CREATE FUNCTION events_c_before_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.qty := coalesce(NEW.qty, 0) * 10;
	RETURN NEW;
END
$$;
CREATE TRIGGER scale_qty BEFORE INSERT ON events_c FOR EACH ROW EXECUTE FUNCTION events_c_before_insert();
CREATE FUNCTION posts_before_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.note IS DISTINCT FROM OLD.note THEN
		CASE NEW.note
		WHEN 'unpublish' THEN NEW.is_published := false;
		WHEN 'bump' THEN NEW.rating := coalesce(NEW.rating, 0) + 1;
		WHEN 'retag' THEN NEW.tag := 'Retagged';
		ELSE NULL;
		END CASE;
	END IF;
	RETURN NEW;
END
$$;

-- ---------------------------------------------------------------------------------------------------------------
-- the generator (random() after setseed(): the same seed writes the same script)
-- ---------------------------------------------------------------------------------------------------------------
CREATE FUNCTION rint(lo int, hi int) RETURNS int LANGUAGE sql AS $$ SELECT lo + floor(random() * (hi - lo + 1))::int $$;
CREATE FUNCTION chance(p float8) RETURNS boolean LANGUAGE sql AS $$ SELECT random() < p $$;
CREATE FUNCTION pick(VARIADIC a text[]) RETURNS text LANGUAGE sql AS $$ SELECT a[1 + floor(random() * cardinality(a))::int] $$;
-- wpick('a', '3', 'b', '1'): 'a' three times as often as 'b'
CREATE FUNCTION wpick(VARIADIC a text[]) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	total int := 0;
	x int;
BEGIN
	FOR i IN 1 .. cardinality(a) / 2 LOOP
		total := total + a[2 * i]::int;
	END LOOP;
	x := floor(random() * total)::int;
	FOR i IN 1 .. cardinality(a) / 2 LOOP
		x := x - a[2 * i]::int;
		IF x < 0 THEN
			RETURN a[2 * i - 1];
		END IF;
	END LOOP;
END
$$;
-- a typed SQL literal, and a field of COPY's text format
CREATE FUNCTION lit(v anyelement) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(quote_literal(v), 'NULL') || '::' || pg_typeof(v)::text $$;
CREATE FUNCTION cf(v anyelement) RETURNS text LANGUAGE sql AS $$ SELECT coalesce(v::text, '\N') $$;
CREATE FUNCTION nullor(p float8, v text) RETURNS text LANGUAGE sql AS $$ SELECT CASE WHEN random() < p THEN NULL ELSE v END $$;

CREATE TYPE post_row AS (user_id int, blog_id int, is_published boolean, is_deleted boolean, rating int, score numeric,
                         tag text, note text);
CREATE FUNCTION rand_score() RETURNS numeric LANGUAGE sql AS $$
	-- half the time from a small set whose sums often come back to zero, with different scales
	SELECT CASE WHEN random() < 0.5 THEN pick('1.5', '-1.5', '0.50', '-0.5', '0', '2.25', '-2.250')::numeric
	            ELSE round((random() * 40 - 10)::numeric, rint(0, 3)) END $$;
CREATE FUNCTION rand_post() RETURNS post_row LANGUAGE plpgsql AS $$
DECLARE
	r post_row;
BEGIN
	r.user_id := nullor(0.08, rint(1, 12)::text)::int;
	r.blog_id := rint(1, 10);
	r.is_published := chance(0.75);
	r.is_deleted := chance(0.15);
	r.rating := nullor(0.1, rint(-3, 10)::text)::int;
	r.score := CASE WHEN chance(0.15) THEN NULL ELSE rand_score() END;
	r.tag := nullor(0.15, pick('Red', 'red', 'RED', 'Blue', 'blue', 'bLUE', 'Green', 'green', 'yellow', 'Yellow', 'x', 'X', ''));
	r.note := nullor(0.7, pick('n1', 'n2', 'unpublish', 'bump', 'retag', 'keep'));
	RETURN r;
END
$$;
CREATE FUNCTION post_values(r post_row) RETURNS text LANGUAGE sql AS $$
	SELECT format('(%s, %s, %s, %s, %s, %s, %s, %s)', lit(r.user_id), lit(r.blog_id), lit(r.is_published),
	              lit(r.is_deleted), lit(r.rating), lit(r.score), lit(r.tag), lit(r.note)) $$;
CREATE FUNCTION post_copy(r post_row) RETURNS text LANGUAGE sql AS $$
	SELECT concat_ws(E'\t', cf(r.user_id), cf(r.blog_id), cf(r.is_published), cf(r.is_deleted), cf(r.rating),
	                 cf(r.score), cf(r.tag), cf(r.note)) $$;

CREATE TYPE event_row AS (day int, user_id int, kind text, qty int, amount numeric);
CREATE FUNCTION rand_event(lo int, hi int) RETURNS event_row LANGUAGE plpgsql AS $$
DECLARE
	r event_row;
BEGIN
	r.day := rint(lo, hi);
	r.user_id := nullor(0.1, rint(1, 8)::text)::int;
	r.kind := nullor(0.1, pick('click', 'view', 'buy', 'spam', 'Click'));
	r.qty := nullor(0.1, rint(-2, 20)::text)::int;
	r.amount := CASE WHEN chance(0.1) THEN NULL ELSE rand_score() END;
	RETURN r;
END
$$;
CREATE FUNCTION event_values(r event_row) RETURNS text LANGUAGE sql AS $$
	SELECT format('(%s, %s, %s, %s, %s)', lit(r.day), lit(r.user_id), lit(r.kind), lit(r.qty), lit(r.amount)) $$;
CREATE FUNCTION event_copy(r event_row) RETURNS text LANGUAGE sql AS $$
	SELECT concat_ws(E'\t', cf(r.day), cf(r.user_id), cf(r.kind), cf(r.qty), cf(r.amount)) $$;

-- A random set of rows of a table: a few picked by hash, a slice by id, or rows of one key.
CREATE FUNCTION posts_pred() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	m int := rint(2, 15);
BEGIN
	CASE rint(1, 7)
	WHEN 1 THEN RETURN format('id IN (SELECT id FROM posts ORDER BY hashint4(id # %s), id LIMIT %s)', rint(1, 999999), rint(1, 3));
	WHEN 2 THEN RETURN format('id IN (SELECT id FROM posts ORDER BY hashint4(id # %s), id LIMIT %s)', rint(1, 999999), rint(4, 40));
	WHEN 3, 4 THEN RETURN format('id %% %s = %s', m, rint(0, m - 1));
	WHEN 5 THEN RETURN format('blog_id = %s', rint(1, 10));
	WHEN 6 THEN RETURN format('user_id IS NOT DISTINCT FROM %s', coalesce(nullor(0.2, rint(1, 12)::text), 'NULL'));
	ELSE RETURN format('lower(tag) IS NOT DISTINCT FROM %s',
	                   coalesce(quote_literal(nullor(0.2, pick('red', 'blue', 'green', 'x', 'yellow', ''))), 'NULL'));
	END CASE;
END
$$;
CREATE FUNCTION events_pred(rel text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	m int := rint(2, 12);
BEGIN
	CASE rint(1, 6)
	WHEN 1 THEN RETURN format('id IN (SELECT id FROM %s ORDER BY hashint8(id # %s), id LIMIT %s)', rel, rint(1, 999999), rint(1, 3));
	WHEN 2 THEN RETURN format('id IN (SELECT id FROM %s ORDER BY hashint8(id # %s), id LIMIT %s)', rel, rint(1, 999999), rint(4, 30));
	WHEN 3 THEN RETURN format('id %% %s = %s', m, rint(0, m - 1));
	WHEN 4 THEN RETURN format('day %% 10 BETWEEN %s AND %s', m - 2, m + 1);
	WHEN 5 THEN RETURN format('kind IS NOT DISTINCT FROM %s',
	                          coalesce(quote_literal(nullor(0.2, pick('click', 'view', 'buy', 'spam', 'Click'))), 'NULL'));
	ELSE RETURN format('user_id IS NOT DISTINCT FROM %s', coalesce(nullor(0.2, rint(1, 8)::text), 'NULL'));
	END CASE;
END
$$;

-- One random statement on posts (or, for the writable CTE kinds, on posts and events).
CREATE FUNCTION gen_posts(OUT stmt text, OUT label text) LANGUAGE plpgsql AS $$
DECLARE
	cols constant text := 'user_id, blog_id, is_published, is_deleted, rating, score, tag, note';
	vals text[] := '{}';
	n int;
	a int;
	b int;
	m int;
BEGIN
	label := wpick('insert_one', '6', 'insert_multi', '9', 'insert_select', '3', 'insert_series', '3', 'copy', '4',
	               'update_move', '8', 'update_swap', '3', 'update_flags', '6', 'update_values', '7',
	               'update_untouched', '5', 'update_noop', '2', 'update_row', '4', 'update_from', '2', 'view', '3',
	               'update_all', '1', 'delete', '7', 'delete_one', '3', 'delete_using', '2', 'upsert', '3',
	               'upsert_nothing', '2', 'merge', '3', 'merge_untouched', '1', 'wcte_move', '2', 'wcte_update_insert', '1',
	               'wcte_cross', '1', 'empty', '1');
	m := rint(2, 9);
	CASE label
	WHEN 'insert_one' THEN
		stmt := format('INSERT INTO posts (%s) VALUES %s;', cols, post_values(rand_post()));
	WHEN 'insert_multi' THEN
		FOR i IN 1 .. rint(2, 25) LOOP
			vals := vals || post_values(rand_post());
		END LOOP;
		stmt := format('INSERT INTO posts (%s) VALUES %s;', cols, array_to_string(vals, ', '));
	WHEN 'insert_select' THEN
		stmt := format('INSERT INTO posts (%s) SELECT user_id, 1 + (blog_id + %s) %% 10, NOT is_published, is_deleted, '
		               'rating + %s, -score, upper(tag), note FROM posts WHERE %s ORDER BY id LIMIT %s;',
		               cols, rint(0, 9), rint(-2, 2), posts_pred(), rint(1, 30));
	WHEN 'insert_series' THEN
		stmt := format($f$INSERT INTO posts (%s) SELECT nullif(abs(h) %% 13, 0), 1 + abs(h) %% 10, h %% 4 <> 0, h %% 7 = 0, $f$ ||
		               $f$nullif(abs(h) %% 15, 14) - 3, (h %% 200) / 8.0, (ARRAY['Red', 'red', NULL, 'blue', 'BLUE', '', 'Green'])[1 + abs(h) %% 7], $f$ ||
		               $f$NULL FROM (SELECT hashint4(g + %s) AS h FROM generate_series(1, %s) g) s;$f$,
		               cols, rint(1, 999999), rint(1, 30));
	WHEN 'copy' THEN
		FOR i IN 1 .. rint(1, 40) LOOP
			vals := vals || post_copy(rand_post());
		END LOOP;
		stmt := format(E'COPY posts (%s) FROM STDIN;\n%s\n\\.', cols, array_to_string(vals, E'\n'));
	WHEN 'update_move' THEN
		stmt := format('UPDATE posts SET %s WHERE %s;',
		               pick(format('blog_id = %s', rint(1, 10)),
		                    format('blog_id = 1 + (blog_id + %s) %% 10', rint(1, 9)),
		                    format('user_id = %s', coalesce(nullor(0.2, rint(1, 12)::text), 'NULL')),
		                    'user_id = blog_id, blog_id = coalesce(user_id % 10, 0) + 1',
		                    format('blog_id = %s, user_id = %s, tag = %s', rint(1, 10), coalesce(nullor(0.2, rint(1, 12)::text), 'NULL'),
		                           coalesce(quote_literal(nullor(0.2, pick('Red', 'blue', 'GREEN', 'x', ''))), 'NULL'))),
		               posts_pred());
	WHEN 'update_swap' THEN
		a := rint(1, 10);
		b := rint(1, 10);
		stmt := pick(format('UPDATE posts SET blog_id = CASE blog_id WHEN %s THEN %s ELSE %s END WHERE blog_id IN (%s, %s) AND id %% %s <> 0;',
		                    a, b, a, a, b, m),
		             format('UPDATE posts SET user_id = CASE WHEN user_id = %s THEN %s ELSE %s END WHERE user_id IN (%s, %s);',
		                    a, b, a, a, b),
		             format('UPDATE posts SET tag = CASE WHEN lower(tag) = ''red'' THEN ''blue'' ELSE ''Red'' END WHERE lower(tag) IN (''red'', ''blue'') AND id %% %s <> 0;', m));
	WHEN 'update_flags' THEN
		stmt := format('UPDATE posts SET %s WHERE %s;',
		               pick('is_published = NOT is_published', 'is_deleted = NOT is_deleted',
		                    'is_published = true, is_deleted = false', 'is_published = NOT is_published, is_deleted = NOT is_deleted'),
		               posts_pred());
	WHEN 'update_values' THEN
		stmt := format('UPDATE posts SET %s WHERE %s;',
		               pick(format('rating = rating + %s', rint(-3, 3)), 'rating = NULL', format('rating = %s', rint(-3, 10)),
		                    'rating = -coalesce(rating, 0)', 'score = -score', 'score = round(score, 1)',
		                    format('score = score + %s', rand_score()), 'score = NULL', format('score = %s', rand_score()),
		                    'tag = upper(tag)', 'tag = lower(tag)', 'tag = NULL', 'tag = ''''',
		                    format('tag = %L', pick('Red', 'blue', 'Green', 'x', 'yellow')),
		                    format('rating = rating + 1, score = score * %s, tag = %L', rint(-2, 2), pick('BLUE', 'x'))),
		               posts_pred());
	WHEN 'update_untouched' THEN
		stmt := pick(format('UPDATE posts SET note = %s WHERE %s;',
		                    coalesce(quote_literal(nullor(0.2, pick('n1', 'n2', 'unpublish', 'bump', 'retag', 'keep'))), 'NULL'), posts_pred()),
		             format('UPDATE posts SET id = -id WHERE %s;', posts_pred()));
	WHEN 'update_noop' THEN
		stmt := format('UPDATE posts SET %s WHERE %s;',
		               pick('tag = tag, blog_id = blog_id, rating = rating', 'is_published = is_published',
		                    'score = score + 0', 'user_id = user_id, note = note'),
		               posts_pred());
	WHEN 'update_row' THEN
		stmt := format('UPDATE posts SET (%s) = %s WHERE id = (SELECT id FROM posts ORDER BY hashint4(id # %s), id LIMIT 1);',
		               cols, post_values(rand_post()), rint(1, 999999));
	WHEN 'update_from' THEN
		a := rint(1, 10);
		b := 1 + (a + rint(0, 8)) % 10;
		stmt := format('UPDATE posts p SET blog_id = v.nb, rating = p.rating + v.d FROM (VALUES (%s, %s, 1), (%s, %s, -1)) v(ob, nb, d) '
		               'WHERE p.blog_id = v.ob AND p.id %% %s <> 0;', a, b, b, a, m);
	WHEN 'view' THEN
		stmt := pick(format('UPDATE posts_v SET blog_id = %s, tag = %L WHERE %s;', rint(1, 10), pick('Red', 'green'), posts_pred()),
		             format('UPDATE posts_v SET is_deleted = NOT is_deleted, note = ''v'' WHERE %s;', posts_pred()),
		             format('DELETE FROM posts_v WHERE %s;', posts_pred()),
		             format('INSERT INTO posts_v (%s) VALUES %s, %s;', cols, post_values(rand_post()), post_values(rand_post())));
	WHEN 'update_all' THEN
		stmt := pick('UPDATE posts SET rating = rating - 1;', 'UPDATE posts SET is_published = NOT is_published;',
		             'UPDATE posts SET blog_id = 11 - blog_id;');
	WHEN 'delete' THEN
		stmt := format('DELETE FROM posts WHERE %s;', posts_pred());
	WHEN 'delete_one' THEN
		stmt := format('DELETE FROM posts WHERE id = (SELECT id FROM posts ORDER BY hashint4(id # %s), id LIMIT 1);', rint(1, 999999));
	WHEN 'delete_using' THEN
		stmt := format('DELETE FROM posts p USING (VALUES (%s), (%s)) v(b) WHERE p.blog_id = v.b AND p.id %% %s = 0;',
		               rint(1, 10), rint(1, 10), m);
	WHEN 'upsert', 'upsert_nothing' THEN
		FOR i IN 1 .. rint(0, 3) LOOP
			vals := vals || post_values(rand_post());
		END LOOP;
		stmt := format('INSERT INTO posts (id, %s) SELECT id, %s FROM posts WHERE %s', cols, cols, posts_pred());
		IF cardinality(vals) > 0 THEN
			stmt := stmt || format(' UNION ALL SELECT nextval(''posts_id_seq'')::int, * FROM (VALUES %s) v', array_to_string(vals, ', '));
		END IF;
		IF label = 'upsert' THEN
			stmt := stmt || ' ON CONFLICT (id) DO UPDATE SET '
			        || pick('rating = coalesce(posts.rating, 0) + 1, is_published = NOT posts.is_published',
			                'blog_id = 1 + EXCLUDED.blog_id % 10, user_id = EXCLUDED.rating',
			                'tag = upper(EXCLUDED.tag), note = ''u''', 'note = ''touched''',
			                'is_deleted = NOT posts.is_deleted WHERE posts.blog_id % 2 = 0') || ';';
		ELSE
			stmt := stmt || pick(' ON CONFLICT DO NOTHING;', ' ON CONFLICT (id) DO UPDATE SET blog_id = 1 WHERE false;');
		END IF;
	WHEN 'merge' THEN
		stmt := format($f$MERGE INTO posts p USING (SELECT id, abs(hashint4(id # %s)) %% 4 AS act FROM posts WHERE %s $f$ ||
		               $f$UNION ALL SELECT NULL::int, g FROM generate_series(1, %s) g) s ON p.id = s.id $f$ ||
		               $f$WHEN MATCHED AND s.act = 0 THEN DELETE $f$ ||
		               $f$WHEN MATCHED AND s.act = 1 THEN UPDATE SET is_published = NOT p.is_published, rating = coalesce(p.rating, 0) + 1 $f$ ||
		               $f$WHEN MATCHED AND s.act = 2 THEN UPDATE SET note = 'merged' $f$ ||
		               $f$WHEN MATCHED THEN UPDATE SET blog_id = 1 + p.blog_id %% 10, tag = upper(p.tag) $f$ ||
		               $f$WHEN NOT MATCHED THEN INSERT (%s) VALUES (s.act, 1 + s.act %% 10, true, false, s.act, s.act * 0.25, 'Merge', NULL);$f$,
		               rint(1, 999999), posts_pred(), rint(0, 3), cols);
	WHEN 'merge_untouched' THEN
		stmt := format('MERGE INTO posts p USING (SELECT id FROM posts WHERE %s) s ON p.id = s.id WHEN MATCHED THEN UPDATE SET note = %L;',
		               posts_pred(), pick('unpublish', 'bump', 'retag', 'm'));
	WHEN 'wcte_move' THEN
		stmt := format('WITH d AS (DELETE FROM posts WHERE %s RETURNING *) INSERT INTO posts (%s) '
		               'SELECT user_id, 1 + blog_id %% 10, is_published, is_deleted, rating, score, tag, note FROM d;',
		               posts_pred(), cols);
	WHEN 'wcte_update_insert' THEN
		stmt := format('WITH u AS (UPDATE posts SET rating = coalesce(rating, 0) + 1, blog_id = %s WHERE %s RETURNING *) '
		               'INSERT INTO posts (%s) SELECT user_id, blog_id, NOT is_published, is_deleted, rating, score, tag, note FROM u;',
		               rint(1, 10), posts_pred(), cols);
	WHEN 'wcte_cross' THEN
		stmt := format('WITH d AS (DELETE FROM posts WHERE %s RETURNING *) INSERT INTO events (day, user_id, kind, qty, amount) '
		               'SELECT (blog_id * 4) %% 40, user_id, lower(tag), rating, score FROM d;', posts_pred());
	ELSE -- 'empty': the statement triggers fire with empty transition tables
		stmt := pick('UPDATE posts SET blog_id = blog_id + 1 WHERE false;', 'DELETE FROM posts WHERE id IS NULL;',
		             format('INSERT INTO posts (%s) SELECT %s FROM posts WHERE false;', cols, cols));
	END CASE;
END
$$;

-- One random statement on events, its partitions or its intermediate partitioned table. d_exists: events_d
-- (FROM 40 TO 50) is attached now.
CREATE FUNCTION gen_events(d_exists boolean, OUT stmt text, OUT label text) LANGUAGE plpgsql AS $$
DECLARE
	cols constant text := 'day, user_id, kind, qty, amount';
	vals text[] := '{}';
	leaf text;
	lo int;
	hi int;
BEGIN
	label := wpick('ev_insert', '8', 'ev_insert_leaf', '4', 'ev_insert_select', '2', 'ev_copy', '3', 'ev_move', '7',
	               'ev_move_mid', '3', 'ev_update', '5', 'ev_update_leaf', '3', 'ev_delete', '5', 'ev_delete_leaf', '2',
	               'ev_upsert', '2', 'ev_merge', '2', 'ev_truncate_leaf', '1');
	CASE label
	WHEN 'ev_insert' THEN
		FOR i IN 1 .. rint(1, 20) LOOP
			vals := vals || event_values(rand_event(0, 49));
		END LOOP;
		stmt := format('INSERT INTO events (%s) VALUES %s;', cols, array_to_string(vals, ', '));
	WHEN 'ev_insert_leaf', 'ev_copy' THEN
		leaf := pick('events', 'events_a', 'events_b', 'events_b_lo', 'events_b_hi', 'events_c', 'events_def',
		             CASE WHEN d_exists THEN 'events_d' ELSE 'events_a' END);
		lo := CASE leaf WHEN 'events' THEN 0 WHEN 'events_a' THEN 0 WHEN 'events_c' THEN 20 WHEN 'events_def' THEN 30
		                WHEN 'events_d' THEN 40 WHEN 'events_b_hi' THEN 15 ELSE 10 END;
		hi := CASE leaf WHEN 'events' THEN 49 WHEN 'events_b_lo' THEN 14 WHEN 'events_b_hi' THEN 19 ELSE lo + 9 END;
		FOR i IN 1 .. rint(1, 20) LOOP
			IF label = 'ev_copy' THEN
				vals := vals || event_copy(rand_event(lo, hi));
			ELSE
				vals := vals || event_values(rand_event(lo, hi));
			END IF;
		END LOOP;
		IF label = 'ev_copy' THEN
			stmt := format(E'COPY %s (%s) FROM STDIN;\n%s\n\\.', leaf, cols, array_to_string(vals, E'\n'));
		ELSE
			stmt := format('INSERT INTO %s (%s) VALUES %s;', leaf, cols, array_to_string(vals, ', '));
		END IF;
		label := label || ':' || leaf;
	WHEN 'ev_insert_select' THEN
		stmt := format('INSERT INTO events (%s) SELECT (day + %s) %% 50, user_id, kind, qty + 1, amount FROM events WHERE %s ORDER BY id LIMIT %s;',
		               cols, rint(1, 49), events_pred('events'), rint(1, 25));
	WHEN 'ev_move' THEN -- cross-partition updates through the root
		stmt := format('UPDATE events SET %s WHERE %s;',
		               pick(format('day = (day + %s) %% 50', rint(1, 49)), 'day = 49 - day',
		                    format('day = (day + %s) %% 50, kind = %L, user_id = %s', rint(1, 49), pick('click', 'view', 'Click'), rint(1, 8)),
		                    format('day = %s', rint(0, 49))),
		               events_pred('events'));
	WHEN 'ev_move_mid' THEN -- rows move between the partitions of events_b only
		stmt := format('UPDATE events_b SET day = CASE WHEN day < 15 THEN day + %s ELSE day - %s END, kind = %L WHERE %s;',
		               rint(1, 5), rint(1, 5), pick('view', 'buy', 'spam', 'click'), events_pred('events_b'));
	WHEN 'ev_update' THEN
		stmt := format('UPDATE events SET %s WHERE %s;',
		               pick('qty = qty + 1', 'amount = -amount', format('user_id = %s', coalesce(nullor(0.2, rint(1, 8)::text), 'NULL')),
		                    format('kind = %s', coalesce(quote_literal(nullor(0.2, pick('view', 'buy', 'spam', 'Click', 'click'))), 'NULL')),
		                    'qty = NULL', format('amount = %s', rand_score())),
		               events_pred('events'));
	WHEN 'ev_update_leaf' THEN
		leaf := pick('events_a', 'events_b_lo', 'events_c', 'events_def', CASE WHEN d_exists THEN 'events_d' ELSE 'events_c' END);
		lo := CASE leaf WHEN 'events_a' THEN 0 WHEN 'events_b_lo' THEN 10 WHEN 'events_c' THEN 20 WHEN 'events_def' THEN 30 ELSE 40 END;
		hi := CASE leaf WHEN 'events_b_lo' THEN 5 ELSE 10 END; -- days within the partition, from lo
		stmt := format('UPDATE %s SET %s WHERE %s;', leaf,
		               pick('qty = coalesce(qty, 0) + 2, user_id = 1 + coalesce(user_id, 0) % 8', 'amount = amount * 2',
		                    format('day = %s + (day - %s + %s) %% %s', lo, lo, rint(1, 4), hi), 'kind = ''spam'''),
		               events_pred(leaf));
		label := label || ':' || leaf;
	WHEN 'ev_delete' THEN
		stmt := format('DELETE FROM events WHERE %s;', events_pred('events'));
	WHEN 'ev_delete_leaf' THEN
		leaf := pick('events_a', 'events_b', 'events_b_hi', 'events_c', 'events_def', CASE WHEN d_exists THEN 'events_d' ELSE 'events_a' END);
		stmt := format('DELETE FROM %s WHERE %s;', leaf, events_pred(leaf));
		label := label || ':' || leaf;
	WHEN 'ev_upsert' THEN
		stmt := format('INSERT INTO events (id, %s) SELECT id, %s FROM events WHERE %s UNION ALL SELECT nextval(''events_id_seq''), * FROM (VALUES %s) v '
		               'ON CONFLICT (id, day) DO UPDATE SET %s;',
		               cols, cols, events_pred('events'), event_values(rand_event(0, 49)),
		               pick('qty = coalesce(events.qty, 0) + 1, amount = EXCLUDED.amount', 'user_id = 9 - coalesce(events.user_id, 0)'));
	WHEN 'ev_merge' THEN
		stmt := format($f$MERGE INTO events e USING (SELECT id, day, abs(hashint8(id # %s)) %% 4 AS act FROM events WHERE %s $f$ ||
		               $f$UNION ALL SELECT NULL::bigint, g, g %% 4 FROM generate_series(1, %s) g) s ON e.id = s.id AND e.day = s.day $f$ ||
		               $f$WHEN MATCHED AND s.act = 0 THEN DELETE $f$ ||
		               $f$WHEN MATCHED AND s.act = 1 THEN UPDATE SET day = (e.day + 17) %% 50 $f$ ||
		               $f$WHEN MATCHED THEN UPDATE SET qty = coalesce(e.qty, 0) - 1, kind = 'view' $f$ ||
		               $f$WHEN NOT MATCHED THEN INSERT (%s) VALUES (s.day * 3, s.act, 'buy', s.act, s.act / 3.0);$f$,
		               rint(1, 999999), events_pred('events'), rint(0, 3), cols);
	ELSE -- 'ev_truncate_leaf': the partition's rows are taken away before it is emptied
		leaf := pick('events_a', 'events_b_lo', 'events_c', 'events_def', 'events_b');
		stmt := format('TRUNCATE %s;', leaf);
		label := label || ':' || leaf;
	END CASE;
END
$$;

-- counters.compact() of one counter (or of all, cname NULL) as a test: it returns the number of log rows that were
-- pending in the counters it compacts, and leaves their logs empty (this session writes nothing meanwhile).
CREATE FUNCTION compact_checked(cname text, label text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	k counters.counter;
	n bigint;
	pending bigint := 0;
	folded bigint;
	left_over bigint := 0;
BEGIN
	FOR k IN SELECT * FROM counters.counter c WHERE c.mode IN ('log', 'sharded') AND (cname IS NULL OR c.name = cname) LOOP
		EXECUTE format('SELECT count(*) FROM %s', k.log) INTO n;
		pending := pending + n;
	END LOOP;
	folded := counters.compact(cname);
	FOR k IN SELECT * FROM counters.counter c WHERE c.mode IN ('log', 'sharded') AND (cname IS NULL OR c.name = cname) LOOP
		EXECUTE format('SELECT count(*) FROM %s', k.log) INTO n;
		left_over := left_over + n;
	END LOOP;
	RETURN is(ARRAY[folded, left_over], ARRAY[pending, 0],
	          format('%s: compact(%s) folds the %s pending log rows and empties the log', label, coalesce(cname, ''), pending));
END
$$;
-- A random counter with a table of its own switches to the other mode (as a statement of the script).
CREATE FUNCTION switch_stmt() RETURNS text LANGUAGE sql AS $$
	SELECT format('DO $do$ BEGIN PERFORM counters.alter_counter(c.name, CASE c.mode WHEN %L THEN %L ELSE %L END) '
	              'FROM counters.counter c WHERE c.name = %L; END $do$;', 'exact', current_setting('prop.other_mode'), 'exact',
	              pick(VARIADIC ARRAY(SELECT name FROM counter_defs WHERE target IS NULL AND name NOT IN ('px', 'pd') ORDER BY name)))
$$;

-- The whole script: batches of random statements, each followed by the checks, plus the plan.
CREATE FUNCTION gen_script(batches int, targeted int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	out text[] := '{}';
	labels text[];
	ntests int := 0;
	g record;
	mode text;
	d_exists boolean := false;
	d_before boolean;
	ncounters int := (SELECT count(*) FROM recounts);
	cname text;
	label text;
	log_variant constant boolean := current_setting('prop.counters_mode') <> 'exact';
BEGIN
	FOR b IN 1 .. batches LOOP
		labels := '{}';
		out := out || format('-- batch %s', b);
		IF log_variant THEN -- between batches: a compaction, a switch of mode
			IF chance(0.15) THEN
				cname := CASE WHEN chance(0.5) THEN NULL
				              ELSE pick(VARIADIC ARRAY(SELECT name FROM counter_defs WHERE target IS NULL ORDER BY name)) END;
				out := out || format('SELECT compact_checked(%L, %L);', cname, format('before batch %s', b));
				ntests := ntests + 1;
			END IF;
			IF chance(0.12) THEN
				out := out || switch_stmt();
			END IF;
		END IF;
		IF b = batches / 3 THEN
			out := out || 'CREATE TRIGGER posts_before_update BEFORE UPDATE ON posts FOR EACH ROW EXECUTE FUNCTION posts_before_update();'::text;
		ELSIF b = 2 * batches / 3 THEN
			out := out || 'DROP TRIGGER posts_before_update ON posts;'::text;
		END IF;
		mode := wpick('commit', '6', 'rollback', '2', 'savepoint', '2');
		d_before := d_exists;
		out := out || 'BEGIN;'::text;
		IF mode = 'savepoint' THEN
			out := out || 'SAVEPOINT batch;'::text;
		END IF;

		-- rare whole-batch events first
		IF chance(0.06) THEN -- events_d appears or goes
			IF NOT d_exists THEN
				out := out || 'DELETE FROM events WHERE day >= 40;'::text;
				IF chance(0.5) THEN
					out := out || 'CREATE TABLE events_d PARTITION OF events FOR VALUES FROM (40) TO (50);'::text;
					labels := labels || 'create_partition'::text;
				ELSE -- a table with rows joins the partitioned table
					out := out || 'CREATE TABLE events_d (LIKE events INCLUDING DEFAULTS);'::text;
					out := out || format('INSERT INTO events_d (day, user_id, kind, qty, amount) VALUES %s, %s, %s;',
					                     event_values(rand_event(40, 49)), event_values(rand_event(40, 49)),
					                     event_values(rand_event(40, 49)));
					out := out || 'ALTER TABLE events ATTACH PARTITION events_d FOR VALUES FROM (40) TO (50);'::text;
					labels := labels || 'attach_partition'::text;
				END IF;
				d_exists := true;
			ELSE
				IF chance(0.5) THEN
					out := out || 'DROP TABLE events_d;'::text;
					labels := labels || 'drop_partition'::text;
				ELSE -- rows leave with the partition; what happens to the table afterwards counts nowhere
					out := out || 'ALTER TABLE events DETACH PARTITION events_d;'::text;
					out := out || 'UPDATE events_d SET qty = 1000; INSERT INTO events_d (day, kind) VALUES (45, ''gone''); DROP TABLE events_d;'::text;
					labels := labels || 'detach_partition'::text;
				END IF;
				d_exists := false;
			END IF;
		END IF;
		IF chance(0.02) THEN -- a partition leaves, is written to while detached, and comes back with its rows
			out := out || 'ALTER TABLE events DETACH PARTITION events_c;'::text;
			out := out || format('DELETE FROM events_c WHERE %s; INSERT INTO events_c (%s) VALUES %s; UPDATE events_c SET qty = coalesce(qty, 0) + 5;',
			                     events_pred('events_c'), 'day, user_id, kind, qty, amount', event_values(rand_event(20, 29)));
			out := out || format('SELECT * FROM check_counters(%L);', format('batch %s, events_c detached', b));
			ntests := ntests + ncounters;
			out := out || 'ALTER TABLE events ATTACH PARTITION events_c FOR VALUES FROM (20) TO (30);'::text;
			labels := labels || 'detach_attach_events_c'::text;
		END IF;
		IF chance(0.03) THEN -- a counter is dropped and declared again: the initial fill counts what is there now
			cname := pick(VARIADIC ARRAY(SELECT name FROM counter_defs ORDER BY name));
			IF log_variant THEN -- in either mode
				out := out || format('DO $do$ BEGIN PERFORM counters.drop_counter(%1$L); '
				                     'PERFORM counters.create_counter(name, definition, target, CASE WHEN target IS NULL AND name NOT IN (''px'', ''pd'') THEN %2$L ELSE %3$L END) '
				                     'FROM counter_defs WHERE name = %1$L; END $do$;', cname, pick(current_setting('prop.other_mode'), 'exact'), 'exact');
			ELSE
				out := out || format('DO $do$ BEGIN PERFORM counters.drop_counter(%1$L); '
				                     'PERFORM counters.create_counter(name, definition, target) FROM counter_defs WHERE name = %1$L; END $do$;', cname);
			END IF;
			labels := labels || ('recreate_' || cname);
		END IF;
		IF chance(0.05) THEN -- a counter switches mode, exact <-> log: values stay exact
			cname := pick(VARIADIC ARRAY(SELECT name FROM counter_defs WHERE target IS NULL AND name NOT IN ('px', 'pd') ORDER BY name));
			out := out || format('DO $do$ BEGIN PERFORM counters.alter_counter(%1$L, CASE (SELECT mode FROM counters.counter '
			                     'WHERE name = %1$L) WHEN ''exact'' THEN %2$L ELSE ''exact'' END); END $do$;', cname,
			                     current_setting('prop.other_mode'));
			labels := labels || ('switch_mode_' || cname);
		END IF;
		IF chance(0.1) THEN -- log-mode counters are compacted
			out := out || 'DO $do$ BEGIN PERFORM counters.compact(); END $do$;'::text;
			labels := labels || 'compact'::text;
		END IF;
		IF chance(0.015) THEN
			out := out || pick('TRUNCATE posts;', 'TRUNCATE events;', 'TRUNCATE posts, events;', 'DELETE FROM posts;');
			labels := labels || 'truncate'::text;
		END IF;

		FOR s IN 1 .. rint(3, 12) LOOP
			IF log_variant THEN -- inside the batch: a compaction, a switch of mode (undone if the batch rolls back)
				IF chance(0.06) THEN
					cname := CASE WHEN chance(0.3) THEN NULL
					              ELSE pick(VARIADIC ARRAY(SELECT name FROM counter_defs WHERE target IS NULL ORDER BY name)) END;
					out := out || format('SELECT compact_checked(%L, %L);', cname, format('batch %s', b));
					ntests := ntests + 1;
					labels := labels || ('compact_' || coalesce(cname, 'all'));
				END IF;
				IF chance(0.015) THEN
					out := out || switch_stmt();
					labels := labels || 'switch'::text;
				END IF;
			END IF;
			IF chance(0.04) THEN -- a statement fails in a trigger that runs after the counters' triggers
				g := gen_posts();
				WHILE g.label = 'copy' LOOP
					g := gen_posts();
				END LOOP;
				out := out || 'SET prop.boom = on;'::text;
				out := out || format('SELECT throws_ok(%L, %L, %L, %L);', g.stmt, 'P0001', 'boom',
				                     format('batch %s: %s failing after the counters ran leaves no trace', b, g.label));
				out := out || 'RESET prop.boom;'::text;
				ntests := ntests + 1;
				labels := labels || ('boom_' || g.label);
			ELSIF chance(0.06) THEN -- a few statements in a savepoint of their own
				out := out || 'SAVEPOINT inner_sp;'::text;
				label := 'inner(';
				FOR i IN 1 .. rint(1, 3) LOOP
					g := CASE WHEN chance(0.6) THEN gen_posts() ELSE gen_events(d_exists) END;
					out := out || g.stmt;
					label := label || g.label || ' ';
				END LOOP;
				IF chance(0.7) THEN
					out := out || 'ROLLBACK TO SAVEPOINT inner_sp;'::text;
					label := label || 'rolled back)';
				ELSE
					out := out || 'RELEASE SAVEPOINT inner_sp;'::text;
					label := label || 'released)';
				END IF;
				labels := labels || label;
			ELSE
				g := CASE WHEN chance(0.62) THEN gen_posts() ELSE gen_events(d_exists) END;
				out := out || g.stmt;
				labels := labels || g.label;
			END IF;
		END LOOP;

		label := format('batch %s [%s]', b, array_to_string(labels, ', '));
		IF mode = 'commit' THEN
			out := out || 'COMMIT;'::text;
			out := out || format('SELECT * FROM check_counters(%L);', label);
			ntests := ntests + ncounters;
		ELSIF mode = 'rollback' THEN
			out := out || format('SELECT * FROM check_counters(%L);', label || ' before ROLLBACK');
			out := out || 'ROLLBACK;'::text;
			out := out || format('SELECT * FROM check_counters(%L);', label || ' after ROLLBACK');
			ntests := ntests + 2 * ncounters;
			d_exists := d_before;
		ELSE -- rolled back to the savepoint, then a statement more, committed
			out := out || format('SELECT * FROM check_counters(%L);', label || ' before ROLLBACK TO SAVEPOINT');
			out := out || 'ROLLBACK TO SAVEPOINT batch;'::text;
			d_exists := d_before;
			g := CASE WHEN chance(0.6) THEN gen_posts() ELSE gen_events(d_exists) END;
			out := out || g.stmt;
			out := out || 'COMMIT;'::text;
			out := out || format('SELECT * FROM check_counters(%L);', format('batch %s [%s] after ROLLBACK TO SAVEPOINT, COMMIT', b, g.label));
			ntests := ntests + 2 * ncounters;
		END IF;
	END LOOP;
	-- leave the tables as the targeted tests expect them
	IF NOT d_exists THEN
		out := out || 'DELETE FROM events WHERE day >= 40; CREATE TABLE events_d PARTITION OF events FOR VALUES FROM (40) TO (50);'::text;
	END IF;
	RETURN format(E'SELECT plan(%s);\nSELECT diag(%L);\nSELECT * FROM check_counters(''initial fill'');\n',
	              ntests + 2 * ncounters + targeted,
	              format('seed %s, %s batches, counters_mode %s', current_setting('prop.seed'), batches,
	                     current_setting('prop.counters_mode')))
	       || array_to_string(out, E'\n') || E'\n';
END
$$;

-- ---------------------------------------------------------------------------------------------------------------
-- run
-- ---------------------------------------------------------------------------------------------------------------
SELECT format('%s/counters_property_%s_%s.psql', :'tmpdir', pg_backend_pid(), to_char(clock_timestamp(), 'YYYYMMDDHH24MISSUS')) AS script \gset
SELECT set_config('prop.seed', :'seed', false), setseed(:seed) \gset
SELECT gen_script(:batches, :targeted_tests) \g :script
\i :script

-- ---------------------------------------------------------------------------------------------------------------
-- targeted statement shapes (each in a transaction that is rolled back)
-- ---------------------------------------------------------------------------------------------------------------
-- known rows, whatever the random run left
DELETE FROM posts;
INSERT INTO posts (user_id, blog_id, is_published, is_deleted, rating, score, tag, note)
SELECT nullif(g % 7, 0), 1 + g % 10, g % 5 <> 0, g % 11 = 0, nullif(g % 13, 12) - 2, nullif(g % 9, 8) / 4.0,
       (ARRAY['Red', 'blue', NULL, 'x', ''])[1 + g % 5], CASE WHEN g % 3 = 0 THEN 'n' END
  FROM generate_series(1, 200) g;
-- Two UPDATEs of posts in one statement (a writable CTE): their AFTER statement triggers share one transition table.
-- Whichever SET list the trigger is told about, the rows of both UPDATEs must be counted.
BEGIN;
SAVEPOINT targeted;
WITH a AS (UPDATE posts SET note = 'cte' WHERE id % 2 = 0 RETURNING 1)
UPDATE posts SET rating = coalesce(rating, 0) + 100, blog_id = 1 + blog_id % 10 WHERE id % 2 = 1;
SELECT same_rows(have, want, 'writable CTE updating an uncounted column, main UPDATE counted columns: ub exact')
  FROM recounts WHERE name = 'ub';
ROLLBACK TO SAVEPOINT targeted;
WITH a AS (UPDATE posts SET rating = coalesce(rating, 0) + 100, blog_id = 1 + blog_id % 10 WHERE id % 2 = 0 RETURNING 1)
UPDATE posts SET note = 'main' WHERE id % 2 = 1;
SELECT same_rows(have, want, 'writable CTE updating counted columns, main UPDATE an uncounted column: ub exact')
  FROM recounts WHERE name = 'ub';
ROLLBACK;

-- A counter whose FILTER reads the whole row is refused: adding or dropping a column would change it without a write.
SELECT throws_ok($$SELECT counters.create_counter('whole_row',
	'SELECT blog_id, count(*) FILTER (WHERE posts IS NOT NULL) AS complete, count(*) AS n FROM posts GROUP BY blog_id')$$,
	'0A000', NULL, 'a definition reading the whole row is refused');

-- A counter declared in a transaction counts the writes that follow in that transaction, also on a source whose
-- other counters (and triggers) exist already.
BEGIN;
SELECT count(*) FROM counters.create_counter('late', 'SELECT blog_id, count(*) AS n FROM posts GROUP BY blog_id') \gset
INSERT INTO posts (user_id, blog_id, is_published, is_deleted) SELECT 1, 1 + g % 10, true, false FROM generate_series(1, 10) g;
SELECT same_rows('SELECT blog_id, n FROM late', 'SELECT blog_id, count(*) FROM posts GROUP BY blog_id',
                 'counter declared earlier in the same transaction counts an INSERT');
ROLLBACK;

-- everything is still exact after the targeted tests
SELECT * FROM check_counters('end');

SELECT * FROM finish();

RESET search_path;
DROP SCHEMA counters_property CASCADE;
DROP EXTENSION counters;

\getenv keep COUNTERS_PROPERTY_KEEP
\if :{?keep}
\echo '# generated script kept in' :script
\else
\setenv COUNTERS_PROPERTY_SCRIPT :script
\! rm -f "$COUNTERS_PROPERTY_SCRIPT"
\endif
