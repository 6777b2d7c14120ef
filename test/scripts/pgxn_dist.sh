#!/usr/bin/env bash
# PGXN readiness: META.json is valid JSON following the PGXN meta spec's required keys, its version matches
# counters.control's default_version, and `make dist` builds counters-<version>.zip from git holding the sources
# (and no build products). Needs git and unzip (installed when missing).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash test/setup.sh unzip >/dev/null
fail() { echo "pgxn_dist: FAILED: $*"; exit 1; }
meta=$(psql -X -At -c "SELECT \$j\$$(cat META.json)\$j\$::jsonb" 2>&1) || fail "META.json is not valid JSON: $meta"
for key in name abstract version maintainer license provides meta-spec; do
	[ "$(psql -X -At -c "SELECT \$j\$$(cat META.json)\$j\$::jsonb ? '$key'")" = t ] || fail "META.json lacks \"$key\""
done
control=$(sed -n "s/^default_version = '\(.*\)'/\1/p" counters.control)
version=$(psql -X -At -c "SELECT \$j\$$(cat META.json)\$j\$::jsonb ->> 'version'")
[ "$version" = "$control.0" ] || [ "$version" = "$control" ] ||
	fail "META.json version $version does not match counters.control default_version $control"
if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "pgxn_dist: not a git checkout, make dist skipped"
	exit 0
fi
zip="counters-$version.zip"
rm -f "$zip"
make -s dist
trap 'rm -f "$zip"' EXIT
list=$(unzip -Z1 "$zip")
for f in Makefile counters.control META.json README.md src/write/direct.cpp src/sql/counters.sql src/sql/counters--0.3--0.4.sql src/sql/counters--0.4.sql src/sql/counters--0.4--0.5.sql; do
	grep -qx "counters-$version/$f" <<<"$list" || fail "$zip lacks $f"
done
! grep -qE '\.(o|so|bc)$' <<<"$list" || fail "$zip holds build products"
echo "pgxn_dist: $zip ok ($(wc -l <<<"$list") entries)"
