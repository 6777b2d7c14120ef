-- The window questions that sql/windows.sql and test/demo.sh ask of hashtag uses counted per (region, tag, hour) in
-- tag_hourly, each from the counter and again from the raw events (hashtag_uses) to compare; both read this file
-- with \i from the top of the tree. The window ending at at_time is the 24 hour buckets up to and including the
-- bucket of at_time: over the counter it reads those buckets; over the raw events, the same 24 hours of events.
-- LANGUAGE sql STABLE: inlined, so EXPLAIN shows the plan.
CREATE FUNCTION window_uses(at_time timestamp) RETURNS TABLE (region text, tag text, uses numeric)
LANGUAGE sql STABLE AS $$
	SELECT c.region, c.tag, sum(c.uses)
	  FROM tag_hourly c
	 WHERE c.hour BETWEEN date_trunc('hour', at_time) - interval '23 hours' AND date_trunc('hour', at_time)
	 GROUP BY c.region, c.tag
$$;
CREATE FUNCTION window_uses_raw(at_time timestamp) RETURNS TABLE (region text, tag text, uses numeric)
LANGUAGE sql STABLE AS $$
	SELECT h.region, h.tag, count(*)
	  FROM hashtag_uses h
	 WHERE h.used_at >= date_trunc('hour', at_time) - interval '23 hours'
	   AND h.used_at < date_trunc('hour', at_time) + interval '1 hour'
	 GROUP BY h.region, h.tag
$$;
-- Top k per region (the table regions) over the window: one range scan of (region, hour) per region (LATERAL).
CREATE FUNCTION top_tags(k int, at_time timestamp) RETURNS TABLE (region text, rank bigint, tag text, uses numeric)
LANGUAGE sql STABLE AS $$
	SELECT r.region, t.rank, t.tag, t.uses
	  FROM regions r
	  CROSS JOIN LATERAL (
	      SELECT c.tag, sum(c.uses) AS uses, row_number() OVER (ORDER BY sum(c.uses) DESC, c.tag) AS rank
	        FROM tag_hourly c
	       WHERE c.region = r.region
	         AND c.hour BETWEEN date_trunc('hour', at_time) - interval '23 hours' AND date_trunc('hour', at_time)
	       GROUP BY c.tag
	       ORDER BY 2 DESC, 1
	       LIMIT k) t
$$;
CREATE FUNCTION top_tags_raw(k int, at_time timestamp) RETURNS TABLE (region text, rank bigint, tag text, uses numeric)
LANGUAGE sql STABLE AS $$
	SELECT r.region, t.rank, t.tag, t.uses
	  FROM regions r
	  CROSS JOIN LATERAL (
	      SELECT h.tag, count(*)::numeric AS uses, row_number() OVER (ORDER BY count(*) DESC, h.tag) AS rank
	        FROM hashtag_uses h
	       WHERE h.region = r.region
	         AND h.used_at >= date_trunc('hour', at_time) - interval '23 hours'
	         AND h.used_at < date_trunc('hour', at_time) + interval '1 hour'
	       GROUP BY h.tag
	       ORDER BY 2 DESC, 1
	       LIMIT k) t
$$;
