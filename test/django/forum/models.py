"""The forum app declares its counters in its models (django-counters, packages/django-counters): makemigrations
wrote forum/migrations from them; the blog app next to it is the raw SQL fallback (docs/clients.md)."""
from django.db import models
from django.db.models import Count, Sum

from django_counters import Counter
from django_counters.fields import CounterField, CounterFieldsMixin


class Forum(CounterFieldsMixin, models.Model):
    name = models.TextField()
    topic_count = CounterField()  # kept by the counter forum_topic_count (Topic.Meta)


class Topic(models.Model):
    forum = models.ForeignKey(Forum, on_delete=models.CASCADE)
    is_published = models.BooleanField(default=False)
    score = models.IntegerField(default=0)

    class Meta:
        counters = [
            # written with the ORM: compiled to the SQL the extension takes
            Counter("forum_topics", queryset=lambda: Topic.objects.filter(is_published=True)
                    .values("forum").annotate(topics=Count("id"), score_sum=Sum("score"))),
            # a counter-cache column of forum_forum, applied at commit (deferred)
            Counter("forum_topic_count", "SELECT forum_id AS id, count(*) AS topic_count FROM forum_topic GROUP BY forum_id",
                    target="forum_forum", deferred=True),
        ]


class Reply(models.Model):
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE)
    body = models.TextField(default="")

    class Meta:
        counters = [
            # through the parent row (a reply counts for its topic's forum), in log mode
            Counter("forum_replies", "SELECT t.forum_id, count(*) AS replies FROM forum_reply r "
                    "JOIN forum_topic t ON r.topic_id = t.id GROUP BY t.forum_id", mode="log"),
        ]


class ForumTopics(models.Model):
    """The counter table of forum_topics (manage.py counters models forum_topics wrote it): read-only."""

    forum_id = models.BigIntegerField(primary_key=True)
    topics = models.BigIntegerField()
    score_sum = models.BigIntegerField()

    class Meta:
        managed = False
        db_table = "forum_topics"
