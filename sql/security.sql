--
-- security: the extension as a trust boundary, tried the way an attacker would.
--
-- 1. A role that may create tables cannot make the catalog name another role's table: every internal helper checks
--    the caller's rights on every relation it would record, the catalog and counters.maintenance are written only
--    through them, and nothing of the extension is SECURITY DEFINER.
-- 2. A counter's code (its definition's functions, triggers on its tables, threshold callbacks) runs as the counter's
--    owner inside a security-restricted operation, whoever starts the work: a superuser writing to the source,
--    running compact(), apply_retention(), verify() or rebuild() gives the owner nothing. Each attack below records
--    whose rights it ran with and tries to make its author a superuser.
-- 3. A non-superuser application role that owns its tables can use every function; any other role gets 42501, and
--    compact() or verify() without a name skip the counters the caller may not maintain or read.
-- (This file runs as counters_app, as every test after setup; SET ROLE NONE is the superuser.)
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA sec_test;
SET search_path = sec_test;
SET ROLE NONE; CREATE ROLE counters_sec_mallory; RESET ROLE;
SET ROLE NONE; CREATE ROLE counters_sec_app; RESET ROLE;
GRANT USAGE, CREATE ON SCHEMA sec_test TO counters_sec_mallory, counters_sec_app;
-- the superuser's own table, which no counter may touch
SET ROLE NONE;
CREATE TABLE vault (id int PRIMARY KEY, secret text NOT NULL);
INSERT INTO vault VALUES (1, 'a'), (2, 'b');
RESET ROLE;

--
-- 3 (first, as the attacker will try to reach its counters). The application role declares counters on its own
-- tables and uses every function, without being a superuser.
--
SET ROLE counters_sec_app;
CREATE TABLE bookings (id int PRIMARY KEY, excursion int NOT NULL, paid boolean NOT NULL, at timestamp NOT NULL);
INSERT INTO bookings SELECT i, 1 + i % 3, i % 2 = 0, '2024-01-01'::timestamp + i * interval '1 day' FROM generate_series(1, 12) i;
SELECT counters.create_counter('seats', 'SELECT excursion, count(*) FILTER (WHERE paid) AS paid FROM bookings GROUP BY excursion');
SELECT counters.create_counter('daily', 'SELECT date_trunc(''day'', at) AS day, count(*) AS n FROM bookings GROUP BY 1',
                               mode => 'sharded');
SELECT counters.create_counter('hot', 'SELECT excursion, count(*) AS n FROM bookings GROUP BY excursion', mode => 'log');
SELECT counters.set_bounds('seats', 'paid', min => 0, max => 20);
SELECT counters.set_thresholds('seats', 'paid', '{3}');
SELECT counters.alter_counter('daily', 'sharded', max_slots => 4);
SELECT counters.set_retention('daily', 'day', '10 years');
INSERT INTO bookings VALUES (100, 1, true, '2024-02-01'), (101, 2, false, '2024-02-02');
SELECT counters.compact('hot') >= 0 AS compacted, counters.apply_retention('daily') >= 0 AS retained;
SELECT counters.rebuild('seats');
SELECT * FROM counters.verify();
SELECT * FROM counters.top('seats', 'paid', 2);
SELECT counters.alter_counter('hot', 'exact');
SELECT counters.drop_counter('hot');
SELECT counter, last_verify IS NOT NULL AS verified, last_rebuild IS NOT NULL AS rebuilt FROM counters.stats ORDER BY 1;
RESET ROLE;

--
-- 1. The attacker: may create tables in the schema, owns nothing else.
--
SET ROLE counters_sec_mallory;
CREATE TABLE m_src (id int PRIMARY KEY, v int NOT NULL, at timestamp NOT NULL DEFAULT '2024-01-01');
INSERT INTO m_src SELECT i, i % 4, '2024-01-01' FROM generate_series(1, 8) i;
SELECT counters.create_counter('m_exact', 'SELECT v AS id, count(*) AS n FROM m_src GROUP BY v');
-- Every function of the extension is a documented one (and the trigger and event trigger functions, which cannot
-- be called): no internal helper that writes the catalog is there to call.
SELECT p.oid::regprocedure AS function, p.prosecdef AS security_definer
  FROM pg_proc p WHERE p.pronamespace = 'counters'::regnamespace ORDER BY p.oid::regprocedure::text;
