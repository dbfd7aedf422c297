#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# check_cloexec.sh - every descriptor the plugin's code opens inside
# slurmstepd (plugin/, lib/launch/, lib/common/) is close-on-exec: each
# open/openat/socket/accept4/fopen/pipe2/dup3 call names O_CLOEXEC,
# SOCK_CLOEXEC or an "e" fopen mode, and pipe/accept/dup/dup2/opendir (no
# such flag) are not used.  One line per failure (make check).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${DPG_SRCDIR:-$(cd "$here/../.." && pwd)}
fail=0

for f in "$src"/plugin/*.c "$src"/lib/launch/*.c "$src"/lib/common/*.c; do
	# one statement per record: from a call to the next ';'
	awk -v file="${f#"$src"/}" '
	function check(stmt, line) {
		if (stmt ~ /(^|[^_a-z0-9.>])(pipe|accept|dup|dup2|opendir)[ \t]*\(/) {
			printf "FAIL: %s:%d: %s has no close-on-exec form (use pipe2/accept4/dup3/open+fdopendir with O_CLOEXEC)\n", file, line, stmt; bad = 1
		} else if (stmt ~ /(^|[^_a-z0-9.>])fopen[ \t]*\(/ && stmt !~ /fopen[ \t]*\([^,]*,[ \t]*"[a-z+]*e[a-z+]*"/) {
			printf "FAIL: %s:%d: fopen without the \"e\" mode: %s\n", file, line, stmt; bad = 1
		} else if (stmt ~ /(^|[^_a-z0-9.>])(open|openat|socket|accept4|pipe2|dup3)[ \t]*\(/ && stmt !~ /CLOEXEC/) {
			printf "FAIL: %s:%d: no O_CLOEXEC/SOCK_CLOEXEC: %s\n", file, line, stmt; bad = 1
		}
	}
	/^[ \t]*(\/?\*|\/\/)/ { next }	# comment lines
	{
		if (stmt == "") start = NR
		stmt = stmt " " $0
		if ($0 ~ /;|\{[ \t]*$/) { check(stmt, start); stmt = "" }
	}
	END { exit bad }' "$f" || fail=1
done
[ $fail = 0 ] && echo "ok: close-on-exec (plugin, lib/launch, lib/common)"
exit $fail
