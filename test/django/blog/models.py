from django.db import models


class Blog(models.Model):
    name = models.TextField()
    post_count = models.BigIntegerField(default=0, editable=False)  # kept by counters (migration 0002)

    COUNTER_FIELDS = {"post_count"}

    def save(self, *args, **kwargs):
        # An update writes the fields the application owns, never the counter's (docs/clients.md).
        if not self._state.adding and kwargs.get("update_fields") is None:
            kwargs["update_fields"] = [f.attname for f in self._meta.concrete_fields
                                       if not f.primary_key and f.attname not in self.COUNTER_FIELDS]
        super().save(*args, **kwargs)


class Post(models.Model):
    blog = models.ForeignKey(Blog, on_delete=models.CASCADE)
    user_id = models.IntegerField()
    is_published = models.BooleanField(default=False)
    is_deleted = models.BooleanField(default=False)
    rating = models.IntegerField(default=0)


class BlogPosts(models.Model):
    """The counter table counters.create_counter made (see the migration): read-only for the application."""

    blog = models.OneToOneField(Blog, primary_key=True, on_delete=models.DO_NOTHING, db_column="blog_id")
    posts = models.BigIntegerField()
    rating = models.BigIntegerField()

    class Meta:
        managed = False
        db_table = "blog_posts"


class PageView(models.Model):
    """A sink (migration 0003): rows are counted into post_page_views and never stored. Insert them with
    bulk_create(..., ignore_conflicts=True), which does not expect the rows back (docs/sinks.md)."""

    id = models.BigAutoField(primary_key=True)
    post = models.ForeignKey(Post, db_constraint=False, on_delete=models.DO_NOTHING)


class PostPageViews(models.Model):
    """The counter table of the sink: read-only for the application."""

    post = models.OneToOneField(Post, primary_key=True, on_delete=models.DO_NOTHING, db_column="post_id")
    views = models.BigIntegerField()

    class Meta:
        managed = False
        db_table = "post_page_views"
