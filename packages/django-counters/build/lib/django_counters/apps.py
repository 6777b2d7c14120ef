"""The app: Meta.counters becomes a model option (as Meta.indexes is), makemigrations and migrate detect counters, and
apps without migrations (a test run with MIGRATION_MODULES set to None) get their declared counters once their tables
exist."""

from django.apps import AppConfig
from django.db.migrations import state as migration_state
from django.db.models import options
from django.db.models.signals import post_migrate

# (both module globals: Options reads its own, ModelState.from_model the name it imported)
for _module in (options, migration_state):
    if "counters" not in _module.DEFAULT_NAMES:
        _module.DEFAULT_NAMES = tuple(_module.DEFAULT_NAMES) + ("counters",)


def install_unmigrated(sender, app_config, using, **kwargs):
    """post_migrate: the declared counters of an app without migrations (its tables made by syncdb), if missing."""
    from django.db import connections, router
    from django.db.migrations.loader import MigrationLoader

    from . import create, require_extension

    connection = connections[using]
    if app_config.label not in MigrationLoader(connection, ignore_no_migrations=True).unmigrated_apps:
        return
    models = [m for m in app_config.get_models() if getattr(m._meta, "counters", None)]
    if not models:
        return
    with connection.cursor() as cursor:
        require_extension(cursor)
        for model in models:
            if not router.allow_migrate_model(using, model):
                continue
            for counter in model._meta.counters:
                cursor.execute("SELECT 1 FROM counters.counter WHERE name = %s", [counter.name])
                if cursor.fetchone() is None:
                    create(cursor, counter)


class CountersConfig(AppConfig):
    name = "django_counters"
    verbose_name = "PostgreSQL counters"

    def ready(self):
        from django.core.management.commands import makemigrations, migrate

        from .autodetector import CountersAutodetectorMixin

        for command in (makemigrations, migrate):
            base = command.MigrationAutodetector
            if not issubclass(base, CountersAutodetectorMixin):
                command.MigrationAutodetector = type("MigrationAutodetector", (CountersAutodetectorMixin, base), {})
        post_migrate.connect(install_unmigrated, dispatch_uid="django_counters.install_unmigrated")
