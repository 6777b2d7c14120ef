"""Counters declared in the models (django-counters): every ORM write path, each step compared with a recount made by
the ORM's own aggregation (never with the counters' view of themselves). A TransactionTestCase: each step commits,
as the application's transactions do, so the deferred counter-cache column (applied at commit) is there to compare."""
from django.core.management import call_command
from django.apps import apps
from django.db.migrations.state import ProjectState

from django_counters import Counter, create, drop
from django_counters.operations import CreateCounter
from django.db import connection, transaction
from django.db.models import Count, Sum
from django.test import TransactionTestCase

from forum.models import Forum, ForumTopics, Reply, Topic


class DeclaredCounters(TransactionTestCase):
    def setUp(self):
        self.forums = [Forum.objects.create(name=f"forum {i}") for i in range(3)]

    def assertExact(self, step):
        recount = {
            r["forum_id"]: (r["topics"], r["score_sum"])
            for r in Topic.objects.filter(is_published=True).values("forum_id")
            .annotate(topics=Count("id"), score_sum=Sum("score"))
        }
        stored = {c.forum_id: (c.topics, c.score_sum) for c in ForumTopics.objects.all()}
        self.assertEqual(stored, recount, f"{step}: forum_topics")
        cache = {f.id: f.topic_count for f in Forum.objects.all()}
        recount = {f.id: f.n for f in Forum.objects.annotate(n=Count("topic"))}
        self.assertEqual(cache, recount, f"{step}: forum.topic_count")
        replies = {r["topic__forum_id"]: r["n"] for r in Reply.objects.values("topic__forum_id").annotate(n=Count("id"))}
        with connection.cursor() as cur:
            cur.execute("SELECT forum_id, replies FROM forum_replies")
            self.assertEqual(dict(cur.fetchall()), replies, f"{step}: forum_replies")
            cur.execute("SELECT count(*) FROM counters.verify()")
            self.assertEqual(cur.fetchone()[0], 0, f"{step}: verify()")

    def test_orm_writes(self):
        f0, f1, f2 = self.forums
        Topic.objects.bulk_create([Topic(forum=f0 if i % 2 else f1, score=i, is_published=i % 3 > 0) for i in range(40)])
        self.assertExact("bulk_create")
        t = Topic.objects.create(forum=f2, score=5, is_published=True)
        Reply.objects.bulk_create([Reply(topic=t) for _ in range(4)] + [Reply(topic=Topic.objects.first())])
        self.assertExact("create")
        Topic.objects.filter(is_published=False).update(is_published=True)  # QuerySet.update(): no signals
        self.assertExact("update() publishing")
        Topic.objects.filter(forum=f0, score__lt=10).update(forum=f2)  # topics (and their replies) move
        self.assertExact("update() moving topics")
        t.score += 100
        t.save()
        self.assertExact("save()")
        stale = Forum.objects.get(pk=f2.pk)  # loaded before the next topics
        Topic.objects.create(forum=f2, is_published=True)
        stale.name = "renamed"
        stale.save()  # CounterFieldsMixin: the stale topic_count is not written back
        self.assertExact("a stale instance saved")
        Topic.objects.filter(score__gt=30).delete()  # queryset delete, cascading to replies
        self.assertExact("delete()")
        with connection.cursor() as cur:
            cur.execute("UPDATE forum_topic SET score = score + 1 WHERE forum_id = %s", [f1.pk])
        self.assertExact("raw SQL")
        with transaction.atomic():
            Topic.objects.create(forum=f1, is_published=True)
            Topic.objects.create(forum=f0, is_published=True)  # keys in another order than the next transaction's
        self.assertExact("a transaction of several saves")
        try:
            with transaction.atomic():
                Topic.objects.create(forum=f1, is_published=True)
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        self.assertExact("a rolled-back transaction")
        f2.delete()  # cascade through the foreign keys
        self.assertExact("cascade delete of a forum")

    def test_commands(self):
        Topic.objects.create(forum=self.forums[0], is_published=True)
        call_command("counters", "verify")
        call_command("counters", "rebuild", "forum_topics")
        call_command("counters", "ls")
        self.assertExact("commands")

    def test_concurrently(self):
        Topic.objects.bulk_create([Topic(forum=f, score=3) for f in self.forums for _ in range(5)])
        counter = Counter("forum_scores", "SELECT forum_id, sum(score) AS score FROM forum_topic GROUP BY 1")
        # (a migration with atomic = False: the procedure commits between its steps)
        operation = CreateCounter("topic", counter, concurrently=True)
        with connection.schema_editor(atomic=True) as editor:
            with self.assertRaisesRegex(ValueError, "atomic = False"):
                state = ProjectState.from_apps(apps)
                operation.database_forwards("forum", editor, state, state)
        with connection.cursor() as cur:
            create(cur, counter, concurrently=True)
            cur.execute("SELECT forum_id, score FROM forum_scores ORDER BY 1")
            self.assertEqual(cur.fetchall(), [(f.id, 15) for f in self.forums])
            drop(cur, "forum_scores")
