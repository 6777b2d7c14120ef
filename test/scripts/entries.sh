#!/usr/bin/env bash
# entries.sh: the static check of "one way to run a counter's code" (docs/security.md#one-way-in).
#
# Every function in src/ that reaches SQL, the executor, the parser or a function call through fmgr -- where a
# counter's code (a definition's expressions, a key type's cast, a callback, a trigger on a counter table) can run --
# must do so as the counter's owner, in a security-restricted operation:
#   - inside an entry: between EnterOwner and LeaveOwner, between BeginChange and EndChange, or through RunAsOwner;
#   - or after RequireOwnerScope(owner), which fails at run time unless its caller entered the owner's scope;
#   - or with fixed SQL: a string literal (reviewed text reading or writing the extension's catalogs, whose names are
#     all qualified);
#   - or listed in test/scripts/entries.allow, with the reason the function runs no code of a counter's owner.
# A call anywhere else fails the check, naming the file, line, function and call. An entry of entries.allow that no
# longer matches a function needing it fails too, so that the list stays what the code needs.
#
# Authorize, then act (docs/security.md#one-way-in-checked). A scope is entered only with an authorization:
#   - every EnterOwner() passes, as the role to run as, an Authorization -- made by one of security.cpp's Authorize
#     functions (their call, or a variable or field named auth) -- never a role's OID; the compiler checks the type,
#     this check the habit, so that a new call path reads as authorized (or fails here);
#   - only security.cpp changes the user id (SetUserIdAndSecContext, SetUserIdAndContext, SetSessionUserId), and only
#     it makes an Authorization.
#
# The check is lexical (the code base's format: a function's name at the start of a line, its body between a "{" and
# a "}" at the start of lines; clang-format keeps it so). It proves itself first: a seeded bypass must be reported.
#
# Usage: test/scripts/entries.sh [files...]   (default: src/*.cpp src/*/*.cpp; exit status 1 when a call is not allowed)
set -euo pipefail
cd "$(dirname "$0")/../.."

