#!/usr/bin/env bash
# Packaging: the PGXN metadata and release archive, and the Debian package postgresql-15-counters.
#  1. META.json is valid JSON; its version and provides.counters.version are counters.control's default_version
#     (as SemVer: 0.2 -> 0.2.0); test/packaging/debian/changelog is at that version too.
#  2. `make dist` writes counters-<version>.zip holding exactly the files of HEAD under counters-<version>/, so no
#     build products and nothing untracked.
#  3. test/packaging/build-deb.sh builds postgresql-15-counters_<version>_<arch>.deb from HEAD (pg_buildext,
#     dpkg-buildpackage); its control fields, and its file list: counters.so in the PostgreSQL 15 libdir, the control
#     file, counters--<version>.sql (built from src/sql/counters.sql) and every src/sql/counters--*.sql and .control of HEAD under /usr/share/postgresql/15/extension, nothing else but docs.
#  4. dpkg -i installs it (dpkg -V: the files on disk are the package's), and in a private pg_virtualenv cluster
#     CREATE EXTENSION gives the default version and a counter equals a recount after inserts, an update and a delete.
# The installed extension files are system-wide and the rest of the suite uses the make-installed ones: they are
# backed up first, and on exit (also on failure) the package is removed with dpkg -r and the backup put back; the
# script then checks that every counters file is byte-for-byte what it was (make -s install if nothing was
# installed before). Refuses to run if postgresql-15-counters is already installed. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
PGVER=15
pkg=postgresql-$PGVER-counters
fail() { echo "package: FAILED: $*"; exit 1; }
# The package is built for and installed into Debian's own PostgreSQL $PGVER; under any other installation first on
# PATH (test/matrix.sh runs the suites against source builds too) this test is skipped (exit 77).
if [ "$(pg_config --bindir 2>/dev/null)" != "/usr/lib/postgresql/$PGVER/bin" ]; then
	echo "package: skip: the Debian package is for Debian's PostgreSQL $PGVER, not $(pg_config --bindir 2>/dev/null)"
	exit 77
fi
started=$SECONDS

