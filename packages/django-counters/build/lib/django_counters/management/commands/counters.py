"""manage.py counters ls | verify [name] | rebuild [name] | models [name]

  ls       each declared counter: INSTALLED (in the database as declared), OUTDATED (its mode or deferral differ: a
           migration is missing), MISSING (not in the database); and UNDECLARED: counters of the database no model
           declares
  verify   counters.verify(): every stored value that differs from its definition (exit status 1 if any)
  rebuild  counters.rebuild(): make stored counters equal to their definitions
  models   unmanaged models (read-only) for counter tables, to paste into models.py
"""

import sys

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections

from ... import declared_counters, require_extension


class Command(BaseCommand):
    help = "List, verify, rebuild the counters the models declare; write models for counter tables."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["ls", "verify", "rebuild", "models"])
        parser.add_argument("name", nargs="?", help="one counter (default: all)")
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)

    def handle(self, action, name, database, **options):
        with connections[database].cursor() as cursor:
            try:
                require_extension(cursor)
            except RuntimeError as e:
                raise CommandError(str(e))
            getattr(self, "do_" + action)(cursor, name)

    def do_ls(self, cursor, name):
        cursor.execute("SELECT name, mode, coalesce((options->>'deferred')::boolean, false) FROM counters.counter "
                       "WHERE NOT options ? 'part_of'")
        stored = {row[0]: row[1:] for row in cursor.fetchall()}
        declared = set()
        for model, counter in declared_counters():
            if name and counter.name != name:
                continue
            declared.add(counter.name)
            state = stored.get(counter.name)
            status = "MISSING" if state is None else (
                "INSTALLED" if state == (counter.mode, counter.deferred) else "OUTDATED")
            self.stdout.write(f"{status:<10} {counter.name}  ({model._meta.label})")
        for other in sorted(set(stored) - declared):
            if not name or other == name:
                self.stdout.write(f"{'UNDECLARED':<10} {other}")

    def do_verify(self, cursor, name):
        cursor.execute("SELECT counter, key::text, column_name, stored, expected FROM counters.verify(%s)", [name])
        rows = cursor.fetchall()
        for row in rows:
            self.stdout.write("%s %s %s: stored %s, expected %s" % row)
        if rows:
            sys.exit(1)
        self.stdout.write("every counter equals its definition")

    def do_rebuild(self, cursor, name):
        cursor.execute("SELECT counters.rebuild(%s)", [name])
        self.stdout.write(f"{cursor.fetchone()[0]} rows written")

    def do_models(self, cursor, name):
        cursor.execute(
            "SELECT c.name, c.target::regclass::text, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) "
            "  FROM counters.counter c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.target "
            " WHERE c.owns_target AND a.attnum > 0 AND NOT a.attisdropped AND (%s::text IS NULL OR c.name = %s) "
            " ORDER BY c.name, a.attnum", [name, name])
        fields = {"bigint": "BigIntegerField()", "integer": "IntegerField()", "smallint": "SmallIntegerField()",
                  "numeric": "DecimalField(max_digits=65535, decimal_places=65535)", "text": "TextField()",
                  "boolean": "BooleanField()", "date": "DateField()", "timestamp with time zone": "DateTimeField()",
                  "timestamp without time zone": "DateTimeField()"}
        current = None
        for counter, table, column, type_ in cursor.fetchall():
            if counter != current:
                if current is not None:
                    self.stdout.write(f'\n    class Meta:\n        managed = False\n        db_table = "{table_of}"\n')
                current, table_of, first = counter, table, True
                class_name = "".join(part.capitalize() for part in counter.split("_"))
                self.stdout.write(f'\nclass {class_name}(models.Model):\n    """Counter {counter}: kept by the '
                                  'database, read-only."""\n')
            field = fields.get(type_, "TextField()")
            if first:
                # (Django wants one primary key column: the first key column stands for the key)
                field = field.replace("()", "(primary_key=True)").replace(", decimal", ", primary_key=True, decimal")
                first = False
            self.stdout.write(f"    {column} = models.{field}")
        if current is not None:
            self.stdout.write(f'\n    class Meta:\n        managed = False\n        db_table = "{table_of}"\n')
