#!/usr/bin/env bash
# ActiveRecord test (test/rails): Debian's ruby-activerecord and ruby-pg (installed when missing), a migration
# declaring a counter, update_all / insert_all / delete_all / create / a rolled-back transaction, each compared with
# an ActiveRecord recount, and a database loaded from the structure.sql ActiveRecord dumps (pg_dump --schema-only)
# counting from its first write; and what a database loaded from Rails' default schema.rb holds: no counter, as
# docs/clients.md says; then the gem counters-rails (packages/counters-rails, with Debian's ruby-railties for its
# generator): rails/gem_test.rb. Runs in the suite's cluster (PG* variables), on databases of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
bash setup.sh ruby ruby-activerecord ruby-pg ruby-railties >/dev/null
export RAILS_DB=counters_rails
dropdb --if-exists "$RAILS_DB" >/dev/null 2>&1
createdb "$RAILS_DB"
trap 'dropdb --if-exists "$RAILS_DB" >/dev/null 2>&1; dropdb --if-exists "${RAILS_DB}_copy" >/dev/null 2>&1 || true' EXIT
ruby rails/counters_test.rb
ruby rails/gem_test.rb
# the gem builds from its gemspec, with its generator and rake tasks
gemdir=$(mktemp -d)
cp -r ../packages/counters-rails "$gemdir/"
(cd "$gemdir/counters-rails" && gem build -q counters-rails.gemspec >/dev/null)
files=$(gem spec "$gemdir"/counters-rails/counters-rails-*.gem files)
rm -rf "$gemdir"
for f in lib/counters/rails.rb lib/generators/counters/cache_generator.rb lib/tasks/counters.rake; do
	grep -qF "$f" <<<"$files" || { echo "rails: FAILED: the gem lacks $f"; exit 1; }
done
echo "rails: ok"
