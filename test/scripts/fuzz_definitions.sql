-- Schema and checking functions of test/scripts/fuzz_definitions.sh (run there with psql; variable icu = 1 or 0).
-- Three sources with odd types, collations and names, a few relations that are not valid sources, random writes per
-- source, and fuzz_one(n): declare case n, judge the outcome, and record it in fuzz_outcome.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION counters;
CREATE SCHEMA "Schéma ☃";
SET search_path = "Schéma ☃", public;
\if :icu
CREATE COLLATION public.fuzz_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
\else
CREATE COLLATION public.fuzz_ci FROM "C";
\endif
CREATE TYPE public.mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN public.small_pos AS int CHECK (VALUE >= 0);
CREATE TYPE public.pair AS (x int, y text);
CREATE SEQUENCE public.fuzz_seq;
-- aggregates named count and sum in another schema: not the built-in ones
CREATE SCHEMA evil;
CREATE AGGREGATE evil.sum(int) (sfunc = int4pl, stype = int, initcond = '0');
CREATE FUNCTION evil.cnt(int, anyelement) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1 + 1';
CREATE AGGREGATE evil.count(anyelement) (sfunc = evil.cnt, stype = int, initcond = '0');
-- an aggregate whose schema and name take 62 bytes each (31 two-byte characters)
CREATE SCHEMA "жжжжжжжжжжжжжжжжжжжжжжжжжжжжжжж";
CREATE FUNCTION "жжжжжжжжжжжжжжжжжжжжжжжжжжжжжжж".sf(int, int, int) RETURNS int LANGUAGE sql IMMUTABLE
	AS 'SELECT $1 + $2';
CREATE AGGREGATE "жжжжжжжжжжжжжжжжжжжжжжжжжжжжжжж"."ёёёёёёёёёёёёёёёёёёёёёёёёёёёёёёё"(int, int) (
	sfunc = "жжжжжжжжжжжжжжжжжжжжжжжжжжжжжжж".sf, stype = int, initcond = '0');

-- s1: every odd type, a nondeterministic collation, quoted and unicode names, a dropped column in the middle
CREATE TABLE "Schéma ☃"."Fuzz Ünïcode" (
	id serial PRIMARY KEY, i2 int2, i4 int, nn int NOT NULL DEFAULT 0, i8 bigint, gone int, n numeric,
	n2 numeric(8, 2), t text, tc text COLLATE "C", tci text COLLATE public.fuzz_ci, vc varchar(6), bp char(3), d date,
	ts timestamp, tz timestamptz, b boolean, u uuid, m public.mood, sp public.small_pos, arr int[], tarr text[],
	j jsonb, r int4range, iv interval, f8 float8, by bytea, ip inet, "Weird ""Col""" int, "ключ" text, "列" int,
	"select" int, "UPPER" int, pr public.pair);
ALTER TABLE "Schéma ☃"."Fuzz Ünïcode" DROP COLUMN gone;
-- s2: partitioned; p_mid has its own column order and a dropped column, and was attached
CREATE TABLE public.parted (id serial, pk int NOT NULL, a int, t text COLLATE public.fuzz_ci, n numeric, b boolean,
	d date, m public.mood, arr int[], big bigint) PARTITION BY RANGE (pk);
CREATE TABLE public.p_low PARTITION OF public.parted FOR VALUES FROM (MINVALUE) TO (3);
CREATE TABLE public.p_mid (big bigint, junk text, arr int[], m public.mood, d date, b boolean, n numeric,
	t text COLLATE public.fuzz_ci, a int, pk int NOT NULL, id int NOT NULL);
ALTER TABLE public.p_mid DROP COLUMN junk;
ALTER TABLE public.parted ATTACH PARTITION public.p_mid FOR VALUES FROM (3) TO (6);
CREATE TABLE public.p_def PARTITION OF public.parted DEFAULT;
-- s3: every key column NOT NULL (the counter table gets a primary key)
CREATE TABLE public."MiXeD ñ" (id serial PRIMARY KEY, k int NOT NULL, k2 text COLLATE "C" NOT NULL,
	k3 bigint NOT NULL, v int, w numeric, f boolean NOT NULL);
