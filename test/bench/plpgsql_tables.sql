-- The tables of the hand-written variants variant_plpgsql_row.sql and variant_plpgsql_stmt.sql (which read this
-- file): the two counters of variant_exact.sql, filled from the seeded posts.
CREATE TABLE ubp_plpgsql (user_id int, blog_id int, posts bigint NOT NULL DEFAULT 0,
                          rating_sum bigint NOT NULL DEFAULT 0, PRIMARY KEY (user_id, blog_id));
CREATE TABLE bp_plpgsql (blog_id int PRIMARY KEY, posts bigint NOT NULL DEFAULT 0);
INSERT INTO ubp_plpgsql SELECT user_id, blog_id, count(*), sum(rating) FROM posts
 WHERE is_published AND NOT is_deleted GROUP BY 1, 2;
INSERT INTO bp_plpgsql SELECT blog_id, count(*) FROM posts WHERE is_published AND NOT is_deleted GROUP BY 1;
