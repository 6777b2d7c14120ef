-- One row per counter: the rows in which it differs from a recount of its source, then verify() and the events the
-- thresholds announced (psql variable rounds: the rounds written). Every number must be 0.
SELECT 'blog_posts', count(*) FROM ((SELECT * FROM blog_posts EXCEPT SELECT blog_id, count(*), sum(rating) FROM posts WHERE published GROUP BY blog_id)
  UNION ALL (SELECT blog_id, count(*), sum(rating) FROM posts WHERE published GROUP BY blog_id EXCEPT SELECT * FROM blog_posts)) d
UNION ALL
SELECT 'blog_posts_cache', count(*) FROM blogs b WHERE posts_count <> (SELECT count(*) FROM posts p WHERE p.blog_id = b.id)
UNION ALL
SELECT 'post_likes', count(*) FROM ((SELECT * FROM post_likes EXCEPT SELECT post_id, count(*) FROM likes GROUP BY post_id)
  UNION ALL (SELECT post_id, count(*) FROM likes GROUP BY post_id EXCEPT SELECT * FROM post_likes)) d
UNION ALL
SELECT 'post_likes_sharded', count(*) FROM ((SELECT * FROM post_likes_sharded EXCEPT SELECT post_id, count(*) FROM likes GROUP BY post_id)
  UNION ALL (SELECT post_id, count(*) FROM likes GROUP BY post_id EXCEPT SELECT * FROM post_likes_sharded)) d
UNION ALL
-- (a sink stores nothing: each round writes 5 views of each of 4 posts of its own)
SELECT 'post_views', count(*) FROM post_views WHERE views <> 5
UNION ALL
SELECT 'blog_comments', count(*) FROM ((SELECT * FROM blog_comments EXCEPT SELECT p.blog_id, count(*) FROM comments c JOIN posts p ON c.post_id = p.id WHERE p.published GROUP BY p.blog_id)
  UNION ALL (SELECT p.blog_id, count(*) FROM comments c JOIN posts p ON c.post_id = p.id WHERE p.published GROUP BY p.blog_id EXCEPT SELECT * FROM blog_comments)) d
UNION ALL
SELECT 'trip_seats', count(*) FROM ((SELECT * FROM trip_seats EXCEPT SELECT trip, count(*) FROM seats GROUP BY trip)
  UNION ALL (SELECT trip, count(*) FROM seats GROUP BY trip EXCEPT SELECT * FROM trip_seats)) d
UNION ALL
SELECT 'tag_hourly', count(*) FROM ((SELECT * FROM tag_hourly EXCEPT SELECT tag, hour, count(*) FROM tag_uses GROUP BY tag, hour)
  UNION ALL (SELECT tag, hour, count(*) FROM tag_uses GROUP BY tag, hour EXCEPT SELECT * FROM tag_hourly)) d
UNION ALL
SELECT 'verify()', count(*) FROM counters.verify()
UNION ALL
-- each round crosses, once: the window threshold (8 uses of 'pg<r>'), the seat threshold of trip r (3), and every 5
-- likes of its posts (at compaction)
SELECT 'window events', :rounds - count(*) FROM events WHERE counter = 'tag_hourly' AND direction = 'up'
UNION ALL
SELECT 'seat events', :rounds - count(*) FROM events WHERE counter = 'trip_seats' AND direction = 'up'
UNION ALL
SELECT 'like events', :rounds - count(DISTINCT (key->>'post_id')::int / 100) FROM events WHERE counter = 'post_likes'
ORDER BY 1;
