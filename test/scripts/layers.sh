#!/usr/bin/env bash
# layers.sh: the include graph of src/ is layered (CONTRIBUTING.md, "Source map"). Every file may include
# counters.hpp and compat.hpp (compat.hpp itself includes only counters.hpp, counters.hpp nothing of src/); beyond
# them, a file includes only what its plane may:
#   model/     model/ headers: the model includes no other plane (it asks Citus through its IntegrationHooks);
#   write/     model/ and write/ headers, and citus/citus.hpp -- never control/;
#   control/   model/, write/, citus/ and control/ headers;
#   citus/     model/ and citus/ headers;
#   the C boundary (functions.hpp, functions.cpp, functions_legacy.cpp): functions.hpp, control/control.hpp and
#              citus/citus.hpp;
#   worker.cpp control/control.hpp;
#   stats.cpp  nothing more.
# A header of src/ is named from src/ (the Makefile's -I), as "write/write.hpp"; the headers of PostgreSQL are the
# other includes, ".h" files found outside src/. An include of src/ that a file may not make fails the check, naming
# the file, the line and the include; so does a file of src/ that no rule above covers (a new plane gets its rule
# here and in CONTRIBUTING.md), and a ".hpp" include that names no header of src/.
#
# It proves itself first: a seeded write/ file that includes control/control.hpp, and a model/ file that includes
# citus/citus.hpp, must be reported, and nothing else of the fixture.
#
# Usage: test/scripts/layers.sh   (exit status 1 when an include crosses a layer)
set -euo pipefail
cd "$(dirname "$0")/../.."

# The headers (named from src/, as extended regular expressions) that file `$1` (named from src/) may include besides
# counters.hpp and compat.hpp; no output and status 1 when no rule covers it.
may_include() {
	case $1 in
	counters.hpp) echo '' ;;
	compat.hpp) echo '' ;;
	model/*) echo 'model/[^/]*' ;;
	write/*) echo 'model/[^/]*|write/[^/]*|citus/citus\.hpp' ;;
	control/*) echo 'model/[^/]*|write/[^/]*|citus/[^/]*|control/[^/]*' ;;
	citus/*) echo 'model/[^/]*|citus/[^/]*' ;;
	functions.hpp | functions.cpp | functions_legacy.cpp) echo 'functions\.hpp|control/control\.hpp|citus/citus\.hpp' ;;
	worker.cpp) echo 'control/control\.hpp' ;;
	stats.cpp) echo '' ;;
	*) return 1 ;;
	esac
}

# check SRC: every include of the files of directory SRC (laid out as src/) against the rules; prints what crosses a
# layer, and fails if anything does.
check() {
	local src=$1 bad=0 path file rule line inc base allowed
	for path in "$src"/*.cpp "$src"/*.hpp "$src"/*/*.cpp "$src"/*/*.hpp; do
		[ -e "$path" ] || continue
		file=${path#"$src"/}
		if ! rule=$(may_include "$file"); then
			echo "layers: src/$file: no rule says what it may include (add one to test/scripts/layers.sh and" \
				"CONTRIBUTING.md)"
			bad=1
			continue
		fi
		# counters.hpp is the base every file stands on: it includes nothing of src/; compat.hpp only counters.hpp.
		case $file in
		counters.hpp) base='' ;;
		compat.hpp) base='counters\.hpp' ;;
		*) base='counters\.hpp|compat\.hpp' ;;
		esac
		allowed=$base${rule:+${base:+|}$rule}
		while IFS=: read -r line inc; do
			# (a header of PostgreSQL's: not a file of src/, not one of this code base's .hpp)
			[ -f "$src/$inc" ] || [[ $inc == *.hpp ]] || continue
			if [ ! -f "$src/$inc" ]; then
				echo "layers: src/$file:$line: includes \"$inc\", which names no header of src/ (name headers from src/)"
				bad=1
			elif [ -z "$allowed" ] || ! [[ $inc =~ ^($allowed)$ ]]; then
				echo "layers: src/$file:$line: includes \"$inc\", which its layer may not include"
				bad=1
			fi
		done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$path" |
			sed 's/^\([0-9]*\):[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1:\2/')
	done
	return $bad
}

# The check must be able to fail: a fixture laid out as src/, with a write/ file that includes control/control.hpp
# and a model/ file that includes citus/citus.hpp (each beside includes it may make), reports those two and nothing
# else.
fixture=$(mktemp -d)
trap 'rm -rf "$fixture"' EXIT
mkdir -p "$fixture/model" "$fixture/write" "$fixture/control" "$fixture/citus"
: >"$fixture/counters.hpp"
echo '#include "counters.hpp"' >"$fixture/compat.hpp"
echo '#include "counters.hpp"' >"$fixture/model/model.hpp"
echo '#include "model/model.hpp"' >"$fixture/write/write.hpp"
printf '#include "model/model.hpp"\n#include "write/write.hpp"\n' >"$fixture/control/control.hpp"
echo '#include "counters.hpp"' >"$fixture/citus/citus.hpp"
cat >"$fixture/write/seeded.cpp" <<'EOF'
#include "write/write.hpp"
#include "citus/citus.hpp"
#include "control/control.hpp"
#include "compat.hpp"

extern "C" {
#include "utils/builtins.h"
}
EOF
cat >"$fixture/model/seeded.cpp" <<'EOF'
#include "model/model.hpp"
#include "citus/citus.hpp"
EOF
expected='layers: src/model/seeded.cpp:2: includes "citus/citus.hpp", which its layer may not include
layers: src/write/seeded.cpp:3: includes "control/control.hpp", which its layer may not include'
if out=$(check "$fixture"); then
	echo "layers.sh: the check did not report a seeded include across a layer" >&2
	exit 1
fi
if [ "$out" != "$expected" ]; then
	echo "layers.sh: the check reported the seeded fixture wrongly:" >&2
	printf '%s\n' "$out" >&2
	exit 1
fi

if ! check src; then
	echo "layers.sh: an include crosses a layer of src/ (see the header of test/scripts/layers.sh)" >&2
	exit 1
fi
echo "layers.sh: every include of src/ is one its layer may make"
