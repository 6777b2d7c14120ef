-- What users write today: a row trigger applying the universal formula with upserts.
\ir plpgsql_tables.sql
CREATE FUNCTION posts_counters_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.is_published AND NOT OLD.is_deleted THEN
		UPDATE ubp_plpgsql SET posts = posts - 1, rating_sum = rating_sum - OLD.rating
		 WHERE user_id = OLD.user_id AND blog_id = OLD.blog_id;
		UPDATE bp_plpgsql SET posts = posts - 1 WHERE blog_id = OLD.blog_id;
	END IF;
	IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.is_published AND NOT NEW.is_deleted THEN
		INSERT INTO ubp_plpgsql VALUES (NEW.user_id, NEW.blog_id, 1, NEW.rating)
		ON CONFLICT (user_id, blog_id) DO UPDATE
		SET posts = ubp_plpgsql.posts + 1, rating_sum = ubp_plpgsql.rating_sum + EXCLUDED.rating_sum;
		INSERT INTO bp_plpgsql VALUES (NEW.blog_id, 1)
		ON CONFLICT (blog_id) DO UPDATE SET posts = bp_plpgsql.posts + 1;
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER posts_counters AFTER INSERT OR UPDATE OR DELETE ON posts
	FOR EACH ROW EXECUTE FUNCTION posts_counters_row();