-- relations that are not valid sources
CREATE VIEW public.v_fuzz AS SELECT * FROM "Schéma ☃"."Fuzz Ünïcode";
CREATE TABLE public.inh_parent (i4 int, t text, b boolean);
CREATE TABLE public.inh_child () INHERITS (public.inh_parent);
CREATE MATERIALIZED VIEW public.mv_fuzz AS SELECT i4, t, b FROM "Schéma ☃"."Fuzz Ünïcode";

-- random values (random() is seeded per case by fuzz_one)
CREATE FUNCTION public.rnd(a anyarray) RETURNS anyelement LANGUAGE sql AS 'SELECT a[1 + floor(random() * cardinality(a))::int]';
CREATE FUNCTION public.nul(x anyelement) RETURNS anyelement LANGUAGE sql AS 'SELECT CASE WHEN random() < 0.08 THEN NULL ELSE x END';
CREATE FUNCTION public.rtext() RETURNS text LANGUAGE sql AS $$
	SELECT nul(rnd(ARRAY['a', 'A', 'b', 'B', 'ä', 'Ä', 'ß', 'ss', 'жук', 'Жук', '日本', '', ' a', 'a ', 'x-y', 'ǅ', 'ǆ']))$$;
CREATE FUNCTION public.s1_insert(k int) RETURNS void LANGUAGE sql AS $$
	INSERT INTO "Schéma ☃"."Fuzz Ünïcode" (i2, i4, nn, i8, n, n2, t, tc, tci, vc, bp, d, ts, tz, b, u, m, sp, arr, tarr,
		j, r, iv, f8, by, ip, "Weird ""Col""", "ключ", "列", "select", "UPPER", pr)
	SELECT nul((random() * 5)::int2), nul((random() * 9)::int), (random() * 4)::int, nul((random() * 1e12)::int8),
	       nul(round((random() * 100)::numeric, 3)), nul(round((random() * 50)::numeric, 1)), rtext(), rtext(), rtext(),
	       rtext(), nul(rnd(ARRAY['a', 'A', 'bb', 'жук', ''])),
	       nul(date '2026-01-01' + (random() * 4)::int), nul(timestamp '2026-01-01' + random() * interval '3 days'),
	       nul(timestamptz '2026-01-01 00:00+00' + (random() * 60)::int * interval '1 hour'), nul(random() < 0.5),
	       nul(('00000000-0000-0000-0000-00000000000' || (random() * 3)::int)::uuid),
	       nul(rnd(ARRAY['sad', 'ok', 'happy']::mood[])), nul((random() * 3)::int::small_pos),
	       nul(rnd(ARRAY['{1}', '{1,2}', '{}', '{NULL}', '{2,1}'])::int[]),
	       nul(rnd(ARRAY['{a}', '{A,b}', '{}'])::text[]),
	       nul(rnd(ARRAY['{"k": 1}', '{"k": 2}', '{}', '{"k": null}', '{"x": [1]}']::jsonb[])),
	       nul(int4range((random() * 3)::int, 3 + (random() * 3)::int)), nul((random() * 5)::int * interval '1 hour'),
	       nul(rnd(ARRAY[0, -0.0, 0.5, 1.5, 'NaN', 2]::float8[])), nul(rnd(ARRAY['\x00', '\xff', '', '\x0000']::bytea[])),
	       nul(rnd(ARRAY['10.0.0.1', '10.0.0.1/8', '::1', '192.168.1.2']::inet[])), nul((random() * 4)::int),
	       nul(rnd(ARRAY['ключ', 'キー', 'КЛЮЧ'])), nul((random() * 3)::int), nul((random() * 2)::int), (random() * 2)::int,
	       nul(ROW((random() * 2)::int, rtext())::pair)
	  FROM generate_series(1, k)
$$;
CREATE FUNCTION public.s2_insert(k int) RETURNS void LANGUAGE sql AS $$
	INSERT INTO public.parted (pk, a, t, n, b, d, m, arr, big)
	SELECT (random() * 8)::int, nul((random() * 5)::int), rtext(), nul(round((random() * 10)::numeric, 2)),
	       nul(random() < 0.5), nul(date '2026-01-01' + (random() * 3)::int), nul(rnd(ARRAY['sad', 'ok', 'happy']::mood[])),
	       nul(rnd(ARRAY['{1}', '{1,2}', '{}'])::int[]), nul((random() * 1e15)::int8)
	  FROM generate_series(1, k)
