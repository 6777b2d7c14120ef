#!/usr/bin/env bash
# The Django example project (test/django), on Debian's python3-django and python3-psycopg2 (installed when missing)
# and the suite's cluster (PG* variables):
#   - blog: the raw SQL fallback (docs/clients.md): a migration declares counters with RunSQL, managed = False models
#     read them;
#   - forum: counters declared in its models with django-counters (packages/django-counters), its migration written
#     by makemigrations (checked here to be current).
# The tests write through every ORM path (bulk_create, QuerySet.update()/delete(), save(), cascades,
# transaction.atomic() rollbacks, raw SQL) and compare each counter with an ORM recount after each step; forum's run
# again with the app made without migrations (its counters declared after syncdb). Then, on databases of their own:
# migrations forward and back; and in a copy of the project, forum's models changed (a definition, a mode, a counter
# removed, one added): makemigrations must write AlterCounter, DropCounter and CreateCounter, which migrate applies
# and reverses.
set -euo pipefail
cd "$(dirname "$0")/../django"
bash ../setup.sh python3-django python3-psycopg2 python3-pip python3-setuptools python3-wheel unzip >/dev/null
export PYTHONPATH=$(cd ../../packages/django-counters && pwd)
# Django's test runner creates (and drops) its own test database next to PGDATABASE.
export PGDATABASE=${PGDATABASE:-postgres}
fail() { echo "django: FAILED: $*"; exit 1; }
q() { psql -X -At -d "$1" -c "$2"; }
/usr/bin/python3 manage.py makemigrations forum --check --dry-run >/dev/null ||
	fail "forum's models differ from its migrations (makemigrations forum)"
/usr/bin/python3 manage.py test --noinput -v 2 2>&1 | tail -40
COUNTERS_NO_MIGRATIONS=1 /usr/bin/python3 manage.py test --noinput forum 2>&1 | tail -4
work=$(mktemp -d)
dropdb --if-exists counters_django >/dev/null 2>&1
createdb counters_django
trap 'dropdb --if-exists counters_django >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
export PGDATABASE=counters_django
# The migrations forward and back (RunSQL's reverse drops the counter; DropCounter's the package's).
/usr/bin/python3 manage.py migrate -v 0
[ "$(q counters_django "SELECT string_agg(name || ':' || mode || ':' || (options ? 'deferred'), ' ' ORDER BY name) FROM counters.counter")" = \
	"blog_post_count:exact:false blog_posts:exact:false forum_replies:log:false forum_topic_count:exact:true forum_topics:exact:false post_page_views:exact:false" ] ||
	fail "the migrations did not declare the counters: $(q counters_django 'SELECT string_agg(name, $$ $$) FROM counters.counter')"
ls=$(/usr/bin/python3 manage.py counters ls)
grep -q "^INSTALLED  forum_topic_count" <<<"$ls" || fail "counters ls: $ls"
# the unmanaged model of a counter table, as `counters models` writes it, is the one forum/models.py holds
models=$(/usr/bin/python3 manage.py counters models forum_topics)
for line in "class ForumTopics(models.Model):" "forum_id = models.BigIntegerField(primary_key=True)" \
	"score_sum = models.BigIntegerField()" 'db_table = "forum_topics"'; do
	grep -qF "$line" <<<"$models" || fail "counters models: no \"$line\" in: $models"
done
# forum's models changed: the definition of forum_topics (every topic), forum_replies back to exact, forum_topic_count
# removed, forum_scores added
cp -r . "$work/project"
python3 - "$work/project/forum/models.py" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace('Topic.objects.filter(is_published=True)\n', 'Topic.objects.all()\n')
s = s.replace(', mode="log"),', '),')
start = s.index('            Counter("forum_topic_count"')
end = s.index('\n        ]', start)
s = s[:start] + '            Counter("forum_scores", "SELECT forum_id, sum(score) AS score FROM forum_topic GROUP BY 1"),' + s[end:]
open(p, "w").write(s)
PY
(cd "$work/project" && /usr/bin/python3 manage.py makemigrations forum -n changed -v 0)
new="$work/project/forum/migrations/0002_changed.py"
for op in "AlterCounter(" "DropCounter(" "name='forum_topic_count'" "CreateCounter(" "'forum_scores'"; do
	grep -q "$op" "$new" || fail "makemigrations did not write $op: $(cat "$new")"
done
[ "$(grep -c "AlterCounter(" "$new")" = 2 ] || fail "makemigrations: two counters changed: $(cat "$new")"
(cd "$work/project" && /usr/bin/python3 manage.py migrate forum -v 0 && /usr/bin/python3 manage.py makemigrations forum --check --dry-run >/dev/null) ||
	fail "the changed models' migration"
[ "$(q counters_django "SELECT string_agg(name || ':' || mode, ' ' ORDER BY name) FROM counters.counter WHERE name LIKE 'forum%'")" = \
	"forum_replies:exact forum_scores:exact forum_topics:exact" ] || fail "after 0002: $(q counters_django 'SELECT string_agg(name, $$ $$) FROM counters.counter')"
[ "$(q counters_django "SELECT count(*) FROM counters.verify()")" = 0 ] || fail "verify() after 0002"
(cd "$work/project" && /usr/bin/python3 manage.py migrate forum 0001 -v 0)
[ "$(q counters_django "SELECT string_agg(name || ':' || mode || ':' || (options ? 'deferred'), ' ' ORDER BY name) FROM counters.counter WHERE name LIKE 'forum%'")" = \
	"forum_replies:log:false forum_topic_count:exact:true forum_topics:exact:false" ] ||
	fail "0002 reversed: $(q counters_django 'SELECT string_agg(name, $$ $$) FROM counters.counter')"
/usr/bin/python3 manage.py migrate forum zero -v 0
/usr/bin/python3 manage.py migrate blog zero -v 0
[ "$(q counters_django "SELECT count(*) FROM counters.counter") $(q counters_django "SELECT count(*) FROM pg_class WHERE relname IN ('blog_posts', 'blog_post', 'forum_topics', 'forum_topic')")" = "0 0" ] ||
	fail "unapplying the migrations left counters or their tables"
# pip-installable: the wheel builds and holds the app, its operations and its command
# (from a copy: building writes build/ and *.egg-info next to the sources)
cp -r ../../packages/django-counters "$work/package"
/usr/bin/python3 -m pip wheel -q --no-build-isolation --no-deps "$work/package" -w "$work/wheel" >/dev/null
# (the listing read whole first: grep -q in a pipe may exit before unzip has written it all, and unzip's SIGPIPE
# fails the pipeline under pipefail)
listing=$(unzip -Z1 "$work"/wheel/django_counters-*.whl)
grep -q "django_counters/management/commands/counters.py" <<<"$listing" ||
	fail "the wheel lacks the management command: $listing"
echo "django: ok"
