#!/usr/bin/env bash
# Build the Debian package postgresql-15-counters_<version>_<arch>.deb the way Debian builds its postgresql-NN-*
# extension packages (pg_buildext, debian/pgversions, debian/control.in, debhelper compat 13, 3.0 (native)).
#
#   bash test/packaging/build-deb.sh [--worktree] [OUTDIR]
#
# The source is the committed tree (git archive HEAD); with --worktree it is the working tree instead (tracked
# files plus untracked ones that .gitignore does not exclude). It is unpacked in a temporary directory, this
# directory's debian/ is put beside it, and dpkg-buildpackage -us -uc -b runs there. The .deb is copied to OUTDIR
# (default: .build/packages in the repository) and its path printed on the last line of the output.
# Installs its build dependencies through test/setup.sh. Safe to re-run; removes its temporary directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source="head"
if [ "${1:-}" = --worktree ]; then
	source=worktree
	shift
fi
outdir=${1:-$repo/.build/packages}

bash "$repo/test/setup.sh" debhelper postgresql-server-dev-all dpkg-dev fakeroot

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$tmp/counters
mkdir "$src"
if [ "$source" = head ]; then
	git -C "$repo" archive --format=tar HEAD | tar -x -C "$src"
else
	# tracked files (less deleted ones) and untracked ones that .gitignore does not exclude
	(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do if [ -e "$f" ]; then printf '%s\0' "$f"; fi; done |
		tar --null -T - -cf -) | tar -x -C "$src"
fi
version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$src/counters.control")
[ -n "$version" ] || { echo "build-deb: no default_version in counters.control" >&2; exit 1; }
changelog_version=$(dpkg-parsechangelog -l "$here/debian/changelog" -S Version)
if [ "$changelog_version" != "$version" ]; then
	echo "build-deb: test/packaging/debian/changelog is at $changelog_version but counters.control at $version;" \
		"add a changelog entry for $version" >&2
	exit 1
fi
[ ! -e "$src/debian" ] || { echo "build-deb: the source tree already has a debian/ directory" >&2; exit 1; }
cp -r "$here/debian" "$src/debian"
chmod +x "$src/debian/rules"

# Two jobs: the machine has two cores. pg_buildext builds in the tree, once per version in debian/pgversions.
(cd "$src" && dpkg-buildpackage -us -uc -b -j2) > "$tmp/build.log" 2>&1 || {
	tail -n 60 "$tmp/build.log" >&2
	echo "build-deb: dpkg-buildpackage failed (last 60 lines above)" >&2
	exit 1
}
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
deb=postgresql-15-counters_${version}_${arch}.deb
[ -f "$tmp/$deb" ] || { ls -l "$tmp" >&2; echo "build-deb: $deb was not produced" >&2; exit 1; }
mkdir -p "$outdir"
cp "$tmp/$deb" "$outdir/"
echo "$outdir/$deb"
