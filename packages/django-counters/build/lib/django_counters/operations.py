"""Migration operations for counters: what makemigrations writes for Meta.counters, reversible.

    CreateExtension()                         CREATE EXTENSION IF NOT EXISTS counters (before the first counter)
    CreateCounter("post", Counter(...))       counters.create_counter(...); concurrently=True: the procedure
                                              create_counter_concurrently (in a migration with atomic = False)
    AlterCounter("post", Counter(...))        counters.alter_counter(...) to the new definition, mode or deferral
    DropCounter("post", "name")               counters.drop_counter(name); reversed from the counter it dropped

Each keeps the model state's "counters" option as makemigrations compares it."""

from django.contrib.postgres.operations import CreateExtension as _CreateExtension
from django.db import router
from django.db.migrations.operations.base import Operation

from . import Counter, alter, create, drop, require_extension


def _counters(state, app_label, model_name):
    return list(state.models[app_label, model_name.lower()].options.get("counters", []))


def _find(state, app_label, model_name, name):
    for counter in _counters(state, app_label, model_name):
        if counter.name == name:
            return counter
    raise ValueError(f'counter "{name}" is not declared on {app_label}.{model_name} in the migration state')


def _set(state, app_label, model_name, counters):
    state.models[app_label, model_name.lower()].options["counters"] = counters
    state.reload_model(app_label, model_name.lower(), delay=True)


class CreateExtension(_CreateExtension):
    """CREATE EXTENSION IF NOT EXISTS counters (a trusted extension: the database's owner may install it). Reversed,
    it leaves the extension: other apps' counters may use it."""

    def __init__(self):
        super().__init__("counters")

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        pass

    def deconstruct(self):
        return (self.__class__.__name__, [], {})


class CounterOperation(Operation):
    reduces_to_sql = True
    reversible = True

    @staticmethod
    def flush_deferred(schema_editor):
        """The SQL Django keeps for the end of the migration (foreign keys' indexes, constraints), run now: a counter
        through a parent row needs its index on the child's column when declared."""
        for sql in list(schema_editor.deferred_sql):
            schema_editor.execute(sql)
        schema_editor.deferred_sql.clear()

    def allowed(self, app_label, schema_editor, state):
        model = state.apps.get_model(app_label, self.model_name)
        return router.allow_migrate_model(schema_editor.connection.alias, model)


class CreateCounter(CounterOperation):
    def __init__(self, model_name, counter, concurrently=False):
        self.model_name = model_name
        self.counter = counter
        self.concurrently = concurrently

    def state_forwards(self, app_label, state):
        _set(state, app_label, self.model_name, _counters(state, app_label, self.model_name) + [self.counter])

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if not self.allowed(app_label, schema_editor, to_state):
            return
        if self.concurrently and schema_editor.atomic_migration:
            raise ValueError(f'counter "{self.counter.name}": CreateCounter(concurrently=True) commits between its '
                             "steps: put it in a migration of its own with atomic = False")
        self.flush_deferred(schema_editor)
        with schema_editor.connection.cursor() as cursor:
            require_extension(cursor)
            create(cursor, self.counter, self.concurrently)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if self.allowed(app_label, schema_editor, from_state):
            with schema_editor.connection.cursor() as cursor:
                drop(cursor, self.counter.name)

    def describe(self):
        return f"Create counter {self.counter.name} on {self.model_name}"

    @property
    def migration_name_fragment(self):
        return f"counter_{self.counter.name}"

    def deconstruct(self):
        kwargs = {"model_name": self.model_name, "counter": self.counter}
        if self.concurrently:
            kwargs["concurrently"] = True
        return (self.__class__.__name__, [], kwargs)


class AlterCounter(CounterOperation):
    def __init__(self, model_name, counter):
        self.model_name = model_name
        self.counter = counter

    def state_forwards(self, app_label, state):
        counters = [self.counter if c.name == self.counter.name else c
                    for c in _counters(state, app_label, self.model_name)]
        _set(state, app_label, self.model_name, counters)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if self.allowed(app_label, schema_editor, to_state):
            old = _find(from_state, app_label, self.model_name, self.counter.name)
            self.flush_deferred(schema_editor)
            with schema_editor.connection.cursor() as cursor:
                require_extension(cursor)
                alter(cursor, old, self.counter)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if self.allowed(app_label, schema_editor, from_state):
            old = _find(to_state, app_label, self.model_name, self.counter.name)
            with schema_editor.connection.cursor() as cursor:
                alter(cursor, self.counter, old)

    def describe(self):
        return f"Alter counter {self.counter.name} on {self.model_name}"

    @property
    def migration_name_fragment(self):
        return f"alter_counter_{self.counter.name}"

    def deconstruct(self):
        return (self.__class__.__name__, [], {"model_name": self.model_name, "counter": self.counter})


class DropCounter(CounterOperation):
    def __init__(self, model_name, name):
        self.model_name = model_name
        self.name = name

    def state_forwards(self, app_label, state):
        counters = [c for c in _counters(state, app_label, self.model_name) if c.name != self.name]
        _set(state, app_label, self.model_name, counters)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if self.allowed(app_label, schema_editor, from_state):
            with schema_editor.connection.cursor() as cursor:
                require_extension(cursor)
                drop(cursor, self.name)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if self.allowed(app_label, schema_editor, to_state):
            counter = _find(to_state, app_label, self.model_name, self.name)
            self.flush_deferred(schema_editor)
            with schema_editor.connection.cursor() as cursor:
                create(cursor, counter)

    def describe(self):
        return f"Drop counter {self.name} from {self.model_name}"

    @property
    def migration_name_fragment(self):
        return f"drop_counter_{self.name}"

    def deconstruct(self):
        return (self.__class__.__name__, [], {"model_name": self.model_name, "name": self.name})


__all__ = ["CreateExtension", "CreateCounter", "AlterCounter", "DropCounter", "Counter"]
