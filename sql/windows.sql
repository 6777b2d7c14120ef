--
-- windows: time windows and ratios read from counters with plain SQL. A counter of hashtag uses per (region, tag,
-- hour bucket) answers "uses per hashtag per region in the 24 hours before T" and "top 3 hashtags per region in that
-- window" with index range scans of the counter table; two counters of clicks and shows per (video, thumbnail), one
-- of them also keyed by the thumbnail's generation, give the CTR since the last regeneration and in total. Every
-- result is compared with the same question asked of the raw events (EXCEPT both ways: 0 differences means equal),
-- at fixed times T passed as arguments, so the output is deterministic; the counters are also checked with
-- counters.verify. The events are written after the counters exist (inserts, bucket-moving updates, deletes), in
-- exact, log and sharded mode.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA windows_regress;
SET search_path = windows_regress;
SET jit = off;   -- compiling the many small comparison queries would cost more than running them

-- A bucket must be immutable: date_trunc on a timestamptz depends on the session's TimeZone and is refused.
CREATE TABLE tz_uses (id serial PRIMARY KEY, used_at timestamptz NOT NULL);
SELECT counters.create_counter('win_tz', $$
	SELECT date_trunc('hour', used_at) AS hour, count(*) AS uses FROM tz_uses GROUP BY date_trunc('hour', used_at)
$$);
\echo SQLSTATE :SQLSTATE
-- naming the zone makes it immutable
SELECT counters.create_counter('win_tz', $$
	SELECT date_trunc('hour', used_at AT TIME ZONE 'UTC') AS hour, count(*) AS uses
	  FROM tz_uses GROUP BY date_trunc('hour', used_at AT TIME ZONE 'UTC')
$$);
SELECT counters.drop_counter('win_tz');
DROP TABLE tz_uses;

--
-- Hashtag uses per (region, tag, hour): 10 days of events before T0 = 2026-03-10 12:30, a few after it.
--
CREATE TABLE regions (region text PRIMARY KEY);
INSERT INTO regions VALUES ('asia'), ('europe'), ('latam'), ('north america');
CREATE TABLE hashtag_uses (
	id      serial PRIMARY KEY,
	region  text      NOT NULL REFERENCES regions,
	tag     text      NOT NULL,
	used_at timestamp NOT NULL
);
-- deterministic pseudo-random events: skewed tags, each region with its own favourites
CREATE FUNCTION make_uses(first int, last int) RETURNS void LANGUAGE sql AS $$
	INSERT INTO hashtag_uses (region, tag, used_at)
	SELECT (ARRAY['asia', 'europe', 'latam', 'north america'])[1 + g % 4],
	       (ARRAY['#postgres', '#cats', '#rain', '#music', '#coffee', '#travel', '#movies', '#sale', '#science',
	              '#art', '#jobs', '#food'])[1 + (floor(12 * power((g::bigint * 7919 % 10007) / 10007.0, 2))::int
	                                              + 3 * (g % 4)) % 12],
	       timestamp '2026-03-10 12:30' - (g::bigint * 104729 % (240 * 3600)) * interval '1 second'
	       + CASE WHEN g % 97 = 0 THEN interval '6 hours' ELSE interval '0' END
	  FROM generate_series(first, last) g