$$;
CREATE FUNCTION public.s3_insert(k int) RETURNS void LANGUAGE sql AS $$
	INSERT INTO public."MiXeD ñ" (k, k2, k3, v, w, f)
	SELECT (random() * 4)::int, rnd(ARRAY['a', 'A', 'b', 'ä', 'жук']), (random() * 3)::int8 * 10000000000,
	       nul((random() * 100)::int), nul(round((random() * 10)::numeric, 4)), random() < 0.5
	  FROM generate_series(1, k)
$$;
SELECT setseed((mod(abs((:seed)::numeric * 1000003), 2000000) / 1000000 - 1)::float8);
SELECT s1_insert(250);
SELECT s2_insert(150);
SELECT s3_insert(100);
INSERT INTO public.inh_child VALUES (1, 'a', true);
REFRESH MATERIALIZED VIEW public.mv_fuzz;

-- One round of random writes to a source: an insert, an update of keys and values, and each with probability 1/2:
-- another update, a no-op update, a rolled-back subtransaction; per source also rows moved between partitions,
-- statements naming a partition, upserts, MERGE, now and then a TRUNCATE; a delete that keeps the newest rows.
CREATE FUNCTION public.fuzz_write(src text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	x int := (random() * 6)::int;
BEGIN
	IF src = 's1' THEN
		PERFORM s1_insert(1 + (random() * 12)::int);
		UPDATE "Schéma ☃"."Fuzz Ünïcode" SET i4 = nul((random() * 9)::int), t = rtext(), tci = upper(tci), b = NOT b,
		       n = n + 1, i2 = nul((random() * 5)::int2), m = nul(rnd(ARRAY['sad', 'ok', 'happy']::mood[])),
		       "UPPER" = (random() * 2)::int, vc = rtext(), "ключ" = nullif("ключ", 'КЛЮЧ')
		 WHERE random() < 0.12;
		IF random() < 0.5 THEN
			UPDATE "Schéma ☃"."Fuzz Ünïcode" SET arr = arr || x, j = jsonb_build_object('k', x), "列" = x, sp = x,
			       tc = rtext(), d = d + 1, ts = ts + interval '1 hour', u = NULL, pr = ROW(x, 'y')::pair,
			       f8 = x * 0.5, "Weird ""Col""" = x, tz = tz - interval '1 hour', iv = NULL, nn = x
			 WHERE id % 9 = x;
		END IF;
		IF random() < 0.5 THEN
			UPDATE "Schéma ☃"."Fuzz Ünïcode" SET t = t WHERE id % 4 = x % 4;    -- changes nothing counted
		END IF;
		IF random() < 0.5 THEN
			BEGIN
				PERFORM s1_insert(3);
				UPDATE "Schéma ☃"."Fuzz Ünïcode" SET i4 = 1 WHERE id % 5 = 0;
				RAISE EXCEPTION 'roll back' USING ERRCODE = 'P0099';
			EXCEPTION WHEN SQLSTATE 'P0099' THEN NULL;
			END;
		END IF;
		IF random() < 0.02 THEN
			TRUNCATE "Schéma ☃"."Fuzz Ünïcode";
			PERFORM s1_insert(200);
		END IF;
		DELETE FROM "Schéma ☃"."Fuzz Ünïcode" WHERE random() < 0.04 OR id IN (
			SELECT id FROM "Schéma ☃"."Fuzz Ünïcode" ORDER BY id DESC OFFSET 300);
	ELSIF src = 's2' THEN
		PERFORM s2_insert(1 + (random() * 10)::int);
		UPDATE public.parted SET pk = (random() * 8)::int, a = nul((random() * 5)::int) WHERE random() < 0.15;
		IF random() < 0.5 THEN
			UPDATE public.parted SET t = rtext(), n = round((random() * 10)::numeric, 2), b = NOT b, m = 'happy'
			 WHERE random() < 0.1;
		END IF;
		-- statements naming a partition (p_mid in its own column order)
		IF random() < 0.5 THEN
			INSERT INTO public.p_mid (id, pk, a, t, n, b, m, big)
			VALUES (nextval('parted_id_seq'), 3 + x % 3, x, rtext(), x, x % 2 = 0, 'ok', x);
			UPDATE public.p_mid SET a = a + 1, t = upper(t), arr = arr || x WHERE random() < 0.2;
		END IF;
		IF random() < 0.5 THEN
			UPDATE public.p_def SET pk = 6 + x % 3, n = n + 1 WHERE random() < 0.1;
			DELETE FROM public.p_low WHERE random() < 0.05;
		END IF;
		IF random() < 0.03 THEN
			TRUNCATE public.p_mid;
		END IF;
		DELETE FROM public.parted WHERE random() < 0.03 OR id IN (SELECT id FROM public.parted ORDER BY id DESC OFFSET 200);
	ELSIF src = 's3' THEN
		PERFORM s3_insert(1 + (random() * 8)::int);
		UPDATE public."MiXeD ñ" SET k = (random() * 4)::int, v = v + 1, f = NOT f WHERE random() < 0.15;
		IF random() < 0.5 THEN
			INSERT INTO public."MiXeD ñ" AS m (id, k, k2, k3, v, w, f)
			SELECT id, k + 1, k2 || 'x', k3, v, w, f FROM public."MiXeD ñ" WHERE random() < 0.1
			    ON CONFLICT (id) DO UPDATE SET k = excluded.k, k2 = excluded.k2;
		END IF;
		IF random() < 0.5 THEN
			MERGE INTO public."MiXeD ñ" m USING (SELECT x AS id) s ON m.id = s.id
			 WHEN MATCHED THEN UPDATE SET w = coalesce(m.w, 0) + 1
			 WHEN NOT MATCHED THEN INSERT (k, k2, k3, f) VALUES (x, 'merge', 0, true);
		END IF;
		DELETE FROM public."MiXeD ñ" WHERE random() < 0.05 OR id IN (
			SELECT id FROM public."MiXeD ñ" ORDER BY id DESC OFFSET 150);
	END IF;
END $$;

-- What the database holds besides data: compared before declaring and after dropping (or a rejection).
CREATE FUNCTION public.fuzz_objects() RETURNS text LANGUAGE sql AS $$
	SELECT format('class %s, trigger %s, type %s, constraint %s, rewrite %s, depend %s, proc %s, attrdef %s, counter %s',
		(SELECT count(*) FROM pg_class), (SELECT count(*) FROM pg_trigger), (SELECT count(*) FROM pg_type),
		(SELECT count(*) FROM pg_constraint), (SELECT count(*) FROM pg_rewrite), (SELECT count(*) FROM pg_depend),
		(SELECT count(*) FROM pg_proc), (SELECT count(*) FROM pg_attrdef), (SELECT count(*) FROM counters.counter))
$$;

-- The counter's rows compared with its definition view, independently of counters.verify(): the counter (its table,
-- or in log/sharded mode its view) must hold exactly the view's groups whose values are not all zero, with the same
-- values. Keys are the columns of the unique index of the table that stores them; they are compared with the key
-- type's equality (EXCEPT ALL), so that keys equal under a nondeterministic collation match. Returns the number of
-- rows found on one side only, or raises when the shapes differ.
CREATE FUNCTION public.fuzz_compare(cname text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	k record;
	keyrel regclass;
	keys name[];
	tcols name[];
	vcols name[];
	vals name[];
	flags name[];
	extremes name[];
	tsel text;
	vsel text;
	nonzero text;
	diff bigint;
BEGIN
	SELECT * INTO k FROM counters.counter c WHERE c.name = cname;
	keyrel := coalesce(k.totals, k.target);
	-- (a column of the index, or one its expressions read: a long text key is indexed by its digest)
	SELECT array_agg(a.attname ORDER BY a.attnum) INTO keys
	  FROM (SELECT i.indexrelid, i.indkey FROM pg_index i WHERE i.indrelid = keyrel AND i.indisunique
	         ORDER BY i.indexrelid LIMIT 1) i
	  JOIN pg_attribute a ON a.attrelid = keyrel AND a.attnum > 0
	 WHERE a.attnum = ANY (i.indkey::int2[])
	    OR EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = i.indexrelid
	                 AND d.refclassid = 'pg_class'::regclass AND d.refobjid = keyrel AND d.refobjsubid = a.attnum);
	SELECT array_agg(attname ORDER BY attnum) INTO tcols FROM pg_attribute
	 WHERE attrelid = k.target AND attnum > 0 AND NOT attisdropped;
	SELECT array_agg(attname ORDER BY attnum) INTO vcols FROM pg_attribute
	 WHERE attrelid = k.query AND attnum > 0 AND NOT attisdropped;
	-- (in log and sharded mode the counter is a view whose columns come in another order: compare by name)
	IF keys IS NULL OR NOT (tcols @> vcols AND vcols @> tcols) OR cardinality(tcols) <> cardinality(vcols)
	   OR NOT keys <@ tcols THEN
		RAISE EXCEPTION 'counter % has columns %, keys %; its definition view has columns %', cname, tcols, keys, vcols;
	END IF;
	-- (bool_or, bool_and and every columns are compared as they are, and say nothing of a group being all zeros)
	SELECT array_agg(attname) INTO flags FROM pg_attribute
	 WHERE attrelid = k.query AND attnum > 0 AND NOT attisdropped AND atttypid = 'boolean'::regtype;
	flags := coalesce(flags, '{}');
	-- (min() and max() columns: nullable columns of the counter table that are neither keys nor generated; compared as
	-- they are, a group with one counts)
	SELECT coalesce(array_agg(attname), '{}') INTO extremes FROM pg_attribute
	 WHERE k.mode = 'exact' AND attrelid = k.target AND attnum > 0 AND NOT attisdropped AND NOT attnotnull
	   AND attgenerated = '' AND attname <> ALL (keys) AND attname <> ALL (flags);
	flags := flags || extremes;
	SELECT array_agg(c) INTO vals FROM unnest(tcols) c WHERE c <> ALL (keys) AND c <> ALL (flags);
	SELECT string_agg(CASE WHEN c = ANY (keys) OR c = ANY (flags) THEN format('%I', c)
	                       ELSE format('coalesce(%I, 0)::numeric', c) END, ', ')
	  INTO vsel FROM unnest(vcols) c;
	-- (an average is NULL where nothing was averaged, on both sides)
	SELECT string_agg(CASE WHEN c = ANY (keys) OR c = ANY (flags) THEN format('%I', c)
	                       ELSE format('coalesce(%I, 0)::numeric', c) END, ', ')
	  INTO tsel FROM unnest(vcols) c;
	SELECT string_agg(format('coalesce(%I, 0) <> 0', c), ' OR ') INTO nonzero FROM unnest(vals) c;
	SELECT concat_ws(' OR ', nonzero, string_agg(format('%I IS NOT NULL', c), ' OR ')) INTO nonzero FROM unnest(extremes) c;
	EXECUTE format('SELECT (SELECT count(*) FROM (SELECT %s FROM %s EXCEPT ALL SELECT %s FROM %s WHERE %s) a)
	                     + (SELECT count(*) FROM (SELECT %s FROM %s WHERE %s EXCEPT ALL SELECT %s FROM %s) b)',
	               tsel, k.target, vsel, k.query, nonzero, vsel, k.query, nonzero, tsel, k.target) INTO diff;
	RETURN diff;
