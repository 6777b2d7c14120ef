"""What breaks signal-based counters, done with Django's ORM: after each step the counter table (read through a
managed=False model) must equal a recount made with the ORM's own aggregation."""
from django.db import connection, transaction
from django.db.models import Count, Q, Sum
from django.test import TransactionTestCase

from blog.models import Blog, BlogPosts, PageView, Post, PostPageViews


class CountersWithDjango(TransactionTestCase):
    def setUp(self):
        self.blogs = [Blog.objects.create(name=f"blog {i}") for i in range(3)]

    def assertExact(self, step):
        recount = {
            r["blog_id"]: (r["posts"], r["rating"] or 0)
            for r in Post.objects.filter(is_published=True, is_deleted=False)
            .values("blog_id")
            .annotate(posts=Count("id"), rating=Sum("rating"))
        }
        recount = {k: v for k, v in recount.items() if v != (0, 0)}
        stored = {c.blog_id: (c.posts, c.rating) for c in BlogPosts.objects.all()}
        self.assertEqual(stored, recount, step)
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM counters.verify('blog_posts')")
            self.assertEqual(cur.fetchone()[0], 0, step)

    def test_orm_writes(self):
        b0, b1, b2 = self.blogs
        Post.objects.bulk_create([Post(blog=b0 if i % 2 else b1, user_id=i, rating=i, is_published=i % 3 > 0)
                                  for i in range(60)])
        self.assertExact("bulk_create")
        Post.objects.create(blog=b2, user_id=1, rating=5, is_published=True)
        self.assertExact("create")
        Post.objects.filter(is_published=False).update(is_published=True)  # QuerySet.update(): no signals
        self.assertExact("update() publishing drafts")
        Post.objects.filter(blog=b0, rating__lt=10).update(blog=b2)  # moving posts between blogs
        self.assertExact("update() moving posts")
        Post.objects.filter(rating__gt=50).update(is_deleted=True)  # soft delete
        self.assertExact("soft delete")
        p = Post.objects.filter(blog=b1).first()
        p.rating += 100
        p.save()  # a model save
        self.assertExact("save()")
        Post.objects.filter(user_id__in=[3, 4, 5]).delete()  # queryset delete
        self.assertExact("delete()")
        b2.delete()  # cascade through the foreign key
        self.assertExact("cascade delete of a blog")

    def test_stale_save_keeps_counter_cache(self):
        b0 = self.blogs[0]
        stale = Blog.objects.get(pk=b0.pk)  # post_count 0, loaded before the posts exist
        Post.objects.bulk_create([Post(blog=b0, user_id=i) for i in range(5)])
        stale.name = "renamed"
        stale.save()  # a stale instance saved: must not write post_count = 0 back
        b0.refresh_from_db()
        self.assertEqual(b0.name, "renamed")
        self.assertEqual(b0.post_count, Post.objects.filter(blog=b0, is_deleted=False).count())
        self.assertEqual(b0.post_count, 5)
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM counters.verify('blog_post_count')")
            self.assertEqual(cur.fetchone()[0], 0)

    def test_rollback_and_raw_sql(self):
        b0, b1, _ = self.blogs
        Post.objects.bulk_create([Post(blog=b0, user_id=i, rating=1, is_published=True) for i in range(10)])
        try:
            with transaction.atomic():
                Post.objects.update(blog=b1)
                Post.objects.create(blog=b1, user_id=99, rating=7, is_published=True)
                self.assertExact("inside atomic()")
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        self.assertExact("after atomic() rolled back")
        with connection.cursor() as cur:
            cur.execute("UPDATE blog_post SET rating = rating * 3 WHERE user_id % 2 = 0")
            cur.execute("INSERT INTO blog_post (blog_id, user_id, is_published, is_deleted, rating) "
                        "SELECT %s, g, true, false, g FROM generate_series(1, 20) g", [b1.id])
        self.assertExact("raw SQL")

    def test_sink_counts_page_views_without_storing_them(self):
        posts = Post.objects.bulk_create([Post(blog=self.blogs[0], user_id=i) for i in range(5)])
        PageView.objects.bulk_create([PageView(post=posts[i % 5]) for i in range(23)], ignore_conflicts=True)
        PageView.objects.bulk_create([PageView(post=posts[0])], ignore_conflicts=True)
        expected = {p.id: 23 // 5 + (1 if i < 23 % 5 else 0) + (1 if i == 0 else 0) for i, p in enumerate(posts)}
        self.assertEqual({v.post_id: v.views for v in PostPageViews.objects.all()}, expected)
        self.assertEqual(PageView.objects.count(), 0)
        # create() reads the new row's id back (RETURNING): a sink returns none, so it fails, and counts nothing.
        with self.assertRaises(TypeError):
            with transaction.atomic():
                PageView.objects.create(post=posts[1])
        self.assertEqual({v.post_id: v.views for v in PostPageViews.objects.all()}, expected)

