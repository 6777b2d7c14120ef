-- The database test/upgrade.sh carries across a major upgrade: counters in every mode, a counter cache, bounds,
-- thresholds (a list, and every => N on a log counter: at compaction) and window thresholds with callbacks, a sink and a counter through a parent
-- row. Run as the application role (not a superuser), in a database it owns. No rows: test/upgrade/write.sql
-- writes them (the blogs in round 1), so that a subscriber can start from this schema.
CREATE EXTENSION counters;
CREATE TABLE blogs (id int PRIMARY KEY, name text NOT NULL DEFAULT 'a blog', posts_count bigint NOT NULL DEFAULT 0);
CREATE TABLE posts (id int PRIMARY KEY, blog_id int NOT NULL, published boolean NOT NULL DEFAULT true,
                    rating int NOT NULL DEFAULT 0);
CREATE TABLE comments (id serial PRIMARY KEY, post_id int NOT NULL);
CREATE INDEX ON comments (post_id);
CREATE TABLE likes (id serial PRIMARY KEY, post_id int NOT NULL);
CREATE TABLE views (post_id int NOT NULL);
CREATE TABLE seats (id serial PRIMARY KEY, trip int NOT NULL);
CREATE TABLE tag_uses (tag text NOT NULL, hour timestamptz NOT NULL DEFAULT date_trunc('hour', now()));
-- every event a threshold or window threshold announced, through its callback
CREATE TABLE events (counter text, key jsonb, column_name text, new numeric, threshold numeric, direction text);
CREATE FUNCTION record_event(counter text, key jsonb, column_name text, old numeric, new numeric, threshold numeric,
                             direction text) RETURNS void LANGUAGE sql
  AS $$ INSERT INTO public.events VALUES (counter, key, column_name, new, threshold, direction) $$;
CREATE FUNCTION record_window(counter text, key jsonb, column_name text, old numeric, new numeric, threshold numeric,
                              direction text) RETURNS void LANGUAGE sql
  AS $$ INSERT INTO public.events VALUES (counter, key, column_name, new, threshold, direction) $$;

SELECT counters.create_counter('blog_posts', 'SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM public.posts WHERE published GROUP BY blog_id');
SELECT counters.create_counter('blog_posts_cache', 'SELECT blog_id AS id, count(*) AS posts_count FROM public.posts GROUP BY blog_id', target => 'blogs');
SELECT counters.create_counter('post_likes', 'SELECT post_id, count(*) AS likes FROM public.likes GROUP BY post_id', mode => 'log');
SELECT counters.create_counter('post_likes_sharded', 'SELECT post_id, count(*) AS likes FROM public.likes GROUP BY post_id', mode => 'sharded');
SELECT counters.create_counter('post_views', 'SELECT post_id, count(*) AS views FROM public.views GROUP BY post_id');
SELECT counters.set_sink('views');
SELECT counters.create_counter('blog_comments', 'SELECT p.blog_id, count(*) AS comments FROM public.comments c JOIN public.posts p ON c.post_id = p.id WHERE p.published GROUP BY p.blog_id');
SELECT counters.create_counter('trip_seats', 'SELECT trip, count(*) AS taken FROM public.seats GROUP BY trip');
SELECT counters.set_bounds('trip_seats', 'taken', max => 3);
SELECT counters.set_thresholds('trip_seats', 'taken', '{3}', callback => 'record_event(text,jsonb,text,numeric,numeric,numeric,text)');
SELECT counters.set_thresholds('post_likes', 'likes', every => 5, callback => 'record_event(text,jsonb,text,numeric,numeric,numeric,text)');
SELECT counters.create_counter('tag_hourly', 'SELECT tag, hour, count(*) AS uses FROM public.tag_uses GROUP BY tag, hour');
SELECT counters.set_window_thresholds('tag_hourly', 'uses', '{8}', bucket_column => 'hour', width => '24 hours',
                                      callback => 'record_window(text,jsonb,text,numeric,numeric,numeric,text)');