check() {
	perl -e '
use strict;
use warnings;
my ($allow_file, @files) = @ARGV;
# SQL, the executor, parse analysis, calls through fmgr; and the SQL executors of this code base that take any SQL.
# (Execute() is not one: it refuses, at run time, anything but statements that run no code outside an owner s scope.)
my $primitive = qr/\b(SPI_execute\w*|SPI_prepare\w*|SPI_cursor_open\w*|FunctionCallInvoke|FunctionCall\d+Coll|
	OidFunctionCall\d+Coll|OidFunctionCall\d+|OutputFunctionCall|OidOutputFunctionCall|InputFunctionCall|
	OidInputFunctionCall|ExecEvalExpr\w*|ExecQual|ExecProject|ExecInsertIndexTuples|ExecComputeStoredGenerated|
	ExecutorStart|parse_analyze\w*|
	pg_analyze_and_rewrite\w*|pg_plan_query|expression_planner|eval_const_expressions|QueryLatest|QueryValue|
	QueryRow)\s*\(/x;
# (what an authorization looks like where a scope is entered: the result of an Authorize function, or a name for one)
my $authorization = qr/^\s*(?:(?:\w+::)*Authoriz\w*\s*\(|(?:\w+(?:->|\.))*\w*auth\w*\s*,)/x;
my %allow;
open my $a, "<", $allow_file or die "$allow_file: $!\n";
while (<$a>) {
	next if /^\s*(#|$)/;
	/^(\S+):(\S+)\s+\S/ or die "$allow_file:$.: expected \"file:function reason\"\n";
	$allow{"$1:$2"} = 0;
}
my $bad = 0;
for my $file (@files) {
	open my $fh, "<", $file or die "$file: $!\n";
	my @lines = <$fh>;
	close $fh;
	my ($name, $in, $asserted, @scopes) = ("", 0, 0);
	my $short = $file =~ s{.*/}{}r;
	for (my $i = 0; $i < @lines; $i++) {
		my $line = $lines[$i];
		if (!$in) {
			if ($line =~ /^COUNTERS_FUNCTION\((\w+)\)/) { $name = $1; }
			elsif ($line =~ /^(?:extern "C" \S+ )?([A-Za-z_][\w:~]*)\(/) { $name = $1; }
			elsif ($line =~ /^\{/) { ($in, $asserted, @scopes) = (1, 0); }
			next;
		}
		if ($line =~ /^\}/) { $in = 0; next; }
		my $code = $line =~ s{//.*}{}r;
		next if $code =~ m{^\s*(/\*|\*)};
		# An entry or a leave counts until the block it is written in closes (the lines indented less).
		my ($tabs) = $code =~ /^(\t*)/;
		my $indent = length $tabs;
		@scopes = grep { $_->[0] <= $indent } @scopes if $code =~ /\S/;
		push @scopes, [$indent, 1] while $code =~ /\b(EnterOwner|BeginChange)\s*\(/g;
		push @scopes, [$indent, -1] while $code =~ /\b(LeaveOwner|EndChange)\s*\(/g;
		$asserted = 1 if $code =~ /\b(RequireOwnerScope|RequireRestricted)\s*\(/;
		# a scope entered with something else than an authorization (its second argument, maybe on the next line)
		while ($code =~ /\bEnterOwner\s*\(\s*[^,]*,/g) {
			my $arg = substr($code, pos($code));
			$arg .= $lines[$i + 1] // "" if $arg !~ /\S/;
			next if $arg =~ $authorization;
			printf "%s:%d: %s() enters an owner\x27s scope without an authorization\n", $file, $i + 1, $name;
			$bad = 1;
		}
		# the user id changed, or an authorization made, outside security.cpp
		if ($short ne "security.cpp" && $code =~ /\b(SetUserIdAndSecContext|SetUserIdAndContext|SetSessionUserId)\s*\(|
			\breturn\s+Authorization\s*\(|\bAuthorization\s*\{/x) {
			printf "%s:%d: %s() changes the user id or makes an authorization: only security.cpp may\n", $file, $i + 1,
			    $name;
			$bad = 1;
		}
		my $depth = 0;
		$depth += $_->[1] for @scopes;
		while ($code =~ /$primitive/g) {
			my $call = $1;
			# fixed SQL: a string literal as the statement (after a memory context argument), maybe on the next line
			my $rest = substr($code, pos($code)) =~ s/^\s*\w+\s*,//r;
			$rest .= $lines[$i + 1] // "" if $rest !~ /\S/;
			next if $rest =~ /^\s*"/;
			next if $depth > 0 || $asserted;
			if (exists $allow{"$short:$name"}) { $allow{"$short:$name"}++; next; }
			printf "%s:%d: %s() calls %s() outside a counter owner\x27s scope\n", $file, $i + 1, $name, $call;
			$bad = 1;
		}
	}
}
for my $k (sort keys %allow) {
	next if $allow{$k};
	print "$allow_file: $k needs no exemption (no call outside a scope there): remove it\n";
	$bad = 1;
}
exit $bad;
' "$@"
}

# The check must be able to fail: a function that runs built SQL outside any scope is reported.
fixture=$(mktemp -d)
trap 'rm -rf "$fixture"' EXIT
cat >"$fixture/seeded.cpp" <<'EOF'
void
Seeded(const char *sql)
{
	(void)SPI_execute(sql, false, 0);
}

void
Scoped(const char *sql, Oid owner)
{
	OwnerScope s;
	EnterOwner(&s, AuthorizeMaintainer(e), 0);
	(void)SPI_execute(sql, false, 0);
	LeaveOwner(&s);
	(void)SPI_execute("SELECT 1", true, 0);
}
EOF
# ... and a scope entered as a role nobody authorized, and the user id changed by hand: both reported.
cat >"$fixture/unauthorized.cpp" <<'EOF'
void
AsTheTableOwner(Oid rel)
{
	OwnerScope s;
	EnterOwner(&s, RelationOwner(rel), 0);
	LeaveOwner(&s);
}

void
ByHand(Oid role)
{
	SetUserIdAndSecContext(role, SECURITY_RESTRICTED_OPERATION);
}
EOF
: >"$fixture/empty.allow"
if out=$(check "$fixture/empty.allow" "$fixture/seeded.cpp"); then
	echo "entries.sh: the check did not report a seeded bypass" >&2
	exit 1
fi
if [ "$(printf '%s\n' "$out" | grep -c .)" != 1 ] || ! grep -q "Seeded() calls SPI_execute()" <<<"$out"; then
	echo "entries.sh: the check reported the seeded file wrongly:" >&2
	printf '%s\n' "$out" >&2
	exit 1
fi
if out=$(check "$fixture/empty.allow" "$fixture/unauthorized.cpp"); then
	echo "entries.sh: the check did not report a scope entered without an authorization" >&2
	exit 1
fi
if [ "$(printf '%s\n' "$out" | grep -c .)" != 2 ] ||
	! grep -q "AsTheTableOwner() enters an owner's scope without an authorization" <<<"$out" ||
	! grep -q "ByHand() changes the user id" <<<"$out"; then
	echo "entries.sh: the check reported the unauthorized fixture wrongly:" >&2
	printf '%s\n' "$out" >&2
	exit 1
fi

if [ $# -eq 0 ]; then
	set -- src/*.cpp src/*/*.cpp
fi
if ! check test/scripts/entries.allow "$@"; then
	echo "entries.sh: code that can run a counter's code must run it as the counter's owner (see the header)" >&2
	exit 1
fi
echo "entries.sh: every call that can run a counter's code is in its owner's scope, fixed SQL, or allowed; every" \
	"scope is entered with an authorization"