$$;
-- half of the events exist when the counter is declared (it is filled from them), the other half come after
SELECT make_uses(1, 10000);
SELECT counters.create_counter('tag_hourly', $$
	SELECT region, tag, date_trunc('hour', used_at) AS hour, count(*) AS uses
	  FROM hashtag_uses GROUP BY region, tag, date_trunc('hour', used_at)
$$);
SELECT make_uses(10001, 20000);
-- the window of one region is a range of (region, hour); the window of all regions a range of (hour). Both are key
-- columns, never updated, so these indexes do not stop HOT updates of the counted value.
CREATE INDEX tag_hourly_region_hour ON tag_hourly (region, hour);
CREATE INDEX tag_hourly_hour ON tag_hourly (hour);
-- One (region, tag) over the window is a range of (region, tag, hour). The counter's own key index has its text keys by
-- their digest (a key of any length fits; a digest has no range), so with regions and tags known to be short, this
-- index gives the range.
CREATE INDEX tag_hourly_region_tag_hour ON tag_hourly (region, tag, hour);
-- (plans below must not change with an autovacuum run in the middle of the test)
ALTER TABLE tag_hourly SET (autovacuum_enabled = off);
ALTER TABLE hashtag_uses SET (autovacuum_enabled = off);
\d tag_hourly
-- more writes through the trigger: a burst, events moved to the next bucket or to another region, deletes
INSERT INTO hashtag_uses (region, tag, used_at)
SELECT 'europe', '#storm', timestamp '2026-03-10 12:29' - g * interval '7 seconds' FROM generate_series(1, 400) g;
UPDATE hashtag_uses SET used_at = used_at + interval '37 minutes' WHERE id % 11 = 0;
UPDATE hashtag_uses SET region = 'asia' WHERE id % 13 = 0 AND region = 'latam';
DELETE FROM hashtag_uses WHERE id % 17 = 0;
ANALYZE regions, hashtag_uses, tag_hourly;
SELECT * FROM counters.verify('tag_hourly');

-- The window ending at T, and the top k per region in it, from the counter and from the raw events:
-- window_uses(T), window_uses_raw(T), top_tags(k, T) and top_tags_raw(k, T), which test/demo.sh asks too.
\i test/window_queries.sql
-- Both questions at several times T: before the history and long after it (empty windows), at its start (a partly
-- empty window), inside it (at the last second of a bucket), at T0, and 6 hours after T0 (the events dated after T0).
CREATE VIEW check_times AS
SELECT at_time FROM unnest(ARRAY[timestamp '2026-02-28 00:00', '2026-03-01 05:00', '2026-03-04 17:59:59',
                                 '2026-03-10 12:30', '2026-03-10 18:15', '2026-03-12 00:00']) at_time;
CREATE FUNCTION window_differences(at_time timestamp) RETURNS bigint LANGUAGE sql STABLE AS $$
	SELECT count(*) FROM ((SELECT * FROM window_uses(at_time) EXCEPT SELECT * FROM window_uses_raw(at_time))
	                      UNION ALL
	                      (SELECT * FROM window_uses_raw(at_time) EXCEPT SELECT * FROM window_uses(at_time))) d
$$;
CREATE FUNCTION top_differences(k int, at_time timestamp) RETURNS bigint LANGUAGE sql STABLE AS $$
	SELECT count(*) FROM ((SELECT * FROM top_tags(k, at_time) EXCEPT SELECT * FROM top_tags_raw(k, at_time))
	                      UNION ALL
	                      (SELECT * FROM top_tags_raw(k, at_time) EXCEPT SELECT * FROM top_tags(k, at_time))) d
$$;
CREATE VIEW window_report AS
SELECT at_time,
       (SELECT count(*) FROM window_uses_raw(at_time)) AS raw_keys,
       (SELECT coalesce(sum(uses), 0) FROM window_uses_raw(at_time)) AS raw_uses,
       window_differences(at_time) AS window_differences,
       (SELECT count(*) FROM top_tags_raw(3, at_time)) AS raw_top3_rows,
       top_differences(3, at_time) AS top3_differences,
       top_differences(1, at_time) AS top1_differences
  FROM check_times;
TABLE window_report ORDER BY at_time;

-- Uses per hashtag in europe in the 24 hours ending at T0, next to the raw count.
SELECT w.tag, w.uses, r.uses AS raw_uses
  FROM window_uses('2026-03-10 12:30') w
  FULL JOIN (SELECT * FROM window_uses_raw('2026-03-10 12:30') WHERE region = 'europe') r USING (region, tag)
 WHERE w.region = 'europe' OR r.region = 'europe'
 ORDER BY w.uses DESC NULLS LAST, w.tag;
