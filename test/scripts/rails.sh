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
echo "rails: ok"
