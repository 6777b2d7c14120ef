-- One round of writes through every counter (psql variable r: the round, 1, 2, ...), each its own statement, then a
-- compaction (the log counter's thresholds are crossed there).
INSERT INTO blogs (id) SELECT g FROM generate_series(1, 5) g WHERE :r = 1;
INSERT INTO posts SELECT :r * 100 + g, 1 + g % 5, g % 4 <> 0, g FROM generate_series(1, 30) g;
UPDATE posts SET blog_id = 1 + blog_id % 5 WHERE id % 7 = 0 AND id / 100 = :r;
UPDATE posts SET published = NOT published WHERE id % 5 = 0 AND id / 100 = :r;
DELETE FROM posts WHERE id % 11 = 0 AND id / 100 = :r;
INSERT INTO comments (post_id) SELECT :r * 100 + 1 + g % 30 FROM generate_series(1, 40) g;
UPDATE posts SET published = NOT published WHERE id = :r * 100 + 2;
INSERT INTO likes (post_id) SELECT :r * 100 + 1 + g % 2 FROM generate_series(1, 20) g;
DELETE FROM likes WHERE id % 9 = 0;
INSERT INTO views SELECT :r * 100 + g % 4 FROM generate_series(1, 20) g;
INSERT INTO seats (trip) VALUES (:r), (:r), (:r);
INSERT INTO tag_uses (tag) SELECT 'pg' || :r FROM generate_series(1, 9);
SELECT counters.compact();
