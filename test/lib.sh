# Shell helpers of the scripts that build the extension, install it and start clusters of their own: test/demo.sh,
# test/matrix.sh and the benchmarks in test/bench (test/run.sh, what CI runs, takes the same steps itself). Sourced,
# never run: it sets no shell options and changes no directory. build_install runs from the top of the tree.

# The PostgreSQL major version whose Debian packages the scripts build for and start clusters of.
PGVER=${PGVER:-15}

# suite_lock: waits until no other run on this machine holds the lock, then holds it (file descriptor 9) until this
# shell exits. The suites and the benchmarks install the extension system-wide: one at a time.
suite_lock() {
	# (a script started by one that holds it -- test/bench/run.sh running the feature benchmarks -- has it already)
	local p=$$
	while [ -n "${COUNTERS_SUITE_LOCKED:-}" ] && [ "$p" -gt 1 ]; do
		[ "$p" = "$COUNTERS_SUITE_LOCKED" ] && return 0
		p=$(awk '{print $4}' "/proc/$p/stat")
	done
	exec 9>/tmp/counters-suite.lock
	flock 9
}

# build_install [make arguments]: installs the Debian packages the tests need (test/setup.sh: only what is missing),
# puts PostgreSQL $PGVER's programs first in PATH, builds the extension (make with the arguments given) and installs
# it into PostgreSQL $PGVER.
build_install() {
	bash test/setup.sh
	export PATH=/usr/lib/postgresql/$PGVER/bin:$PATH
	make -s "$@"
	make -s install >/dev/null
}

# free_port [lowest [count]]: a port among count ports from lowest (default 15000 and 15000) on which nothing
# listens on 127.0.0.1 and for which /var/run/postgresql has no socket (pg_virtualenv's own choice races with
# clusters that other runs start meanwhile).
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((${1:-15000} + RANDOM % ${2:-15000}))
		[ -e "/var/run/postgresql/.s.PGSQL.$p" ] && continue
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
		echo "$p"
		return
	done
	echo "${0##*/}: no free port found" >&2
	return 1
}
