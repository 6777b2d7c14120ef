--
-- retention: counters.set_retention(name, bucket column, keep). Buckets older than now() - keep are deleted by
-- counters.apply_retention() (and counters.compact()), deltas to them are dropped by the trigger, and verify/rebuild
-- compare only the buckets kept. Every check compares with a recomputation over the source restricted to the kept
-- buckets (times are relative to the transaction's clock, so results are booleans and counts of differences).
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA retention_test;
SET search_path = retention_test, regress;

CREATE TABLE uses (id serial PRIMARY KEY, region text NOT NULL, tag text NOT NULL, used_at timestamp NOT NULL);
INSERT INTO uses (region, tag, used_at)
SELECT CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, 'tag' || (g % 3), localtimestamp - (g * interval '37 minutes')
  FROM generate_series(0, 299) g;
SELECT counters.create_counter('tag_hourly', $$
	SELECT region, tag, date_trunc('hour', used_at) AS hour, count(*) AS uses
	  FROM uses GROUP BY region, tag, date_trunc('hour', used_at)
$$);
-- what the counter must hold: the recount of the buckets of the last 48 hours
CREATE VIEW kept AS
SELECT region, tag, date_trunc('hour', used_at) AS hour, count(*) AS uses FROM uses
 WHERE date_trunc('hour', used_at) >= localtimestamp - interval '48 hours' GROUP BY 1, 2, 3;
CREATE FUNCTION differences() RETURNS bigint LANGUAGE sql AS $$
	SELECT count(*) FROM ((TABLE tag_hourly EXCEPT TABLE kept) UNION ALL (TABLE kept EXCEPT TABLE tag_hourly)) d
$$;

SELECT counters.set_retention('tag_hourly', 'hour', '48 hours');
SELECT options -> 'retention' AS retention FROM counters.counters WHERE name = 'tag_hourly';
-- before the retention runs, old buckets are still there (verify ignores them already)
SELECT count(*) > 0 AS has_old_buckets FROM tag_hourly WHERE hour < localtimestamp - interval '48 hours';
SELECT * FROM counters.verify();
SELECT counters.apply_retention() > 0 AS deleted_some;
SELECT differences();
-- compact() applies it too; nothing left to delete now
SELECT counters.compact();
SELECT counters.apply_retention();

-- Writes to kept buckets count; writes to expired ones (a late delete, a back-dated insert) are dropped and do not
-- bring expired buckets back.
INSERT INTO uses (region, tag, used_at) VALUES ('eu', 'tag1', localtimestamp), ('us', 'tag9', localtimestamp - interval '1 hour');
DELETE FROM uses WHERE used_at < localtimestamp - interval '100 hours';
INSERT INTO uses (region, tag, used_at) VALUES ('eu', 'tag1', localtimestamp - interval '70 hours');
UPDATE uses SET used_at = used_at - interval '60 hours' WHERE id % 10 = 0 AND used_at > localtimestamp - interval '5 hours';
SELECT count(*) AS expired_rows FROM tag_hourly WHERE hour < localtimestamp - interval '48 hours';
SELECT differences();
SELECT * FROM counters.verify();

-- The same in log mode: expired deltas are not even logged, and the log's expired rows go with the totals'.
SELECT counters.alter_counter('tag_hourly', 'log');
INSERT INTO uses (region, tag, used_at) VALUES ('eu', 'tag2', localtimestamp), ('eu', 'tag2', localtimestamp - interval '90 hours');
SELECT count(*) AS log_rows FROM tag_hourly_log;
SELECT differences();
SELECT counters.compact();
SELECT differences();

-- rebuild repairs kept buckets only
SELECT counters.alter_counter('tag_hourly', 'exact');
UPDATE tag_hourly SET uses = uses + 5 WHERE hour = (SELECT max(hour) FROM tag_hourly);
SELECT count(*) AS corrupted INTO TEMP corrupted FROM tag_hourly WHERE hour = (SELECT max(hour) FROM tag_hourly);
SELECT (SELECT count(*) FROM counters.verify()) = corrupted AS verify_found_exactly_them FROM corrupted;
SET client_min_messages = warning;
SELECT counters.rebuild('tag_hourly') = corrupted AS rebuilt_exactly_them FROM corrupted;
RESET client_min_messages;
SELECT differences();

-- Rejections (regress.errors: setup.sql), and removing the retention.
SELECT * FROM errors(
	$$SELECT counters.set_retention('tag_hourly', 'tag', '1 day')$$,
	$$SELECT counters.set_retention('tag_hourly', 'uses', '1 day')$$,
	$$SELECT counters.set_retention('tag_hourly', 'hour', '-1 day')$$);
SELECT counters.set_retention('tag_hourly', 'hour', NULL);
SELECT options ? 'retention' AS has_retention FROM counters.counters WHERE name = 'tag_hourly';
INSERT INTO uses (region, tag, used_at) VALUES ('eu', 'tag1', localtimestamp - interval '70 hours');
SELECT count(*) AS old_bucket_rows FROM tag_hourly WHERE hour < localtimestamp - interval '48 hours';

SELECT counters.drop_counter('tag_hourly');
RESET search_path;
DROP SCHEMA retention_test CASCADE;
