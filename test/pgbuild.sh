#!/usr/bin/env bash
# Build PostgreSQL majors that Debian 12 does not package (17, 18) from Debian's source packages, for the test matrix.
# Prints one pg_config path per major it has on stdout (progress goes to stderr); exits 1 if any major could not be
# built (the others are still printed).
#
#   bash test/pgbuild.sh 17 18         # build (or reuse) 17 and 18; prints their pg_config paths
#
# Where: PGBUILD_DIR (default /var/cache/counters-pg), one installation per major in PGBUILD_DIR/NN. A build is reused
# while the archive offers the same version (its stamp PGBUILD_DIR/NN/.version), and rebuilt when the version changes;
# without the archive (offline) a cached build is reused as it is.
#
# How: a sources list of its own (deb-src of Debian's trixie and unstable, signed by the machine's Debian archive
# keyring) under PGBUILD_DIR/apt, read through apt-get -o options, so the machine's own apt configuration is left
# alone. The newest postgresql-NN source package is fetched with `apt-get source --download-only` and unpacked
# without Debian's patches (the upstream release tarball, checked against its .dsc), configured as
# docs/postgresql-versions.md says (ICU, libxml, TAP tests, no readline, no documentation), built with make -j2, and
# installed with the isolation tester. pg_cron is built the same way from Debian's pg-cron source package, and
# pgTAP's SQL files are copied from Debian's PostgreSQL 15 package (they do not depend on the server version).
# A build is configured for PGBUILD_DIR/NN (its programs' run path), installed under NN.new (DESTDIR) and moved to NN
# (the old one renamed aside first, then removed), so a server running from a previous build never sees its files
# overwritten. (PostgreSQL is relocatable, so pg_config in the staging directory names the staging directories.)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${PGBUILD_DIR:-/var/cache/counters-pg}
[ $# -gt 0 ] || { echo "usage: $0 MAJOR..." >&2; exit 2; }
log() { echo "pgbuild: $*" >&2; }

bash "$repo/test/setup.sh" dpkg-dev bison flex pkg-config libicu-dev libxml2-dev zlib1g-dev libipc-run-perl \
	debian-archive-keyring debian-keyring gpgv curl >&2
mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/src"
# The Debian archive the machine's own apt configuration uses (PGBUILD_ARCHIVE overrides it).
archive=${PGBUILD_ARCHIVE:-$({
	grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{for (i = 2; i <= NF; i++) print $i}'
	grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
		awk '{for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}'
} | grep -E '/debian/?$' | head -1 || true)}
archive=${archive%/}
[ -n "$archive" ] || { log "no Debian archive in the apt configuration (set PGBUILD_ARCHIVE)"; exit 2; }
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
printf 'deb-src [signed-by=%s] %s %s main\n' "$keyring" "$archive" trixie "$keyring" "$archive" unstable \
	>"$dir/apt/sources.list"
apt=(-o Dir::Etc::SourceList="$dir/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o Dir::State::Lists="$dir/apt/lists" -o Dir::Cache="$dir/apt/cache" -o Debug::NoLocking=1)
online=1
apt-get "${apt[@]}" -qq update >&2 || { online=0; log "the archive cannot be reached: reusing cached builds"; }

# versions SOURCE-PACKAGE: the versions the private lists offer, newest first
versions() {
	apt-cache "${apt[@]}" showsrc "$1" 2>/dev/null | awk '/^Version:/ {print $2}' | sort -Vru
}
newest() { versions "$1" | head -1; }

# older VERSION: the four point releases before it, with its Debian revision (17.12-0+deb13u1: 17.11-0+deb13u1 ...)
older() {
	local major minor rev m
	IFS=. read -r major minor <<<"${1%%-*}"
	rev=${1#*-}
	for ((m = minor - 1; m >= 0 && m >= minor - 4; m--)); do echo "$major.$m-$rev"; done
}

# direct PACKAGE VERSION: download a source package from the pool by name (a version the lists no longer name); its
# .dsc must carry a Debian developer's signature (debian-keyring), and dpkg-source checks the files against it.
direct() {
	local pkg=$1 ver=$2 dsc=${1}_${2}.dsc pool=$archive/pool/main/${1:0:1}/$1 f
	curl -fsS -o "$dsc" "$pool/$dsc" 2>/dev/null || return 1
	gpgv --keyring /usr/share/keyrings/debian-keyring.gpg "$dsc" 2>/dev/null ||
		{ log "$pkg $ver: the signature of $dsc does not verify"; return 1; }
	for f in $(awk '/^Checksums-Sha256:/ {on = 1; next} /^[^ ]/ {on = 0} on {print $3}' "$dsc"); do
		curl -fsS -o "$f" "$pool/$f" || return 1
	done
}

# fetch PACKAGE VERSION: download the source package into a fresh directory and unpack it without Debian's patches
# (the upstream release as Debian took it); prints "VERSION DIRECTORY". The archive's index can name a version its
# pool does not serve yet (a mirror that lags): then the newest of the four point releases before it that it serves.
fetch() {
	local pkg=$1 ver=$2 work v=""
	work=$(mktemp -d "$dir/src/$pkg.XXXXXX")
	if (cd "$work" && apt-get "${apt[@]}" -qq source --download-only "$pkg=$ver" >/dev/null 2>&1); then
		v=$ver
	elif [[ $pkg != postgresql-* ]]; then
		rm -rf "$work"
		log "$pkg $ver: the archive lists it but does not serve its files"
		return 1
	else
		log "$pkg $ver: the archive lists it but does not serve its files; trying the point releases before it"
		find "$work" -mindepth 1 -delete
		for v in $(older "$ver") ""; do
			[ -n "$v" ] || break
			(cd "$work" && direct "$pkg" "$v") && break
			find "$work" -mindepth 1 -delete
		done
		[ -n "$v" ] || { rm -rf "$work"; log "$pkg: none of them is served"; return 1; }
	fi
	(cd "$work" && dpkg-source --skip-patches -x ./*.dsc src >/dev/null 2>&1) ||
		{ rm -rf "$work"; log "$pkg $v: unpacking failed"; return 1; }
	echo "$v $work/src"
}

build() {
	local major=$1 ver src pgc new=$dir/$1.new old=$dir/$1.old
	# (.wanted: the version the index named when it was built; .version: the one built)
	ver=""
	[ $online -eq 0 ] || ver=$(newest "postgresql-$major")
	if [ -x "$dir/$major/bin/pg_config" ] &&
		{ [ -z "$ver" ] || [ "$(cat "$dir/$major/.wanted" 2>/dev/null)" = "$ver" ]; }; then
		log "PostgreSQL $major: cached $(cat "$dir/$major/.version" 2>/dev/null) in $dir/$major"
		echo "$dir/$major/bin/pg_config"
		return
	fi
	[ -n "$ver" ] || { log "PostgreSQL $major: no source package and no cached build"; return 1; }
	local start=$SECONDS got
	got=$(fetch "postgresql-$major" "$ver") || return 1
	src=${got#* }
	log "PostgreSQL $major: building ${got%% *} into $dir/$major (a few minutes)"
	# (configured for its final directory, so that its programs find their libraries there; installed into a
	# staging directory, then moved into place)
	rm -rf "$new" "$old"
	(cd "$src" &&
		./configure -q --prefix="$dir/$major" --with-icu --with-libxml --enable-tap-tests --without-readline &&
		nice -n 5 make -s -j2 &&
		make -s install DESTDIR="$new" &&
		make -s -C src/test/isolation install DESTDIR="$new") >"$dir/src/build-$major.log" 2>&1 ||
		{ tail -30 "$dir/src/build-$major.log" >&2; log "PostgreSQL $major: build failed"; return 1; }
	local inst=$new$dir/$major
	pgc=$inst/bin/pg_config
	cp /usr/share/postgresql/15/extension/pgtap* "$("$pgc" --sharedir)/extension/"
	# pg_cron: the newest version the archive serves that builds
	local cron built=""
	for cron in $(versions pg-cron); do
		if cgot=$(fetch pg-cron "$cron") && csrc=${cgot#* } &&
			(cd "$csrc" && make -s PG_CONFIG="$pgc" && make -s install PG_CONFIG="$pgc") >>"$dir/src/build-$major.log" 2>&1; then
			built=${cgot%% *}
			break
		fi
	done
	if [ -n "$built" ]; then
		log "PostgreSQL $major: pg_cron $built"
	else
		log "PostgreSQL $major: pg_cron not built (see $dir/src/build-$major.log); its tests will skip"
	fi
	printf '%s\n' "$ver" >"$inst/.wanted"
	printf '%s\n' "${got%% *}" >"$inst/.version"
	[ ! -e "$dir/$major" ] || mv "$dir/$major" "$old"
	mv "$inst" "$dir/$major"
	rm -rf "$new" "$old" "$src" "$(dirname "$src")"
	rm -rf "$dir/src"/pg-cron.*
	log "PostgreSQL $major: ${got%% *} built in $((SECONDS - start)) s"
	echo "$dir/$major/bin/pg_config"
}

status=0
for major in "$@"; do build "$major" || { log "PostgreSQL $major: not available"; status=1; }; done
exit $status
