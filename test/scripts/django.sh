#!/usr/bin/env bash
# The Django example project (test/django): a migration declares a counter with RunSQL, a managed = False model
# reads the counter table, and the tests write with bulk_create, QuerySet.update()/delete(), save(), cascades,
# transaction.atomic() rollbacks and raw SQL, comparing the counter with an ORM recount after each step. Uses
# Debian's python3-django and python3-psycopg2 (installed when missing) and the suite's cluster (PG* variables).
set -euo pipefail
cd "$(dirname "$0")/../django"
bash ../setup.sh python3-django python3-psycopg2 >/dev/null
# Django's test runner creates (and drops) its own test database next to PGDATABASE.
export PGDATABASE=${PGDATABASE:-postgres}
/usr/bin/python3 manage.py test --noinput -v 2 2>&1 | tail -15
# The migration forward and back (RunSQL's reverse drops the counter) on a database of its own.
dropdb --if-exists counters_django >/dev/null 2>&1
createdb counters_django
trap 'dropdb --if-exists counters_django >/dev/null 2>&1 || true' EXIT
PGDATABASE=counters_django /usr/bin/python3 manage.py migrate -v 0
[ "$(psql -X -At -d counters_django -c "SELECT count(*) FROM counters.counter WHERE name = 'blog_posts'")" = 1 ] ||
	{ echo "django: FAILED: the migration did not declare the counter"; exit 1; }
PGDATABASE=counters_django /usr/bin/python3 manage.py migrate blog zero -v 0
[ "$(psql -X -At -d counters_django -c "SELECT count(*) FROM counters.counter") $(psql -X -At -d counters_django -c "SELECT count(*) FROM pg_class WHERE relname IN ('blog_posts', 'blog_post')")" = "0 0" ] ||
	{ echo "django: FAILED: unapplying the migration left the counter or its tables"; exit 1; }
echo "django: ok"
