#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# check_man_synopsis.sh - every function libdpg exports (lib/libdpg.map) is
# in the SYNOPSIS of doc/libdpg.3, and every function there is exported.
# One line per failure (make check).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${DPG_SRCDIR:-$(cd "$here/../.." && pwd)}
map=$src/lib/libdpg.map
man=$src/doc/libdpg.3
fail=0

exported=$(sed -n '/global:/,/local:/p' "$map" | sed 's,/\*.*\*/,,' |
	grep -o '^[[:space:]]*dpg_[a-z0-9_]*;' | tr -d ' \t;' | sort -u)
synopsis=$(sed -n '/^\.SH SYNOPSIS/,/^\.SH DESCRIPTION/p' "$man" |
	grep -o 'dpg_[a-z0-9_]*(' | tr -d '(' | sort -u)
for f in $exported; do
	echo "$synopsis" | grep -qx "$f" || { echo "FAIL: $f is exported but not in libdpg.3's SYNOPSIS"; fail=1; }
done
for f in $synopsis; do
	echo "$exported" | grep -qx "$f" || { echo "FAIL: $f is in libdpg.3's SYNOPSIS but not exported (lib/libdpg.map)"; fail=1; }
done
[ $fail = 0 ] && echo "ok: libdpg.3 SYNOPSIS = the exported functions ($(echo "$exported" | wc -l))"
exit $fail
