#!/usr/bin/env bash
# Definition fuzzing: FUZZ_N (default 1500) generated definitions -- valid, near-valid and malformed: odd types
# (int2/int8/numeric/text with collations/date/timestamp/bool/uuid/enum/domain/array), quoted and unicode names,
# deep expressions, huge literals, wrong aggregates, volatile functions, subqueries, syntax errors -- are sent to
# counters.create_counter, each in a subtransaction, with a fixed seed (FUZZ_SEED). Every rejection must be a clean
# ERROR (never an internal error: XX000/XX001) naming the counter; every acceptance must count correctly: random
# writes on its source, then counters.verify(name) empty, then drop_counter leaving nothing behind. The backend must
# survive throughout, and its memory must not grow over a batch of rejected definitions.
set -euo pipefail
db=counters_fuzz
N=${FUZZ_N:-1500}
SEED=${FUZZ_SEED:-0.31}
echo "fuzz_definitions: seed $SEED, $N definitions"
dropdb --if-exists "$db" >/dev/null 2>&1
createdb "$db"
trap 'dropdb --if-exists "$db" >/dev/null 2>&1 || true' EXIT
sql=$(mktemp)
trap 'rm -f "$sql"; dropdb --if-exists "$db" >/dev/null 2>&1 || true' EXIT
cat > "$sql" <<'SQL'
CREATE EXTENSION counters;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN small_pos AS int CHECK (VALUE >= 0);
CREATE TABLE "Fuzz Ünïcode" (
	id serial PRIMARY KEY, i2 int2, i4 int, i8 bigint, n numeric, t text, tc text COLLATE "C", d date,
	ts timestamp, b boolean, u uuid, m mood, sp small_pos, arr int[], "Weird ""Col""" int, "ключ" text);
CREATE FUNCTION fuzz_row() RETURNS void LANGUAGE sql AS $$
	INSERT INTO "Fuzz Ünïcode" (i2, i4, i8, n, t, tc, d, ts, b, u, m, sp, arr, "Weird ""Col""", "ключ")
	SELECT (random() * 5)::int2, (random() * 9)::int, (random() * 1e12)::int8, round((random() * 100)::numeric, 3),
	       (ARRAY['a', 'A', 'b', NULL, 'ß', '日本'])[1 + (random() * 5)::int], (ARRAY['x', 'X', NULL])[1 + (random() * 2)::int],
	       date '2026-01-01' + (random() * 5)::int, timestamp '2026-01-01' + random() * interval '3 days',
	       random() < 0.5, ('00000000-0000-0000-0000-00000000000' || (random() * 3)::int)::uuid,
	       (ARRAY['sad', 'ok', 'happy'])[1 + (random() * 2)::int]::mood, (random() * 3)::int,
	       ARRAY[(random() * 2)::int], (random() * 4)::int, (ARRAY['ключ', 'キー', NULL])[1 + (random() * 2)::int]
