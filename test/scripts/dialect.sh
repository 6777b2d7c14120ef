#!/usr/bin/env bash
# The dialect of src/ (CONTRIBUTING.md): C++17 used as C with namespaces. The build enforces no exceptions and no
# RTTI (-fno-exceptions -fno-rtti); this checks the rest: no C++ standard library (no <...> includes, no std::), no
# new/delete, no malloc/free (memory comes from palloc and memory contexts), no PostgreSQL version test outside
# src/compat.hpp, and clang-format's layout.
set -euo pipefail
cd "$(dirname "$0")/../.."
fail=0
# The code with comments and string literals blanked out, so that prose ("a new row") is not taken for code.
code() {
	perl -0777 -pe 's{/\*.*?\*/}{" " x length($&)}gse; s{//[^\n]*}{}g; s{"(?:\\.|[^"\\\n])*"}{""}g; s{'"'"'(?:\\.|[^'"'"'\\\n])*'"'"'}{'"''"'}g' "$1"
}
# report FILE WHAT PATTERN: the lines of FILE's code that match PATTERN, under "dialect: FILE WHAT".
report() {
	local hits
	hits=$(code "$1" | grep -nE "$3" || true)
	if [ -n "$hits" ]; then
		echo "dialect: $1$2:"
		echo "$hits" | sed 's/^/    /'
		fail=1
	fi
}
for f in src/*.cpp src/*.hpp src/*/*.cpp src/*/*.hpp; do
	report "$f" "" '#include[[:space:]]*<|\bstd::|\bnew[[:space:]]+[A-Za-z_(]|\bdelete([[:space:]]+|[[:space:]]*\[\][[:space:]]*)[A-Za-z_(]|\b(malloc|calloc|realloc|free)[[:space:]]*\(|\b(throw|try|catch|dynamic_cast|typeid)\b'
	# Differences between PostgreSQL versions live in src/compat.hpp alone.
	[ "$f" = src/compat.hpp ] ||
		report "$f" " tests the PostgreSQL version (put the difference in src/compat.hpp)" '\bPG_(VERSION_NUM|MAJORVERSION(_NUM)?)\b'
done
if command -v clang-format >/dev/null; then
	for f in src/*.cpp src/*.hpp src/*/*.cpp src/*/*.hpp; do
		if ! clang-format --dry-run --Werror "$f" 2>/dev/null; then
			echo "dialect: $f is not clang-formatted (clang-format -i $f)"
			fail=1
		fi
	done
else
	echo "dialect: clang-format is not installed (test/setup.sh installs it)"
	fail=1
fi
# A function declared in a header and defined nowhere (or only inline) links: PostgreSQL's symbols resolve only when
# the library is loaded, so the linker cannot tell. The built library must need no symbol of its own.
if [ -f counters.so ] && command -v nm >/dev/null; then
	missing=$(nm -C --undefined-only counters.so | grep -E ' counters::' || true)
	if [ -n "$missing" ]; then
		echo "dialect: counters.so needs symbols nothing defines (CREATE EXTENSION would fail):"
		echo "$missing" | sed 's/^/    /'
		fail=1
	fi
fi
[ $fail -eq 0 ] && echo "dialect: ok"
exit $fail
