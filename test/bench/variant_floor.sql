-- The floor: no counters; the two counters of variant_exact.sql kept by hand, each statement written together with
-- one set-based write of the counter rows it changes (writable CTEs: no trigger, no second statement, no extra round
-- trip). An exact counter must write at least these row versions in the writer's transaction, so nothing counting
-- exactly can be faster. The workloads' floor forms are w*_floor.pgbench and inner.sh's floor_sql; drift.sql checks
-- that they are exact too. The tables are laid out as the extension's counter tables (fillfactor 50).
CREATE TABLE ubp_floor (user_id int, blog_id int, posts bigint NOT NULL DEFAULT 0,
                        rating_sum bigint NOT NULL DEFAULT 0, PRIMARY KEY (user_id, blog_id)) WITH (fillfactor = 50);
CREATE TABLE bp_floor (blog_id int PRIMARY KEY, posts bigint NOT NULL DEFAULT 0) WITH (fillfactor = 50);
INSERT INTO ubp_floor SELECT user_id, blog_id, count(*), sum(rating) FROM posts
 WHERE is_published AND NOT is_deleted GROUP BY 1, 2;
INSERT INTO bp_floor SELECT blog_id, count(*) FROM posts WHERE is_published AND NOT is_deleted GROUP BY 1;
CREATE VIEW ubp_counter AS SELECT * FROM ubp_floor;
CREATE VIEW bp_counter AS SELECT * FROM bp_floor;
