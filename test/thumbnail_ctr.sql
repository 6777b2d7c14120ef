-- Thumbnails by CTR, as sql/windows.sql and test/demo.sh read them (\i, from the top of the tree), over their tables
-- videos (id, category), thumbnails (video_id, thumbnail, generation) and thumb_events (video_id, thumbnail,
-- generation, kind 'show' or 'click'): two counters, thumb_total per (video, thumbnail) and thumb_generation per
-- (video, thumbnail, generation). "Since the last regeneration" is the current generation's row: it starts at zero
-- by itself, the total is untouched.
SELECT counters.create_counter('thumb_total', $$
	SELECT video_id, thumbnail,
	       count(*) FILTER (WHERE kind = 'click') AS clicks,
	       count(*) FILTER (WHERE kind = 'show') AS shows
	  FROM thumb_events
	 GROUP BY video_id, thumbnail
$$) \gset
SELECT counters.create_counter('thumb_generation', $$
	SELECT video_id, thumbnail, generation,
	       count(*) FILTER (WHERE kind = 'click') AS clicks,
	       count(*) FILTER (WHERE kind = 'show') AS shows
	  FROM thumb_events
	 GROUP BY video_id, thumbnail, generation
$$) \gset
-- CTR is derived when reading: a view over both counters; ctr since the regeneration, ctr_total in total.
CREATE VIEW thumbnail_ctr AS
SELECT v.category, t.video_id, t.thumbnail, t.generation,
       coalesce(g.clicks, 0) AS clicks, coalesce(g.shows, 0) AS shows,
       g.clicks::numeric / nullif(g.shows, 0) AS ctr,
       coalesce(a.clicks, 0) AS clicks_total, coalesce(a.shows, 0) AS shows_total,
       a.clicks::numeric / nullif(a.shows, 0) AS ctr_total
  FROM thumbnails t
  JOIN videos v ON v.id = t.video_id
  LEFT JOIN thumb_generation g
         ON g.video_id = t.video_id AND g.thumbnail = t.thumbnail AND g.generation = t.generation
  LEFT JOIN thumb_total a ON a.video_id = t.video_id AND a.thumbnail = t.thumbnail;
-- The same, recomputed from the raw events.
CREATE VIEW thumbnail_ctr_raw AS
SELECT v.category, t.video_id, t.thumbnail, t.generation,
       count(*) FILTER (WHERE e.kind = 'click' AND e.generation = t.generation) AS clicks,
       count(*) FILTER (WHERE e.kind = 'show' AND e.generation = t.generation) AS shows,
       count(*) FILTER (WHERE e.kind = 'click' AND e.generation = t.generation)::numeric
           / nullif(count(*) FILTER (WHERE e.kind = 'show' AND e.generation = t.generation), 0) AS ctr,
       count(*) FILTER (WHERE e.kind = 'click') AS clicks_total,
       count(*) FILTER (WHERE e.kind = 'show') AS shows_total,
       count(*) FILTER (WHERE e.kind = 'click')::numeric / nullif(count(*) FILTER (WHERE e.kind = 'show'), 0) AS ctr_total
  FROM thumbnails t
  JOIN videos v ON v.id = t.video_id
  LEFT JOIN thumb_events e ON e.video_id = t.video_id AND e.thumbnail = t.thumbnail
 GROUP BY v.category, t.video_id, t.thumbnail, t.generation;
-- The history both start from (generation 1): per_category videos in each of the categories games, music and news,
-- 3 thumbnails each, each shown from min_shows to min_shows + shows_spread - 1 times and clicked at a rate from min_ctr
-- to min_ctr + 1008 / ctr_divisor; all events in one INSERT.
CREATE FUNCTION thumbnail_history(per_category int, min_shows int, shows_spread int, min_ctr numeric,
                                  ctr_divisor numeric) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO videos
	SELECT v, (ARRAY['games', 'music', 'news'])[1 + (v - 1) / per_category] FROM generate_series(1, 3 * per_category) v;
	INSERT INTO thumbnails (video_id, thumbnail)
	SELECT v, t FROM generate_series(1, 3 * per_category) v, generate_series(1, 3) t;
	INSERT INTO thumb_events (video_id, thumbnail, generation, kind)
	SELECT t.video_id, t.thumbnail, 1, CASE WHEN i <= n.clicks THEN 'click' ELSE 'show' END
	  FROM thumbnails t
	  CROSS JOIN LATERAL (SELECT min_shows + (t.video_id * t.thumbnail * 37 + t.video_id * t.video_id) % shows_spread
	                             AS shows) s
	  CROSS JOIN LATERAL (SELECT floor(s.shows * (min_ctr + (t.video_id * 7919 + t.thumbnail * 104729) % 1009
	                                                        / ctr_divisor))::int AS clicks) n
	  CROSS JOIN generate_series(1, s.shows + n.clicks) i;
END $$;