END $$;

-- The indexes fuzz_one() made for min() and max() (fuzz_extreme_<n>; a partitioned one takes its partitions' along).
CREATE FUNCTION public.fuzz_drop_indexes() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	i regclass;
BEGIN
	FOR i IN SELECT oid::regclass FROM pg_class WHERE relname LIKE 'fuzz\_extreme\_%' AND relkind IN ('i', 'I') LOOP
		EXECUTE format('DROP INDEX %s', i);
	END LOOP;
END $$;

CREATE TABLE public.fuzz_case (n int PRIMARY KEY, source text, expect text, family text, mode text, name text,
	definition text);
CREATE TABLE public.fuzz_outcome (n int PRIMARY KEY, accepted boolean, sqlstate text, message text, context text,
	failure text, detail text, ms int);

-- Declare case n, judge it, record the outcome. Never raises: every finding becomes a "failure" in fuzz_outcome.
-- An accepted counter gets a round of writes, verify(), compact() (log and sharded mode), sometimes a mode switch,
-- another round of writes, verify(), the comparison with its definition view, and drop_counter().
CREATE FUNCTION public.fuzz_one(case_n int, fuzz_seed float8) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	c public.fuzz_case;
	before text;
	after text;
	st text;
	msg text;
	ctx text;
	accepted boolean := false;
	failure text;
	detail text;
	drift bigint;
	diff bigint;
	t0 timestamptz := clock_timestamp();
	steps text;
	new_mode text;
	hint text;
BEGIN
	SELECT * INTO c FROM public.fuzz_case WHERE n = case_n;
	PERFORM setseed(mod(abs((fuzz_seed * 1000003 + case_n * 7919)::numeric), 2000000)::float8 / 1000000 - 1);
	-- drawn first, so that a case run alone (FUZZ_ONLY) makes the same choice
	new_mode := CASE WHEN random() < 0.25 THEN (ARRAY['exact', 'log', 'sharded'])[1 + (random() * 2)::int] END;
	before := public.fuzz_objects();
	-- (a min() or max() is refused with the index it needs as the hint: created, named, and declared again; the
	-- indexes go with the counter)
	FOR attempt IN 1 .. 4 LOOP
		BEGIN
			PERFORM counters.create_counter(c.name, c.definition, mode => c.mode);
			accepted := true;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, ctx = PG_EXCEPTION_CONTEXT,
			                        hint = PG_EXCEPTION_HINT;
		END;
		EXIT WHEN accepted OR st <> '0A000' OR coalesce(hint, '') NOT LIKE 'CREATE INDEX ON %' OR attempt = 4;
		BEGIN
			EXECUTE regexp_replace(hint, '^CREATE INDEX ON', format('CREATE INDEX fuzz_extreme_%s ON', attempt));
		EXCEPTION WHEN OTHERS THEN
			EXIT;    -- (an index PostgreSQL cannot build: the refusal stands)
		END;
	END LOOP;
	-- (a counter with min() or max() stays in exact mode: a switch would be refused)
	IF accepted AND EXISTS (SELECT FROM pg_class WHERE relname LIKE 'fuzz\_extreme\_%') THEN
		new_mode := NULL;
	END IF;
	IF NOT accepted THEN
		BEGIN
			PERFORM convert_to(msg, 'UTF8');    -- raises on invalid UTF-8
		EXCEPTION WHEN OTHERS THEN
			failure := 'error message is not valid UTF-8';
			msg := encode(textsend(msg), 'escape');
		END;
		IF failure IS NOT NULL THEN
			NULL;
		ELSIF st LIKE 'XX%' THEN
			failure := 'internal error';
		ELSIF c.expect = 'data' AND st LIKE '22%' THEN
			NULL;    -- the definition failed on the data, as it may
		ELSIF NOT (strpos(msg || E'\n' || coalesce(ctx, ''), format('counter "%s"', c.name)) > 0
		           OR (c.name IS NULL AND st = '42602')
		           OR (st = '42602' AND strpos(msg, quote_literal(c.name)) > 0)) THEN
			failure := 'rejection does not name the counter';
		END IF;
		-- (the subtransaction's abort removed everything; checked on every fifth case only, to save time)
		PERFORM public.fuzz_drop_indexes();
		after := CASE WHEN case_n % 5 = 0 THEN public.fuzz_objects() ELSE before END;
		IF failure IS NULL AND after <> before THEN
			failure := 'rejection left objects behind';
			detail := before || ' -> ' || after;
		END IF;
	ELSIF c.expect = 'reject' THEN
		failure := 'accepted a definition that breaks a rule';
	END IF;
	IF accepted THEN
		-- it must count: random writes, verify(), compact() in log and sharded mode, now and then a mode switch (with
		-- the counter's odd columns), more writes, verify(), the comparison with the definition view, drop_counter()
		steps := 'create_counter (' || c.mode || ')';
		BEGIN
			steps := steps || ', writes';
			PERFORM public.fuzz_write(c.source);
			-- (verify() between the rounds only when something happens between them: it is checked at the end)
			IF c.mode <> 'exact' OR new_mode IS NOT NULL THEN
				steps := steps || ', verify';
				SELECT count(*) INTO drift FROM counters.verify(c.name);
			END IF;
			IF drift > 0 THEN
				failure := coalesce(failure, 'verify() reports drift after writes');
				detail := (SELECT string_agg(format('%s %s stored %s expected %s', v.key, v.column_name, v.stored, v.expected), '; ')
				             FROM (SELECT * FROM counters.verify(c.name) LIMIT 3) v);
			END IF;
			IF c.mode <> 'exact' THEN
				steps := steps || ', compact';
				PERFORM counters.compact(c.name);
			END IF;
			IF new_mode IS NOT NULL THEN
				steps := steps || ', alter_counter (' || new_mode || ')';
				PERFORM counters.alter_counter(c.name, mode => new_mode);
			END IF;
			steps := steps || ', writes';
			PERFORM public.fuzz_write(c.source);
			steps := steps || ', verify';
			SELECT count(*) INTO drift FROM counters.verify(c.name);
			IF drift > 0 AND detail IS NULL THEN
				failure := coalesce(failure, 'verify() reports drift after writes');
				detail := (SELECT string_agg(format('%s %s stored %s expected %s', v.key, v.column_name, v.stored, v.expected), '; ')
				             FROM (SELECT * FROM counters.verify(c.name) LIMIT 3) v);
			END IF;
			steps := steps || ', compare with the definition view';
			diff := public.fuzz_compare(c.name);
			IF diff > 0 THEN
				failure := coalesce(failure, 'counter differs from its definition view');
			END IF;
			detail := concat_ws(E'\n    ', detail,
			                    CASE WHEN failure IS NOT NULL THEN 'compared with the definition view: ' || diff || ' rows on one side only' END);
			steps := steps || ', drop_counter';
			PERFORM counters.drop_counter(c.name);
			PERFORM public.fuzz_drop_indexes();
			after := public.fuzz_objects();
			IF after <> before THEN
				failure := coalesce(failure, 'drop_counter left objects behind');
				detail := coalesce(detail, before || ' -> ' || after);
			END IF;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, ctx = PG_EXCEPTION_CONTEXT;
			IF NOT (c.expect = 'data' AND st LIKE '22%') THEN
				failure := coalesce(failure, CASE WHEN st LIKE 'XX%' THEN 'internal error after acceptance'
				                                  ELSE 'accepted counter fails on writes, verify or drop' END);
			END IF;
			steps := steps || ' (failed)';
			BEGIN
				PERFORM counters.drop_counter(c.name);
				PERFORM public.fuzz_drop_indexes();
			EXCEPTION WHEN OTHERS THEN
				failure := coalesce(failure, 'drop_counter fails');
				detail := coalesce(detail, SQLSTATE || ' ' || SQLERRM);
			END;
		END;
	END IF;
	IF failure IS NOT NULL AND steps IS NOT NULL THEN
		detail := concat_ws(E'\n    ', 'steps: ' || steps, detail);
	END IF;
	INSERT INTO public.fuzz_outcome VALUES (case_n, accepted, st, left(msg, 2000), left(ctx, 2000), failure, detail,
		extract(epoch FROM clock_timestamp() - t0) * 1000);
END $$;

-- Memory of this backend: bytes in use in its memory contexts (not the blocks they reserved, which grow in steps),
-- and its private resident memory (RssAnon, kB: the shared buffers it touched do not count; NULL if unreadable).
CREATE FUNCTION public.fuzz_memory(OUT used bigint, OUT rss_kb bigint) LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		rss_kb := substring(pg_read_file('/proc/self/status') FROM 'RssAnon:\s+(\d+)')::bigint;
	EXCEPTION WHEN OTHERS THEN
		rss_kb := NULL;
	END;
	used := (SELECT sum(used_bytes) FROM pg_backend_memory_contexts);
END $$;

-- Declare the given cases again, each in a subtransaction, for the memory checks: an accepted one gets a round of
-- writes (which builds the trigger's cache of the source) and is dropped (which invalidates it).
CREATE FUNCTION public.fuzz_replay(cases int[]) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	c public.fuzz_case;
	k int := 0;
BEGIN
	PERFORM setseed(0.5);
	FOR c IN SELECT * FROM public.fuzz_case WHERE n = ANY (cases) ORDER BY n LOOP
		BEGIN
			PERFORM counters.create_counter(c.name, c.definition, mode => c.mode);
			PERFORM public.fuzz_write(c.source);
			PERFORM counters.drop_counter(c.name);
		EXCEPTION WHEN OTHERS THEN
			k := k + 1;
		END;
	END LOOP;
	RETURN k;
END $$;
