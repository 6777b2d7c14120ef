--
-- time_windows: the seeds' trending hashtags and thumbnail CTR, read from counters with plain, index-backed SQL.
-- Every result is compared with the same query over the raw events (EXCEPT both ways: no rows means equal), at a
-- fixed "now" so the output is deterministic.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE SCHEMA windows_test;
SET search_path = windows_test;

-- Hashtag uses per (region, tag, hour).
CREATE TABLE hashtag_uses (id serial PRIMARY KEY, region text NOT NULL, tag text NOT NULL, used_at timestamp NOT NULL);
INSERT INTO hashtag_uses (region, tag, used_at)
SELECT (ARRAY['eu', 'us', 'asia'])[1 + g % 3], 'tag' || (g * 7 % 13), timestamp '2026-11-22 12:00' - (g * 17 % 3000) * interval '1 minute'
  FROM generate_series(1, 3000) g;
SELECT counters.create_counter('tag_hourly', $$
	SELECT region, tag, date_trunc('hour', used_at) AS hour, count(*) AS uses
	  FROM hashtag_uses GROUP BY region, tag, date_trunc('hour', used_at)
$$);
-- the index that makes "a region's buckets since T" a range scan
CREATE INDEX tag_hourly_region_hour ON tag_hourly (region, hour);
ANALYZE tag_hourly;
INSERT INTO hashtag_uses (region, tag, used_at) SELECT 'eu', 'tag1', timestamp '2026-11-22 11:30' FROM generate_series(1, 40);
DELETE FROM hashtag_uses WHERE id % 10 = 0;

-- Sliding window: uses per (region, tag) in the 24 hours before 2026-11-22 12:00 (whole hours).
CREATE VIEW window_counter AS
SELECT region, tag, sum(uses) AS uses FROM tag_hourly
 WHERE hour >= timestamp '2026-11-22 12:00' - interval '24 hours' GROUP BY region, tag;
CREATE VIEW window_raw AS
SELECT region, tag, count(*) AS uses FROM hashtag_uses
 WHERE date_trunc('hour', used_at) >= timestamp '2026-11-22 12:00' - interval '24 hours' GROUP BY region, tag;
SELECT count(*) AS keys, (SELECT count(*) FROM ((TABLE window_counter EXCEPT TABLE window_raw)
                                                UNION ALL (TABLE window_raw EXCEPT TABLE window_counter)) d) AS differences
  FROM window_counter;

-- Top 3 hashtags per region in that window: one index range scan per region (LATERAL).
CREATE FUNCTION top_per_region(source regclass, k int) RETURNS TABLE (region text, tag text, uses numeric, rank bigint)
LANGUAGE plpgsql AS $$
BEGIN
	RETURN QUERY EXECUTE format($q$
		SELECT r.region, t.tag, t.uses, t.rank FROM (SELECT DISTINCT region FROM %1$s) r
		CROSS JOIN LATERAL (
			SELECT w.tag, sum(w.uses)::numeric AS uses, row_number() OVER (ORDER BY sum(w.uses) DESC, w.tag) AS rank
			  FROM %1$s w
			 WHERE w.region = r.region AND w.hour >= timestamp '2026-11-22 12:00' - interval '24 hours'
			 GROUP BY w.tag ORDER BY 2 DESC, 1 LIMIT %2$s) t
		ORDER BY 1, 4$q$, source, k);
END $$;
CREATE VIEW raw_hourly AS SELECT region, tag, date_trunc('hour', used_at) AS hour, 1 AS uses FROM hashtag_uses;
SELECT * FROM top_per_region('tag_hourly', 3);
SELECT count(*) AS differences FROM ((SELECT * FROM top_per_region('tag_hourly', 3) EXCEPT SELECT * FROM top_per_region('raw_hourly', 3))
                                     UNION ALL (SELECT * FROM top_per_region('raw_hourly', 3) EXCEPT SELECT * FROM top_per_region('tag_hourly', 3))) d;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT tag, sum(uses) FROM tag_hourly
 WHERE region = 'eu' AND hour >= timestamp '2026-11-22 12:00' - interval '24 hours' GROUP BY tag;
RESET enable_seqscan;

--
-- CTR: clicks and shows per (video, thumbnail), in total and since the thumbnail's last regeneration. Events carry
-- the thumbnail's generation (bumped when it is regenerated), so "since regeneration" is simply the current
-- generation's key of a second counter: a regeneration resets it without touching the totals, and old generations can
-- be deleted from the counter table or kept for history.
--
CREATE TABLE thumbnails (video_id int, thumbnail_id int, category text NOT NULL, generation int NOT NULL DEFAULT 1,
                         PRIMARY KEY (video_id, thumbnail_id));
CREATE TABLE thumb_events (id serial PRIMARY KEY, video_id int NOT NULL, thumbnail_id int NOT NULL,
                           generation int NOT NULL, kind text NOT NULL CHECK (kind IN ('show', 'click')));