$$;
SELECT fuzz_row() FROM generate_series(1, 200);
SELECT setseed(:seed);
CREATE FUNCTION pick(VARIADIC a text[]) RETURNS text LANGUAGE sql AS $$ SELECT a[1 + floor(random() * cardinality(a))::int] $$;
CREATE FUNCTION key_expr(depth int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	IF depth > 0 AND random() < 0.3 THEN
		RETURN pick('lower(' || key_expr(depth - 1) || '::text)', '(' || key_expr(depth - 1) || ') IS NULL',
		            'coalesce(i4, 0) + ' || depth, 'abs(i2 - ' || depth || ')', 'upper(tc)');
	END IF;
	RETURN pick('i2', 'i4', 'i8', 't', 'tc', 'd', 'ts', 'b', 'u', 'm', 'sp', 'arr', '"Weird ""Col"""', '"ключ"',
	            'date_trunc(''hour'', ts)', 't COLLATE "C"', 'i4 % 3', 'n > 50', 'length(t)', 'sp::int');
END $$;
CREATE FUNCTION value_expr() RETURNS text LANGUAGE sql AS $$
	SELECT CASE WHEN random() < 0.75 THEN
	       pick('count(*)', 'count(t)', 'sum(i4)', 'sum(i8)', 'sum(n)', 'sum(i2)', 'count(*) FILTER (WHERE b)',
	            'sum(n) FILTER (WHERE i4 > 3)', 'sum(sp)', 'count("ключ")', 'sum(i4 * 2 - i2)', 'count(u)',
	            'sum(' || repeat('(', 60) || 'i4' || repeat(')', 60) || ')', 'sum(length(t))')
	       ELSE
	       pick('count(DISTINCT i4)', 'avg(i4)', 'max(n)', 'sum(i4::float8)',
	            'sum(random())', 'count(*) + 1', 'sum(i4) FILTER (WHERE now() > ts)', 'sum((SELECT 1))',
	            'string_agg(t, '','')', 'sum(' || repeat('(', 60) || 'i4' || repeat(')', 60) || ')',
	            'sum(i4 + ' || repeat('1 + ', 300) || '0)', 'count(''' || repeat('x', 20000) || ''')') END
$$;
CREATE FUNCTION gen_definition() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	nkeys int := 1 + (random() * 2)::int - (random() < 0.05)::int;
	keys text[] := '{}';
	vals text[] := '{}';
	k text;
	sel text;
	def text;
BEGIN
	FOR i IN 1 .. nkeys LOOP
		k := key_expr(3);
		keys := keys || k;
		vals := vals || (k || ' AS ' || quote_ident(pick('k', 'K', 'ключ', 'a b', 'k"q', 'x') || i));
	END LOOP;
	FOR i IN 1 .. 1 + (random() * 3)::int LOOP
		vals := vals || (value_expr() || ' AS ' || quote_ident('v' || i || pick('', 'É', ' ')));
	END LOOP;
	sel := array_to_string(vals, ', ');
	def := 'SELECT ' || sel || ' FROM "Fuzz Ünïcode"' ||
	       pick('', '', '', '', ' WHERE b', ' WHERE i4 > 2', ' WHERE random() > 0.5', ' WHERE t IN (SELECT t FROM "Fuzz Ünïcode")',
	            ' WHERE ' || repeat('NOT ', 200) || 'b') ||
	       CASE WHEN nkeys > 0 THEN ' GROUP BY ' || array_to_string(keys, ', ') ELSE '' END;
	-- near-valid and malformed mutations
	RETURN CASE (random() * 30)::int
		WHEN 0 THEN replace(def, ' GROUP BY ', ' GROUP BY 1, ')
		WHEN 1 THEN def || ' HAVING count(*) > 1'
		WHEN 2 THEN def || ' ORDER BY 1'
		WHEN 3 THEN replace(def, 'FROM "Fuzz Ünïcode"', 'FROM "Fuzz Ünïcode" f JOIN "Fuzz Ünïcode" g USING (id)')
		WHEN 4 THEN left(def, (random() * length(def))::int)
		WHEN 5 THEN replace(def, 'SELECT', 'SELECT DISTINCT')
		WHEN 6 THEN def || '; DROP TABLE "Fuzz Ünïcode"'
		WHEN 7 THEN replace(def, 'FROM "Fuzz Ünïcode"', 'FROM no_such_table')
		WHEN 8 THEN 'WITH x AS (SELECT 1) ' || def
		ELSE def END;
END $$;
CREATE TABLE outcomes (n int, definition text, accepted boolean, sqlstate text, message text, verify_rows bigint);
CREATE FUNCTION fuzz(n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	def text;
	name text;
	state text;
	msg text;
	drift bigint;
BEGIN
	FOR i IN 1 .. n LOOP
		def := gen_definition();
		name := pick('fz', 'Fz Ü', 'f"q', 'ключ') || i;
		BEGIN
			PERFORM counters.create_counter(name, def, mode => pick('exact', 'exact', 'log', 'sharded'));
			-- accepted: it must count
			PERFORM fuzz_row() FROM generate_series(1, 5);
			UPDATE "Fuzz Ünïcode" SET i4 = i4 + 1, t = upper(t), b = NOT b WHERE id % 7 = i % 7;
			DELETE FROM "Fuzz Ünïcode" WHERE id IN (SELECT id FROM "Fuzz Ünïcode" ORDER BY random() LIMIT 3);
			SELECT count(*) INTO drift FROM counters.verify(name);
			PERFORM counters.drop_counter(name);
			INSERT INTO outcomes VALUES (i, def, true, NULL, NULL, drift);
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
			INSERT INTO outcomes VALUES (i, def, false, state, msg, NULL);
		END;
	END LOOP;
END $$;
SELECT fuzz(:n);
-- memory: another batch of rejected declarations must not grow the backend's memory much
CREATE TEMP TABLE mem AS SELECT sum(total_bytes) AS before FROM pg_backend_memory_contexts;
DO $$ BEGIN FOR i IN 1 .. 500 LOOP BEGIN PERFORM counters.create_counter('m' || i, 'SELECT avg(i4) AS a FROM "Fuzz Ünïcode" GROUP BY i2');
	EXCEPTION WHEN OTHERS THEN NULL; END; END LOOP; END $$;
SELECT 'memory_growth_kb ' || ((sum(total_bytes) - (SELECT before FROM mem)) / 1024)::bigint FROM pg_backend_memory_contexts;
SELECT 'accepted ' || count(*) FILTER (WHERE accepted) || ' rejected ' || count(*) FILTER (WHERE NOT accepted) FROM outcomes;
SELECT 'internal ' || n || ' ' || sqlstate || ' ' || message || ' :: ' || left(definition, 300) FROM outcomes WHERE sqlstate LIKE 'XX%';
SELECT 'drift ' || n || ' ' || verify_rows || ' :: ' || left(definition, 300) FROM outcomes WHERE accepted AND verify_rows <> 0;
SELECT 'unnamed ' || n || ' ' || sqlstate || ' ' || message FROM outcomes
 WHERE NOT accepted AND message NOT LIKE 'counter %' AND sqlstate NOT IN ('42601', '42P01', '42703', '42883', '42804', '42725', '42P18', '22P02', '42P10', '0A000', '42803', '42702');
SELECT 'leftover ' || name FROM counters.counter;
SQL
out=$(psql -X -q -At -v ON_ERROR_STOP=1 -v n="$N" -v seed="$SEED" -d "$db" -f "$sql" 2>&1) || { echo "$out" | tail -20; echo "fuzz_definitions: FAILED (the session died or an error escaped)"; exit 1; }
echo "$out" | grep -E '^(accepted|memory_growth_kb)'
bad=$(echo "$out" | grep -E '^(internal|drift|leftover) ' || true)
[ -z "$bad" ] || { echo "$bad" | head -20; echo "fuzz_definitions: FAILED"; exit 1; }
unnamed=$(echo "$out" | grep -E '^unnamed ' | head -5 || true)
[ -z "$unnamed" ] || echo "$unnamed (PostgreSQL's own errors, not naming the counter)"
growth=$(echo "$out" | awk '/^memory_growth_kb/ {print $2}')
[ "${growth:-0}" -lt 2048 ] || { echo "fuzz_definitions: FAILED: backend memory grew by ${growth} kB over 500 rejections"; exit 1; }
echo "fuzz_definitions: ok"
