-- The log floor: no counters; the two counters of variant_log.sql kept by hand, each statement written together with
-- appending its summed deltas, one row per changed key, to insert-only logs (writable CTEs, as variant_floor.sql),
-- laid out as the extension's logs (a btree index on the key). What log mode cannot go below before compaction. The
-- totals are variant_floor.sql's tables; the counters read them plus the logs.
\ir variant_floor.sql
CREATE TABLE ubp_floor_log (user_id int, blog_id int, posts bigint NOT NULL, rating_sum bigint NOT NULL);
CREATE INDEX ON ubp_floor_log (user_id, blog_id);
CREATE TABLE bp_floor_log (blog_id int, posts bigint NOT NULL);
CREATE INDEX ON bp_floor_log (blog_id);
CREATE OR REPLACE VIEW ubp_counter AS
SELECT user_id, blog_id, sum(posts)::bigint AS posts, sum(rating_sum)::bigint AS rating_sum
  FROM (SELECT * FROM ubp_floor UNION ALL SELECT * FROM ubp_floor_log) u GROUP BY 1, 2;
CREATE OR REPLACE VIEW bp_counter AS
SELECT blog_id, sum(posts)::bigint AS posts FROM (SELECT * FROM bp_floor UNION ALL SELECT * FROM bp_floor_log) u GROUP BY 1;
