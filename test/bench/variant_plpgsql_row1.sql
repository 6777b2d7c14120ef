-- The same one counter, as users write it today: a PL/pgSQL row trigger doing the upsert.
CREATE TABLE ubp_plpgsql (user_id int, blog_id int, posts bigint NOT NULL DEFAULT 0,
                          rating_sum bigint NOT NULL DEFAULT 0, PRIMARY KEY (user_id, blog_id));
INSERT INTO ubp_plpgsql SELECT user_id, blog_id, count(*), sum(rating) FROM posts
 WHERE is_published AND NOT is_deleted GROUP BY 1, 2;
CREATE FUNCTION posts_counters_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.is_published AND NOT OLD.is_deleted THEN
		UPDATE ubp_plpgsql SET posts = posts - 1, rating_sum = rating_sum - OLD.rating
		 WHERE user_id = OLD.user_id AND blog_id = OLD.blog_id;
	END IF;
	IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.is_published AND NOT NEW.is_deleted THEN
		INSERT INTO ubp_plpgsql VALUES (NEW.user_id, NEW.blog_id, 1, NEW.rating)
		ON CONFLICT (user_id, blog_id) DO UPDATE
		SET posts = ubp_plpgsql.posts + 1, rating_sum = ubp_plpgsql.rating_sum + EXCLUDED.rating_sum;
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER posts_counters AFTER INSERT OR UPDATE OR DELETE ON posts
	FOR EACH ROW EXECUTE FUNCTION posts_counters_row();