-- Top 3 per region at T0 (the #storm burst leads europe), next to the raw ranking.
SELECT c.region, c.rank, c.tag, c.uses, r.tag AS raw_tag, r.uses AS raw_uses
  FROM top_tags(3, '2026-03-10 12:30') c FULL JOIN top_tags_raw(3, '2026-03-10 12:30') r USING (region, rank)
 ORDER BY 1, 2;

-- The plans: the window reads a range of an index of the counter table, never the whole table.
EXPLAIN (COSTS OFF) SELECT * FROM top_tags(3, '2026-03-10 12:30');
EXPLAIN (COSTS OFF) SELECT * FROM window_uses('2026-03-10 12:30');
-- one (region, tag) over the window: a range of (region, tag, hour)
EXPLAIN (COSTS OFF) SELECT sum(uses) FROM tag_hourly
 WHERE region = 'europe' AND tag = '#storm' AND hour BETWEEN '2026-03-09 13:00' AND '2026-03-10 12:00';

-- The same questions over a log-mode counter (the name becomes a view adding the totals and the pending log rows;
-- the indexes stay on the table, now <name>_totals) and a sharded one, with writes in between.
SELECT counters.alter_counter('tag_hourly', 'log');
SELECT indexrelid::regclass AS index, indrelid::regclass AS "table" FROM pg_index
 WHERE indrelid = 'tag_hourly_totals'::regclass ORDER BY indexrelid::regclass::text;
SELECT make_uses(20001, 23000);
UPDATE hashtag_uses SET tag = '#storm' WHERE id % 19 = 0 AND region = 'europe';
DELETE FROM hashtag_uses WHERE id % 23 = 0;
SELECT (SELECT count(*) FROM tag_hourly_log) > 0 AS pending_log_rows;
ALTER TABLE tag_hourly_log SET (autovacuum_enabled = off);
ANALYZE tag_hourly_totals, tag_hourly_log;
-- the window's conditions reach both tables: a range of the same index of the totals, and of the log's key index
EXPLAIN (COSTS OFF) SELECT * FROM top_tags(3, '2026-03-10 12:30');
TABLE window_report ORDER BY at_time;
SELECT counters.compact('tag_hourly') > 0 AS compacted;
TABLE window_report ORDER BY at_time;
SELECT counters.alter_counter('tag_hourly', 'sharded');
SELECT make_uses(23001, 25000);
UPDATE hashtag_uses SET used_at = used_at - interval '2 hours' WHERE id % 29 = 0;
SELECT (SELECT count(*) FROM tag_hourly_slots) > 0 AS pending_slot_rows;
TABLE window_report ORDER BY at_time;
SELECT counters.alter_counter('tag_hourly', 'exact');
TABLE window_report ORDER BY at_time;
SELECT * FROM counters.verify('tag_hourly');

--
-- CTR per (video, thumbnail): since the thumbnail's last regeneration, and in total. Events carry the generation of
-- the thumbnail they were shown with; regenerating bumps thumbnails.generation. thumb_total counts per (video,
-- thumbnail); thumb_generation per (video, thumbnail, generation), and its row for the current generation is "since
-- the last regeneration": a new generation starts at zero by itself, the total is not touched, nothing is reset.
--
CREATE TABLE videos (id int PRIMARY KEY, category text NOT NULL);
CREATE TABLE thumbnails (
	video_id       int NOT NULL REFERENCES videos,
	thumbnail      int NOT NULL CHECK (thumbnail BETWEEN 1 AND 3),
	generation     int NOT NULL DEFAULT 1,
	regenerated_at timestamp,
	PRIMARY KEY (video_id, thumbnail)
);
CREATE TABLE thumb_events (
	id         serial PRIMARY KEY,
	video_id   int  NOT NULL,
	thumbnail  int  NOT NULL,
	generation int  NOT NULL,
	kind       text NOT NULL CHECK (kind IN ('show', 'click'))
);
-- (the two counters and the views thumbnail_ctr and thumbnail_ctr_raw, which test/demo.sh reads too)
\i test/thumbnail_ctr.sql
-- top k per category by CTR since the regeneration, among thumbnails shown at least 20 times since: from the
-- counters (thumbnail_ctr), or from the raw events (thumbnail_ctr_raw: raw => true); the branch not asked for is not
-- read
CREATE FUNCTION top_ctr(k int, raw boolean DEFAULT false)
RETURNS TABLE (category text, rank bigint, video_id int, thumbnail int, clicks bigint, shows bigint, ctr numeric,
               ctr_total numeric)
LANGUAGE sql STABLE AS $$
	SELECT * FROM (
	    SELECT c.category, row_number() OVER (PARTITION BY c.category ORDER BY c.ctr DESC, c.shows DESC, c.video_id,
	                                                                           c.thumbnail),
	           c.video_id, c.thumbnail, c.clicks, c.shows, c.ctr, c.ctr_total
	      FROM (SELECT * FROM thumbnail_ctr WHERE NOT raw UNION ALL SELECT * FROM thumbnail_ctr_raw WHERE raw) c
	     WHERE c.shows >= 20) r
	 WHERE r.row_number <= k
$$;
CREATE VIEW ctr_report AS
SELECT (SELECT count(*) FROM thumbnail_ctr) AS thumbnails,
       (SELECT count(*) FROM ((TABLE thumbnail_ctr EXCEPT ALL TABLE thumbnail_ctr_raw)
                              UNION ALL (TABLE thumbnail_ctr_raw EXCEPT ALL TABLE thumbnail_ctr)) d) AS ctr_differences,
       (SELECT count(*) FROM top_ctr(90, raw => true)) AS raw_top90_rows,
       (SELECT count(*) FROM ((SELECT * FROM top_ctr(90) EXCEPT ALL SELECT * FROM top_ctr(90, raw => true))
                              UNION ALL
                              (SELECT * FROM top_ctr(90, raw => true) EXCEPT ALL SELECT * FROM top_ctr(90))) d)
           AS top90_differences,
       (SELECT count(*) FROM ((SELECT * FROM top_ctr(3) EXCEPT ALL SELECT * FROM top_ctr(3, raw => true))
                              UNION ALL
                              (SELECT * FROM top_ctr(3, raw => true) EXCEPT ALL SELECT * FROM top_ctr(3))) d)
           AS top3_differences,
       (SELECT count(*) FROM counters.verify('thumb_total')) AS verify_total,
       (SELECT count(*) FROM counters.verify('thumb_generation')) AS verify_generation;

-- 3 categories, 8 videos each, 3 thumbnails per video; their history (generation 1)
SELECT thumbnail_history(8, 20, 40, 0.02, 5045.0);
-- a page showing every thumbnail once (one statement, 72 keys), two clicks
INSERT INTO thumb_events (video_id, thumbnail, generation, kind)
SELECT video_id, thumbnail, generation, 'show' FROM thumbnails;
INSERT INTO thumb_events (video_id, thumbnail, generation, kind)
SELECT video_id, thumbnail, generation, 'click' FROM thumbnails WHERE (video_id, thumbnail) IN ((3, 1), (12, 2));
-- corrections: a show that was a click, and bot traffic deleted
UPDATE thumb_events SET kind = 'click' WHERE id = (SELECT min(id) FROM thumb_events WHERE kind = 'show' AND video_id = 5);
DELETE FROM thumb_events WHERE id % 31 = 0;
TABLE ctr_report;
SELECT category, rank, video_id, thumbnail, clicks, shows, round(ctr, 4) AS ctr, round(ctr_total, 4) AS ctr_total
  FROM top_ctr(3) ORDER BY category, rank;

-- Regeneration of the top thumbnail of each category. Right after it, the CTR since the regeneration is unknown
-- (0 clicks, 0 shows) and the totals are what they were.
CREATE TEMP TABLE before_regeneration AS
SELECT video_id, thumbnail, clicks_total, shows_total FROM thumbnail_ctr
 WHERE (video_id, thumbnail) IN (SELECT video_id, thumbnail FROM top_ctr(1));
UPDATE thumbnails SET generation = generation + 1, regenerated_at = timestamp '2026-03-10 12:30'
 WHERE (video_id, thumbnail) IN (SELECT video_id, thumbnail FROM before_regeneration);
SELECT video_id, thumbnail, generation, clicks, shows, ctr, clicks_total, shows_total,
       (clicks_total, shows_total) = (SELECT b.clicks_total, b.shows_total FROM before_regeneration b
                                       WHERE (b.video_id, b.thumbnail) = (c.video_id, c.thumbnail)) AS totals_unchanged
  FROM thumbnail_ctr c WHERE (video_id, thumbnail) IN (SELECT video_id, thumbnail FROM before_regeneration)
 ORDER BY 1, 2;
TABLE ctr_report;
-- New events: shows and clicks of the new images (the generation read from thumbnails), and a late click on an old
-- image (it carries generation 1: it counts in the total and in generation 1, not since the regeneration).
INSERT INTO thumb_events (video_id, thumbnail, generation, kind)
SELECT t.video_id, t.thumbnail, t.generation, CASE WHEN i % 8 = 0 THEN 'click' ELSE 'show' END
  FROM thumbnails t CROSS JOIN generate_series(1, 40) i WHERE t.generation = 2;
INSERT INTO thumb_events (video_id, thumbnail, generation, kind)
SELECT video_id, thumbnail, 1, 'click' FROM before_regeneration ORDER BY video_id LIMIT 1;
-- the new images lose some shows to a bot filter
DELETE FROM thumb_events WHERE generation = 2 AND id % 9 = 0;
SELECT c.video_id, c.thumbnail, c.generation, c.clicks, c.shows, round(c.ctr, 4) AS ctr,
       c.clicks_total - b.clicks_total AS clicks_added_to_total, c.shows_total - b.shows_total AS shows_added_to_total
  FROM thumbnail_ctr c JOIN before_regeneration b USING (video_id, thumbnail) ORDER BY 1, 2;
TABLE ctr_report;
SELECT category, rank, video_id, thumbnail, clicks, shows, round(ctr, 4) AS ctr, round(ctr_total, 4) AS ctr_total
  FROM top_ctr(3) ORDER BY category, rank;
-- every generation stays in the counter as history, one row per regeneration
SELECT g.video_id, g.thumbnail, g.generation, g.clicks, g.shows
  FROM thumb_generation g JOIN before_regeneration b USING (video_id, thumbnail) ORDER BY 1, 2, 3;

-- Old generations are history, not drift: deleting them from the counter table by hand makes verify report them,
-- and a rebuild restricted to those keys puts them back (they are still in the events). To forget an old generation
-- for good, delete its events (which also takes them out of the total) or just ignore it, as thumbnail_ctr does.
DELETE FROM thumb_generation g USING thumbnails t
 WHERE (g.video_id, g.thumbnail) = (t.video_id, t.thumbnail) AND g.generation < t.generation;
SELECT counter, key, column_name, stored, expected FROM counters.verify('thumb_generation') ORDER BY key::text, column_name;
SET client_min_messages = warning;   -- rebuild's NOTICEs carry timings
SELECT counters.rebuild('thumb_generation', 'generation = 1');
RESET client_min_messages;
TABLE ctr_report;

DROP VIEW ctr_report, thumbnail_ctr, thumbnail_ctr_raw, window_report;
SELECT counters.drop_counter('tag_hourly');
SELECT counters.drop_counter('thumb_total');
SELECT counters.drop_counter('thumb_generation');
RESET jit;
RESET search_path;
DROP SCHEMA windows_regress CASCADE;