INSERT INTO thumbnails SELECT v, t, (ARRAY['music', 'news', 'games'])[1 + v % 3] FROM generate_series(1, 12) v, generate_series(1, 3) t;
INSERT INTO thumb_events (video_id, thumbnail_id, generation, kind)
SELECT 1 + g % 12, 1 + g % 3, 1, CASE WHEN g % (3 + g % 5) = 0 THEN 'click' ELSE 'show' END FROM generate_series(1, 4000) g;
SELECT counters.create_counter('thumb_total', $$
	SELECT video_id, thumbnail_id, count(*) FILTER (WHERE kind = 'click') AS clicks,
	       count(*) FILTER (WHERE kind = 'show') AS shows
	  FROM thumb_events GROUP BY video_id, thumbnail_id
$$);
SELECT counters.create_counter('thumb_generation', $$
	SELECT video_id, thumbnail_id, generation, count(*) FILTER (WHERE kind = 'click') AS clicks,
	       count(*) FILTER (WHERE kind = 'show') AS shows
	  FROM thumb_events GROUP BY video_id, thumbnail_id, generation
$$);
-- CTR as views: since the current generation, and in total
CREATE VIEW thumb_ctr AS
SELECT t.video_id, t.thumbnail_id, t.category,
       coalesce(g.clicks, 0) AS clicks, coalesce(g.shows, 0) AS shows,
       round(coalesce(g.clicks, 0)::numeric / nullif(g.shows, 0), 4) AS ctr,
       round(tt.clicks::numeric / nullif(tt.shows, 0), 4) AS ctr_total
  FROM thumbnails t
  LEFT JOIN thumb_generation g USING (video_id, thumbnail_id, generation)
  LEFT JOIN thumb_total tt USING (video_id, thumbnail_id);
-- video 1's thumbnail 1 is regenerated: its current CTR starts from zero, its total stays
UPDATE thumbnails SET generation = generation + 1 WHERE video_id = 1 AND thumbnail_id = 1;
INSERT INTO thumb_events (video_id, thumbnail_id, generation, kind)
VALUES (1, 1, 2, 'show'), (1, 1, 2, 'show'), (1, 1, 2, 'click'), (2, 2, 1, 'click');
SELECT video_id, thumbnail_id, clicks, shows, ctr, ctr_total FROM thumb_ctr WHERE video_id = 1 ORDER BY thumbnail_id;
-- top 2 per category by current CTR (the seed asks for 90; same query)
CREATE VIEW top_ctr AS
SELECT category, video_id, thumbnail_id, ctr, rank FROM (
	SELECT category, video_id, thumbnail_id, ctr,
	       row_number() OVER (PARTITION BY category ORDER BY ctr DESC NULLS LAST, video_id, thumbnail_id) AS rank
	  FROM thumb_ctr) r WHERE rank <= 2;
SELECT * FROM top_ctr ORDER BY category, rank;
-- the same from the raw events
CREATE VIEW top_ctr_raw AS
SELECT category, video_id, thumbnail_id, ctr, rank FROM (
	SELECT t.category, t.video_id, t.thumbnail_id,
	       round(count(e.*) FILTER (WHERE e.kind = 'click')::numeric / nullif(count(e.*) FILTER (WHERE e.kind = 'show'), 0), 4) AS ctr,
	       row_number() OVER (PARTITION BY t.category ORDER BY
	           round(count(e.*) FILTER (WHERE e.kind = 'click')::numeric / nullif(count(e.*) FILTER (WHERE e.kind = 'show'), 0), 4)
	           DESC NULLS LAST, t.video_id, t.thumbnail_id) AS rank
	  FROM thumbnails t LEFT JOIN thumb_events e
	    ON e.video_id = t.video_id AND e.thumbnail_id = t.thumbnail_id AND e.generation = t.generation
	 GROUP BY t.category, t.video_id, t.thumbnail_id) r WHERE rank <= 2;
SELECT count(*) AS differences FROM ((TABLE top_ctr EXCEPT TABLE top_ctr_raw) UNION ALL (TABLE top_ctr_raw EXCEPT TABLE top_ctr)) d;
-- old generations can go from the counter table (or be kept): a restricted rebuild would bring them back, so a
-- retention-like cleanup is a plain DELETE of rows whose generation is no longer current
DELETE FROM thumb_generation g USING thumbnails t
 WHERE g.video_id = t.video_id AND g.thumbnail_id = t.thumbnail_id AND g.generation < t.generation;
SELECT count(*) AS old_generation_rows FROM thumb_generation WHERE (video_id, thumbnail_id, generation) = (1, 1, 1);
SELECT count(*) AS differences FROM ((TABLE top_ctr EXCEPT TABLE top_ctr_raw) UNION ALL (TABLE top_ctr_raw EXCEPT TABLE top_ctr)) d;
SELECT * FROM counters.verify('thumb_total');

DROP VIEW window_counter, top_ctr_raw, top_ctr, thumb_ctr;
SELECT counters.drop_counter('tag_hourly');
SELECT counters.drop_counter('thumb_total');
SELECT counters.drop_counter('thumb_generation');
RESET search_path;
DROP SCHEMA windows_test CASCADE;
