from django.db import migrations, models

# Page views counted and never stored: blog_pageview is a sink (docs/sinks.md). Its post reference is a ForeignKey
# without a database constraint: a sink refuses foreign keys (they are checked on stored rows).
COUNTER = """
SELECT counters.create_counter('post_page_views', $$
    SELECT post_id, count(*) AS views FROM blog_pageview GROUP BY post_id
$$);
SELECT counters.set_sink('blog_pageview');
"""


class Migration(migrations.Migration):
    dependencies = [("blog", "0002_post_count")]
    operations = [
        migrations.CreateModel(
            name="PageView",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("post", models.ForeignKey("blog.Post", db_constraint=False, on_delete=models.DO_NOTHING)),
            ],
        ),
        migrations.RunSQL(COUNTER, "SELECT counters.drop_counter('post_page_views')"),
    ]