# --- 1. versions
control=$(sed -n "s/^default_version = '\(.*\)'/\1/p" counters.control)
[ -n "$control" ] || fail "no default_version in counters.control"
semver=$control
while [ "$(tr -cd . <<<"$semver" | wc -c)" -lt 2 ]; do semver=$semver.0; done
meta=$(perl -MJSON::PP -e '
	local $/; open my $f, "<", "META.json" or die "META.json: $!\n"; my $m = decode_json(<$f>);
	for my $k (qw(name abstract version maintainer license provides meta-spec)) { die "no \"$k\"\n" unless exists $m->{$k} }
	print join(" ", $m->{name}, $m->{version}, $m->{provides}{counters}{version} // "none", $m->{"meta-spec"}{version})' 2>&1) ||
	fail "META.json is not valid PGXN metadata: $meta"
read -r name version provides_version spec <<<"$meta"
[ "$name" = counters ] || fail "META.json name is $name"
[ "$version" = "$semver" ] || fail "META.json version $version, counters.control default_version $control (expected $semver)"
[ "$provides_version" = "$semver" ] || fail "META.json provides.counters.version $provides_version, expected $semver"
[ "$spec" = 1.0.0 ] || fail "META.json meta-spec version $spec"
changelog=$(dpkg-parsechangelog -l test/packaging/debian/changelog -S Version 2>/dev/null || echo none)
[ "$changelog" = "$control" ] || fail "test/packaging/debian/changelog is at $changelog, counters.control at $control"
echo "package: META.json $version, debian/changelog $changelog, counters.control $control"

tmp=$(mktemp -d)
backup=$tmp/backup
mkdir -p "$backup"
installed_by_us=
libdir=/usr/lib/postgresql/$PGVER/lib
extdir=/usr/share/postgresql/$PGVER/extension
manifest() { # sha256 and mode of every installed counters file
	find "$libdir" "$extdir" -maxdepth 1 \( -name 'counters.so' -o -name 'counters.control' -o -name 'counters--*.sql' -o -name 'counters--*.control' \) \
		-printf '%p %m ' -exec sha256sum {} \; 2>/dev/null | awk '{print $1, $2, $3}' | sort
}
restore() {
	local rc=$? ok=1
	if [ -n "$installed_by_us" ]; then
		dpkg -r "$pkg" >/dev/null 2>&1 || { echo "package: dpkg -r $pkg failed"; ok=0; }
		if [ -n "$(find "$backup" -type f)" ]; then
			# (written aside, then renamed: a running server may have counters.so loaded)
			for f in "$backup"/lib/* "$backup"/ext/*; do
				[ -f "$f" ] || continue
				dir=$libdir
				case $f in "$backup"/ext/*) dir=$extdir ;; esac
				cp -p "$f" "$dir/.$(basename "$f").restoring" && mv -f "$dir/.$(basename "$f").restoring" "$dir/$(basename "$f")"
			done
			if [ "$(manifest)" != "$(cat "$tmp/manifest.before")" ]; then
				echo "package: the installed counters files differ from before the test:"
				diff <(cat "$tmp/manifest.before") <(manifest) || true
				ok=0
			fi
		else # nothing was installed before: install from the repository, as test/run.sh does
			make -s install >/dev/null || ok=0
		fi
		[ $ok = 1 ] && echo "package: $pkg removed, installed extension files restored"
	fi
	[ -n "${zip_aside:-}" ] && mv -f "$zip_aside" "$repo/$zip"
	rm -rf "$tmp"
	[ $ok = 1 ] || { echo "package: FAILED: could not restore the installed extension"; exit 1; }
	exit $rc
}
trap restore EXIT

# --- 2. make dist
if git rev-parse --verify -q HEAD >/dev/null; then
	bash test/setup.sh unzip >/dev/null
	zip=counters-$version.zip
	if [ -e "$zip" ]; then zip_aside=$tmp/$zip.aside; mv "$zip" "$zip_aside"; fi
	make -s dist >/dev/null 2>&1 || fail "make dist failed"
	[ -f "$zip" ] || fail "make dist did not write $zip"
	mv "$zip" "$tmp/$zip"
	unzip -Z1 "$tmp/$zip" | grep -v '/$' | sort > "$tmp/zip.list"
	git ls-tree -r --name-only HEAD | sed "s|^|counters-$version/|" | sort > "$tmp/head.list"
	diff -u "$tmp/head.list" "$tmp/zip.list" >&2 || fail "$zip is not exactly HEAD's files under counters-$version/"
	! grep -qE '\.(o|so|bc|deb|zip)$|/results/|regression\.(diffs|out)$' "$tmp/zip.list" || fail "$zip holds build products"
	for f in Makefile counters.control META.json src/functions.cpp src/sql/counters.sql; do
		grep -qx "counters-$version/$f" "$tmp/zip.list" || fail "$zip lacks $f"
	done
	echo "package: $zip holds HEAD's $(wc -l <"$tmp/zip.list") files"
else
	echo "package: not a git checkout with a commit; make dist and the .deb (built from HEAD) skipped"
	exit 0
fi

# --- 3. build the .deb
deb=$(bash test/packaging/build-deb.sh "$tmp/out" | tail -n 1) || fail "building the .deb failed"
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
[ "$(basename "$deb")" = "${pkg}_${control}_${arch}.deb" ] || fail "unexpected package file $deb"
for field in Package:$pkg Version:$control Architecture:$arch; do
	[ "$(dpkg-deb -f "$deb" "${field%%:*}")" = "${field#*:}" ] || fail "$deb: ${field%%:*} is $(dpkg-deb -f "$deb" "${field%%:*}")"
done
dpkg-deb -f "$deb" Depends | grep -qE "(^|, )postgresql-$PGVER( |,|$)" || fail "$deb does not depend on postgresql-$PGVER"
dpkg-deb -c "$deb" > "$tmp/deb.contents" || fail "dpkg-deb -c $deb failed"
awk '$1 !~ /^d/ {print $6}' "$tmp/deb.contents" | sed 's|^\./|/|' | grep -v "^/usr/share/doc/$pkg/" | sort > "$tmp/deb.list"
{
	echo "$libdir/counters.so"
	echo "$extdir/counters.control"
	git ls-tree --name-only HEAD src/sql/ | grep -E '^src/sql/counters--.*\.(sql|control)$' | sed "s|^src/sql/|$extdir/|"
	echo "$extdir/counters--$control.sql"
} | sort > "$tmp/want.list"
diff -u "$tmp/want.list" "$tmp/deb.list" >&2 || fail "$deb file list differs from the expected one (above)"
grep -q "/usr/share/doc/$pkg/copyright$" "$tmp/deb.contents" || fail "$deb has no copyright file"
# the documentation a DBA reads (the upgrade notes are in the CHANGELOG), and a description of this major only
for doc in README.md CHANGELOG.md $(git ls-tree --name-only HEAD docs/ | grep '\.md$'); do
	grep -qE "/usr/share/doc/$pkg/$doc(\.gz)?$" "$tmp/deb.contents" || fail "$deb does not ship $doc"
done
description=$(dpkg-deb -f "$deb" Description)
grep -q "PostgreSQL $PGVER\b" <<<"$description" || fail "$deb: its description does not name PostgreSQL $PGVER"
if grep -oE "PostgreSQL [0-9]+" <<<"$description" | grep -qv "PostgreSQL $PGVER$"; then
	fail "$deb: its description names another major than $PGVER"
fi
mkdir "$tmp/x" && dpkg-deb -x "$deb" "$tmp/x"
# (nm's output to a file first: grep -q quitting early would make nm fail with SIGPIPE under pipefail)
nm -D --defined-only "$tmp/x$libdir/counters.so" > "$tmp/symbols"
grep -q ' Pg_magic_func$' "$tmp/symbols" || fail "counters.so in $deb has no Pg_magic_func"
cmp -s "$tmp/x$extdir/counters.control" <(git show HEAD:counters.control) || fail "counters.control in $deb is not HEAD's"
echo "package: built $(basename "$deb") ($(wc -l <"$tmp/want.list") files + docs) in $((SECONDS - started)) s"

# --- 4. install, smoke test, restore
if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
	fail "$pkg is already installed on this machine; remove it (dpkg -r $pkg) and re-run"
fi
manifest > "$tmp/manifest.before"
mkdir -p "$backup/lib" "$backup/ext"
[ -e "$libdir/counters.so" ] && cp -p "$libdir/counters.so" "$backup/lib/"
find "$extdir" -maxdepth 1 \( -name 'counters.control' -o -name 'counters--*.sql' -o -name 'counters--*.control' \) -exec cp -p {} "$backup/ext/" \;
installed_by_us=1
dpkg -i "$deb" > "$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i $deb failed"; }
dpkg -V "$pkg" || fail "dpkg -V: the installed files are not the package's"
[ "$(dpkg -S "$libdir/counters.so" 2>/dev/null | cut -d: -f1)" = "$pkg" ] || fail "$libdir/counters.so is not owned by $pkg"

cat > "$tmp/smoke.sh" <<'SMOKE'
set -euo pipefail
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -c 'CREATE EXTENSION counters'
v=$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'counters'")
[ "$v" = "$1" ] || { echo "extension version $v, expected $1"; exit 1; }
q -c 'CREATE TABLE posts (id serial PRIMARY KEY, blog_id int NOT NULL, rating int NOT NULL, is_deleted bool NOT NULL DEFAULT false)' \
  -c "SELECT counters.create_counter('blog_posts', 'SELECT blog_id, count(*) AS posts, sum(rating) AS rating_sum FROM posts WHERE NOT is_deleted GROUP BY blog_id')" >/dev/null
q -c 'INSERT INTO posts (blog_id, rating) SELECT 1 + g % 7, g % 5 FROM generate_series(1, 500) g' \
  -c 'INSERT INTO posts (blog_id, rating) VALUES (3, 4)' \
  -c 'UPDATE posts SET is_deleted = true WHERE id % 9 = 0' \
  -c 'DELETE FROM posts WHERE id % 11 = 0'
rows=$(q -c 'SELECT count(*) FROM blog_posts WHERE posts > 0')
[ "$rows" -gt 0 ] || { echo "the counter table is empty"; exit 1; }
diff=$(q -c 'SELECT count(*) FROM ((SELECT blog_id, count(*), sum(rating) FROM posts WHERE NOT is_deleted GROUP BY 1
                                    EXCEPT SELECT blog_id, posts, rating_sum FROM blog_posts WHERE posts <> 0)
                                   UNION ALL (SELECT blog_id, posts, rating_sum FROM blog_posts WHERE posts <> 0
                                    EXCEPT SELECT blog_id, count(*), sum(rating) FROM posts WHERE NOT is_deleted GROUP BY 1)) d')
[ "$diff" = 0 ] || { echo "$diff counter rows differ from a recount"; exit 1; }
wrong=$(q -c 'SELECT count(*) FROM counters.verify()')
[ "$wrong" = 0 ] || { echo "counters.verify() reports $wrong wrong values"; exit 1; }
echo "smoke test: CREATE EXTENSION counters $v; $rows counter rows equal a recount"
SMOKE
chmod 755 "$tmp" "$tmp/smoke.sh"
(unset PGHOST PGPORT PGUSER PGPASSWORD PGDATABASE; pg_virtualenv -t -v "$PGVER" bash "$tmp/smoke.sh" "$control") > "$tmp/smoke.log" 2>&1 ||
	{ cat "$tmp/smoke.log"; fail "smoke test of the installed package failed"; }
grep '^smoke test:' "$tmp/smoke.log" | sed 's/^/package: /'
echo "package: ok in $((SECONDS - started)) s"
