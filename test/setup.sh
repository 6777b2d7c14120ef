#!/usr/bin/env bash
# Install what building and testing counters needs on Debian 12 (PostgreSQL 15). Safe to re-run: installs only
# what is missing. Must run as root (or with sudo available).
set -euo pipefail
PGVER=${PGVER:-15}
packages=(build-essential postgresql-$PGVER postgresql-server-dev-$PGVER postgresql-$PGVER-pgtap
          libtap-parser-sourcehandler-pgtap-perl postgresql-common postgresql-client-$PGVER
          postgresql-$PGVER-cron clang-format libipc-run-perl)
packages+=("$@")
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	echo "installing: ${missing[*]}"
	# (another apt-get or unattended-upgrades holding the package lock: wait for it, up to 10 minutes)
	lock=(-o DPkg::Lock::Timeout=600)
	# (the lists lock of apt-get update is not covered by that option on every apt: retried)
	for try in $(seq 60); do
		$SUDO apt-get "${lock[@]}" update -qq && break
		[ "$try" -lt 60 ] || exit 1
		echo "apt-get update failed (the lists may be locked by another apt): trying again in 10 s" >&2
		sleep 10
	done
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
