from django.db import migrations, models

# A counter-cache column in the application's own table: counters keeps blog_blog.post_count.
COUNTER = """
SELECT counters.create_counter('blog_post_count', $$
    SELECT blog_id AS id, count(*) AS post_count FROM blog_post WHERE NOT is_deleted GROUP BY blog_id
$$, 'blog_blog')
"""


class Migration(migrations.Migration):
    dependencies = [("blog", "0001_initial")]
    operations = [
        migrations.AddField(model_name="blog", name="post_count", field=models.BigIntegerField(default=0, editable=False)),
        migrations.RunSQL(COUNTER, "SELECT counters.drop_counter('blog_post_count')"),
    ]
