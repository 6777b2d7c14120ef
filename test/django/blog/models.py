from django.db import models


class Blog(models.Model):
    name = models.TextField()


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