-- point a counter at the superuser's table, or at the application's
SELECT counters.create_counter('m_steal', 'SELECT v AS id, count(*) AS n FROM m_src GROUP BY v', target => 'vault');
\echo SQLSTATE :SQLSTATE
SELECT counters.create_counter('m_steal', 'SELECT excursion, count(*) AS n FROM bookings GROUP BY excursion');
\echo SQLSTATE :SQLSTATE
-- change, forget or maintain the application's counters
SELECT counters.drop_counter('seats');
\echo SQLSTATE :SQLSTATE
SELECT counters.alter_counter('seats', 'log');
\echo SQLSTATE :SQLSTATE
SELECT counters.set_bounds('seats', 'paid');
\echo SQLSTATE :SQLSTATE
SELECT counters.set_thresholds('seats', 'paid', '{}');
\echo SQLSTATE :SQLSTATE
SELECT counters.set_retention('daily', 'day', NULL);
\echo SQLSTATE :SQLSTATE
SELECT counters.rebuild('seats');
\echo SQLSTATE :SQLSTATE
SELECT counters.compact('daily');
\echo SQLSTATE :SQLSTATE
SELECT counters.apply_retention('daily');
\echo SQLSTATE :SQLSTATE
SELECT * FROM counters.verify('seats');
\echo SQLSTATE :SQLSTATE
-- without a name: only what the caller may do (nothing of the application's, no error)
SELECT counters.compact() AS folded, counters.apply_retention() AS expired, counters.rebuild() AS rebuilt;
SELECT counter FROM counters.verify();
-- write the catalog or the maintenance records directly
INSERT INTO counters.counter (name, source, target, query, owns_target) VALUES ('x', 'm_src', 'vault', 'm_exact_definition', false);
\echo SQLSTATE :SQLSTATE
UPDATE counters.maintenance SET verify_wrong = 0;
\echo SQLSTATE :SQLSTATE
-- TRUNCATE of the own source and dropping it: the superuser's table stays untouched
TRUNCATE m_src;
DROP TABLE m_src CASCADE;
RESET ROLE;
SET ROLE NONE;
SELECT * FROM vault ORDER BY id;
RESET ROLE;
SELECT name FROM counters.counter ORDER BY name;
SELECT * FROM counters.bounds;
-- nothing of the extension runs with its owner's rights
SELECT count(*) AS security_definer_functions FROM pg_proc WHERE pronamespace = 'counters'::regnamespace AND prosecdef;

--
-- 2. The attacker's code, where the superuser's routine work would run it: in a counter's definition (an IMMUTABLE
-- wrapper around a volatile function), in triggers on its counter tables (fired by compaction, retention, rebuild),
-- in a threshold callback. Each records whose rights it runs with and tries to make its author a superuser.
--
SET ROLE counters_sec_mallory;
CREATE TABLE audit (what text, who name, superuser boolean);
CREATE FUNCTION attack(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO sec_test.audit SELECT what, current_user, r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
	-- (a session setting changed for whoever called: the caller's next statements would resolve names here)
	PERFORM pg_catalog.set_config('search_path', 'sec_test, public', false);
	BEGIN
		EXECUTE 'ALTER ROLE counters_sec_mallory SUPERUSER';
	EXCEPTION WHEN OTHERS THEN
		NULL;
	END;
END $$;
CREATE FUNCTION bucket(v int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	PERFORM sec_test.attack('definition');
	RETURN v % 3;
END $$;
-- (IMMUTABLE with constant arguments: planning the definition folds it, i.e. runs it)
CREATE FUNCTION gate() RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	PERFORM sec_test.attack('planning');
	RETURN true;
END $$;
CREATE FUNCTION on_counter_table() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM sec_test.attack(TG_OP || ' of ' || TG_TABLE_NAME);
	RETURN NULL;
END $$;
CREATE FUNCTION on_threshold(c text, k jsonb, col text, o numeric, n numeric, t numeric, d text) RETURNS void
	LANGUAGE plpgsql AS $$BEGIN PERFORM sec_test.attack('callback'); END $$;
CREATE TABLE m_events (id int PRIMARY KEY, v int NOT NULL, at timestamp NOT NULL);
GRANT INSERT, UPDATE, DELETE ON m_events TO PUBLIC;
INSERT INTO m_events SELECT i, i, '2024-01-01'::timestamp + i * interval '1 day' FROM generate_series(1, 6) i;
SELECT counters.create_counter('m_wrapped', 'SELECT sec_test.bucket(v) AS b, count(*) AS n FROM m_events GROUP BY 1');
SELECT counters.create_counter('m_log', 'SELECT v % 2 AS parity, count(*) AS n FROM m_events GROUP BY 1', mode => 'log');
SELECT counters.create_counter('m_days', 'SELECT date_trunc(''day'', at) AS day, count(*) AS n FROM m_events GROUP BY 1');
SELECT counters.set_retention('m_days', 'day', '1 day');
SELECT counters.create_counter('m_gated', 'SELECT v AS id, count(*) FILTER (WHERE sec_test.gate()) AS n FROM m_events GROUP BY 1', mode => 'log');
SELECT counters.create_counter('m_switch', 'SELECT sec_test.bucket(v) AS b, count(*) AS n FROM m_events GROUP BY 1');
SELECT counters.set_thresholds('m_wrapped', 'n', '{3}', 'on_threshold(text, jsonb, text, numeric, numeric, numeric, text)');
CREATE TRIGGER attack AFTER INSERT OR UPDATE OR DELETE ON m_log_totals FOR EACH ROW EXECUTE FUNCTION on_counter_table();
CREATE TRIGGER attack AFTER DELETE ON m_log_log FOR EACH ROW EXECUTE FUNCTION on_counter_table();
CREATE TRIGGER attack AFTER DELETE ON m_days FOR EACH ROW EXECUTE FUNCTION on_counter_table();
CREATE TRIGGER attack AFTER INSERT OR UPDATE ON m_wrapped FOR EACH ROW EXECUTE FUNCTION on_counter_table();
TRUNCATE audit;
-- The superuser writes to the attacker's table (crossing the threshold), then does routine maintenance.
SET ROLE NONE;
SET search_path = sec_test;  -- (the attacker's declarations ran its code in its own session, changing this)
SELECT current_user = session_user AS superuser_now, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user);
INSERT INTO m_events SELECT i, i, '2024-02-01' FROM generate_series(7, 9) i;
SELECT counters.compact() > 0 AS compacted;
SELECT counters.apply_retention() >= 0 AS retained;
SELECT * FROM counters.verify();
SELECT * FROM counters.top('m_gated', 'n', 1);
-- The superuser switches the attacker's counter to log mode: the new log and view belong to the counter's owner, so
-- the next write still runs the definition as the attacker.
SELECT counters.alter_counter('m_switch', 'log');
SELECT relname, relowner::regrole FROM pg_class WHERE relname LIKE 'm\_switch%' AND relkind IN ('r', 'v') ORDER BY 1;
INSERT INTO m_events VALUES (10, 10, '2024-02-02');
-- (a counter value gone wrong, for rebuild to repair: changed without firing the attacker's triggers, which a
-- superuser's own write to the attacker's table would run with the superuser's rights, as any trigger)
SET session_replication_role = replica;
UPDATE m_wrapped SET n = n + 1;
RESET session_replication_role;
SET client_min_messages = warning;
SELECT counters.rebuild() > 0 AS rebuilt;
RESET client_min_messages;
-- the superuser's session settings are its own
SHOW search_path;
-- everything ran as the attacker, restricted; nothing as the superuser
SELECT what, who, superuser FROM audit GROUP BY 1, 2, 3 ORDER BY 1, 2;
SELECT rolsuper AS mallory_is_superuser FROM pg_roles WHERE rolname = 'counters_sec_mallory';
SELECT * FROM counters.verify();
RESET ROLE;

--
-- 4. Re-declaration, whoever starts it. A superuser's routine ALTER COLUMN ... TYPE of the attacker's source drops
-- and declares the attacker's counter again, alter_counter(definition => ...) and alter_counter_concurrently() do the
-- same: the definition's code (filling the table, planning), the threshold callback afterwards and the counter's
-- tables stay the attacker's, restricted. And the definition is read back with search_path pinned: a function a third
-- role planted in the superuser's search_path is not bound into it.
--
SET ROLE NONE; CREATE ROLE counters_sec_planter; RESET ROLE;
SET ROLE counters_sec_mallory;
CREATE FUNCTION bucket8(v bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	PERFORM sec_test.attack('definition');
	RETURN v % 3;
END $$;
CREATE TABLE m_typed (id int PRIMARY KEY, v int NOT NULL, tag text NOT NULL);
GRANT INSERT ON m_typed TO PUBLIC;
INSERT INTO m_typed SELECT i, i, CASE WHEN i % 2 = 0 THEN 'Red' ELSE 'red' END FROM generate_series(1, 6) i;
SELECT counters.create_counter('m_retyped', 'SELECT sec_test.bucket8(v) AS b, count(*) AS n FROM m_typed GROUP BY 1');
SELECT counters.set_thresholds('m_retyped', 'n', '{4}', 'on_threshold(text, jsonb, text, numeric, numeric, numeric, text)');
SELECT counters.create_counter('m_tags', 'SELECT lower(tag) AS tag, count(*) AS n FROM m_typed GROUP BY 1');
CREATE TABLE private_notes (note text);
INSERT INTO private_notes VALUES ('mallory''s secret');
RESET ROLE;
-- the third role plants lower(varchar), a closer match than lower(text) once the column is varchar
CREATE SCHEMA sec_plant;
GRANT USAGE, CREATE ON SCHEMA sec_plant TO counters_sec_planter;
GRANT USAGE ON SCHEMA sec_plant TO PUBLIC;
SET ROLE counters_sec_planter;
CREATE FUNCTION sec_plant.lower(x varchar) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	PERFORM sec_test.attack('planted: ' || (SELECT string_agg(note, ', ') FROM sec_test.private_notes));
	RETURN pg_catalog.lower(x::text);
END $$;
GRANT EXECUTE ON FUNCTION sec_plant.lower(varchar) TO PUBLIC;
RESET ROLE;
SET ROLE counters_sec_mallory;
GRANT INSERT ON audit TO PUBLIC;
TRUNCATE audit;
RESET ROLE;
SET ROLE NONE;
SET search_path = sec_plant, sec_test;
ALTER TABLE m_typed ALTER COLUMN v TYPE bigint;
ALTER TABLE m_typed ALTER COLUMN tag TYPE varchar(100);
SELECT EXISTS (SELECT FROM pg_depend d JOIN pg_rewrite r ON d.objid = r.oid JOIN pg_proc p ON d.refobjid = p.oid
                WHERE r.ev_class = 'sec_test.m_tags_definition'::regclass AND p.pronamespace = 'sec_plant'::regnamespace)
       AS planted_bound;
INSERT INTO m_typed SELECT i, i, 'RED' FROM generate_series(7, 12) i;
SET search_path = sec_test;
SELECT counters.alter_counter('m_tags', definition => 'SELECT lower(tag) AS tag, count(*) AS n FROM m_typed GROUP BY 1');
-- (a CALL commits its steps: outside a transaction block, as the superuser)
CALL counters.alter_counter_concurrently('m_retyped', 'SELECT sec_test.bucket8(v) AS b, count(*) AS n FROM sec_test.m_typed GROUP BY 1');
INSERT INTO m_typed VALUES (13, 13, 'red');
SELECT what, who, superuser FROM audit GROUP BY 1, 2, 3 ORDER BY 1, 2;
SELECT c.relname, c.relowner::regrole AS owner FROM pg_class c
 WHERE c.relnamespace = 'sec_test'::regnamespace AND c.relname ~ '^m_(retyped|tags)' AND c.relkind IN ('r', 'v') ORDER BY 1;
SELECT * FROM counters.thresholds WHERE counter = 'm_retyped';
-- both counters equal their recount
CREATE TEMP TABLE m_typed_expected AS SELECT v % 3 AS b, count(*) AS n FROM m_typed GROUP BY 1;
SELECT * FROM regress.diff('m_retyped', 'm_typed_expected');
CREATE TEMP TABLE m_tags_expected AS SELECT lower(tag::text) AS tag, count(*) AS n FROM m_typed GROUP BY 1;
SELECT * FROM regress.diff('m_tags', 'm_tags_expected');
DROP SCHEMA sec_plant CASCADE;
-- A superuser declaring a counter over the attacker's table: the counter is the table owner's (as an index is), and
-- its definition runs as that owner, restricted, while it is parsed, planned and filled.
TRUNCATE audit;
SELECT counters.create_counter('m_by_super', 'SELECT sec_test.bucket8(v) AS b, count(*) AS n FROM m_typed GROUP BY 1');
INSERT INTO m_typed VALUES (14, 14, 'red');
SELECT what, who, superuser FROM audit GROUP BY 1, 2, 3 ORDER BY 1, 2;
SELECT c.relname, c.relowner::regrole AS owner FROM pg_class c
 WHERE c.relnamespace = 'sec_test'::regnamespace AND c.relname ~ '^m_by_super' AND c.relkind IN ('r', 'v') ORDER BY 1;
CREATE TEMP TABLE m_by_super_expected AS SELECT v % 3 AS b, count(*) AS n FROM m_typed GROUP BY 1;
SELECT * FROM regress.diff('m_by_super', 'm_by_super_expected');
SELECT counters.drop_counter('m_by_super');
RESET ROLE;

--
-- 5. Rendering a key runs the key type's code. jsonb renders a value of a type with a cast to json through that cast,
-- and any role may create a type and its cast. Keys are rendered for a threshold's callback (exact mode: by the
-- writing statement; log mode: by compaction, which the background worker runs as the bootstrap superuser) and by
-- top(): always as the counter's owner, restricted. A NOTIFY carries no key, so it renders none.
--
SET ROLE counters_sec_mallory;
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE FUNCTION mood_json(m mood) RETURNS json LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	PERFORM sec_test.attack('cast');
	RETURN pg_catalog.to_json(m::text);
END $$;
CREATE CAST (mood AS json) WITH FUNCTION mood_json(mood);
CREATE TABLE m_moods (id int PRIMARY KEY, mood mood NOT NULL);
GRANT INSERT ON m_moods TO PUBLIC;
SELECT counters.create_counter('m_mood', 'SELECT mood, count(*) AS n FROM m_moods GROUP BY mood');
SELECT counters.set_thresholds('m_mood', 'n', '{2}', 'on_threshold(text, jsonb, text, numeric, numeric, numeric, text)');
SELECT counters.create_counter('m_mood_log', 'SELECT mood, count(*) AS n FROM m_moods GROUP BY mood', mode => 'log');
SELECT counters.set_thresholds('m_mood_log', 'n', '{2}', 'on_threshold(text, jsonb, text, numeric, numeric, numeric, text)');
TRUNCATE audit;
RESET ROLE;
SET ROLE NONE;
SET search_path = sec_test;
INSERT INTO m_moods VALUES (1, 'happy'), (2, 'happy'), (3, 'sad');
SELECT counters.compact('m_mood_log');
SELECT * FROM counters.top('m_mood', 'n', 2);
SELECT * FROM counters.top('m_mood_log', 'n', 2);
SELECT what, who, superuser FROM audit GROUP BY 1, 2, 3 ORDER BY 1, 2;
RESET ROLE;

-- clean up
SET client_min_messages = warning;
SET ROLE counters_sec_mallory;
SELECT counters.drop_counter(name) FROM counters.counter WHERE name LIKE 'm\_%' ORDER BY name;
SET ROLE counters_sec_app;
SELECT counters.drop_counter(name) FROM counters.counter ORDER BY name;
RESET ROLE;
DROP SCHEMA sec_test CASCADE;
SET ROLE NONE; DROP OWNED BY counters_sec_mallory, counters_sec_app, counters_sec_planter; RESET ROLE;
SET ROLE NONE; DROP ROLE counters_sec_mallory, counters_sec_app, counters_sec_planter; RESET ROLE;
RESET client_min_messages;
RESET search_path;
