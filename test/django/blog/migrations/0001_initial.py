from django.db import migrations, models
import django.db.models.deletion

COUNTER = """
SELECT counters.create_counter('blog_posts', $$
    SELECT blog_id, count(*) AS posts, sum(rating) AS rating
      FROM blog_post WHERE is_published AND NOT is_deleted GROUP BY blog_id
$$)
"""


class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [
        migrations.CreateModel(
            name="Blog",
            fields=[("id", models.BigAutoField(primary_key=True, serialize=False)), ("name", models.TextField())],
        ),
        migrations.CreateModel(
            name="Post",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("user_id", models.IntegerField()),
                ("is_published", models.BooleanField(default=False)),
                ("is_deleted", models.BooleanField(default=False)),
                ("rating", models.IntegerField(default=0)),
                ("blog", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to="blog.blog")),
            ],
        ),
        migrations.RunSQL("CREATE EXTENSION IF NOT EXISTS counters", migrations.RunSQL.noop),
        migrations.RunSQL(COUNTER, "SELECT counters.drop_counter('blog_posts')"),
        migrations.CreateModel(
            name="BlogPosts",
            fields=[
                ("blog", models.OneToOneField(db_column="blog_id", on_delete=django.db.models.deletion.DO_NOTHING,
                                              primary_key=True, serialize=False, to="blog.blog")),
                ("posts", models.BigIntegerField()),
                ("rating", models.BigIntegerField()),
            ],
            options={"db_table": "blog_posts", "managed": False},
        ),
    ]
