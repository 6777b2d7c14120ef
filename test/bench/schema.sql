-- The first seed's schema: posts with drafts, soft delete and ratings; counters per (user, blog) and per blog.
DROP TABLE IF EXISTS posts, ubp_plpgsql, bp_plpgsql, staging CASCADE;
CREATE TABLE posts (
	id bigserial PRIMARY KEY,
	user_id int NOT NULL,
	blog_id int NOT NULL,
	is_published boolean NOT NULL DEFAULT true,
	is_deleted boolean NOT NULL DEFAULT false,
	rating int NOT NULL DEFAULT 0,
	title text NOT NULL DEFAULT 'a post'
);
-- :users users x 100 blogs (10,000 by default: up to 1,000,000 (user, blog) keys, so bulk statements touch
-- hundreds of thousands of keys).
INSERT INTO posts (user_id, blog_id, is_published, rating)
SELECT 1 + (random() * (:users - 1))::int, 1 + (random() * 99)::int, random() < 0.9, (random() * 10)::int
  FROM generate_series(1, :rows);
-- Rows for the bulk-insert workloads (W5), prepared outside the measurement.
CREATE TABLE staging AS
SELECT 1 + (random() * (:users - 1))::int AS user_id, 1 + (random() * 99)::int AS blog_id, random() < 0.9 AS is_published,
       (random() * 10)::int AS rating
  FROM generate_series(1, :rows / 2);
VACUUM ANALYZE posts;
VACUUM ANALYZE staging;
