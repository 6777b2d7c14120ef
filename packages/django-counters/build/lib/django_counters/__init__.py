"""django-counters: PostgreSQL counters (the `counters` extension) declared on Django models.

    class Post(models.Model):
        ...
        class Meta:
            counters = [
                Counter("blog_posts", queryset=lambda: Post.objects.filter(is_published=True)
                                                       .values("blog").annotate(posts=Count("id"))),
                Counter("blog_post_count", "SELECT blog_id AS id, count(*) AS post_count FROM blog_post GROUP BY 1",
                        target="blog_blog", deferred=True),
            ]

`makemigrations` writes CreateCounter / AlterCounter / DropCounter operations (django_counters.operations); all the
counting is done by the extension, in the database, for every write path (bulk_create, QuerySet.update(), raw SQL).
"""

#: The extension's SQL version this package needs at least.
EXTENSION_VERSION = (0, 5)
__version__ = "0.5.0"

MODES = ("exact", "log", "sharded")


class Counter:
    """One counter: its name, its definition (SQL text, or a QuerySet -- or a callable returning one, so that models
    may be named before they exist -- compiled to SQL), the existing table keeping it as counter-cache columns
    (`target`, a table name), its mode and whether it is deferred (applied at commit).

    Migrations keep the definition as SQL: what the database was given, as a view's SQL is kept by a migration."""

    def __init__(self, name, sql=None, *, queryset=None, target=None, mode="exact", deferred=False):
        if not isinstance(name, str) or not name:
            raise ValueError("a counter needs a name")
        if (sql is None) == (queryset is None):
            raise ValueError(f'counter "{name}": give its definition as sql or as queryset, one of them')
        if mode not in MODES:
            raise ValueError(f'counter "{name}": mode must be one of {", ".join(MODES)}, not {mode!r}')
        self.name = name
        self._sql = sql
        self._queryset = queryset
        self.target = target
        self.mode = mode
        self.deferred = bool(deferred)

    @property
    def sql(self):
        """The definition as SQL text (a QuerySet compiled, its parameters rendered as literals)."""
        if self._sql is not None:
            return self._sql.strip()
        qs = self._queryset() if callable(self._queryset) else self._queryset
        query, params = qs.query.sql_with_params()
        return query % tuple(_literal(p) for p in params)

    def deconstruct(self):
        kwargs = {"sql": self.sql}
        if self.target is not None:
            kwargs["target"] = self.target
        if self.mode != "exact":
            kwargs["mode"] = self.mode
        if self.deferred:
            kwargs["deferred"] = True
        return ("django_counters.Counter", [self.name], kwargs)

    def __eq__(self, other):
        return isinstance(other, Counter) and self.deconstruct() == other.deconstruct()

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"<Counter {self.name}>"


def _literal(value):
    """A QuerySet parameter as an SQL literal (the extension takes the definition as text)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    import psycopg2.extensions

    return psycopg2.extensions.adapt(value).getquoted().decode()


def installed_version(cursor):
    """The installed extension's version as a tuple, or None when it is not installed."""
    cursor.execute("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'counters'")
    row = cursor.fetchone()
    return tuple(int(p) for p in row[0].split(".")) if row else None


def require_extension(cursor):
    """A clear error when the extension is missing or older than this package needs."""
    version = installed_version(cursor)
    need = ".".join(map(str, EXTENSION_VERSION))
    if version is None:
        raise RuntimeError(
            "django-counters: the counters extension is not installed in this database: add "
            "django_counters.operations.CreateExtension() to a migration before the first counter, or run "
            f"CREATE EXTENSION counters (version {need} or later)")
    if version < EXTENSION_VERSION:
        raise RuntimeError(
            f"django-counters: the counters extension is version {'.'.join(map(str, version))}; this package needs "
            f"{need} or later: ALTER EXTENSION counters UPDATE")


def declared_counters():
    """Every counter declared in the models' Meta.counters, as (model, counter)."""
    from django.apps import apps

    for model in apps.get_models(include_auto_created=False):
        for counter in getattr(model._meta, "counters", None) or []:
            yield model, counter


def create(cursor, counter, concurrently=False):
    """Declare `counter` (names and the definition passed as parameters, never as SQL text)."""
    if concurrently:
        if counter.target is not None:
            raise ValueError(f'counter "{counter.name}": a counter-cache counter cannot be declared concurrently')
        cursor.execute("CALL counters.create_counter_concurrently(%s, %s, %s)", [counter.name, counter.sql, counter.mode])
    else:
        cursor.execute("SELECT counters.create_counter(%s, %s, %s, %s)",
                       [counter.name, counter.sql, counter.target, counter.mode])
    if counter.deferred:
        cursor.execute("SELECT counters.set_deferred(%s)", [counter.name])


def drop(cursor, name):
    cursor.execute("SELECT counters.drop_counter(%s)", [name])


def alter(cursor, old, new):
    """Bring counter `old` to `new` (same name): redefined, switched, deferred or not."""
    if old.target != new.target:
        drop(cursor, old.name)
        create(cursor, new)
        return
    if old.sql != new.sql:
        cursor.execute("SELECT counters.alter_counter(%s, mode => %s, definition => %s)", [new.name, new.mode, new.sql])
    elif old.mode != new.mode:
        cursor.execute("SELECT counters.alter_counter(%s, %s)", [new.name, new.mode])
    if old.deferred != new.deferred:
        cursor.execute("SELECT counters.set_deferred(%s, %s)", [new.name, new.deferred])

