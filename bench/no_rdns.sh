#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# no_rdns.sh - run a command whose reverse DNS lookups of the loopback
# addresses the benches use (127.0.0.1-8) are answered from a file, not DNS.
#
#   bench/no_rdns.sh CMD [ARG...]      bench/no_rdns.sh --check
#
# PyTorch's TCPStore looks up the peer's name (getnameinfo of the IPv4-mapped
# IPv6 address, which /etc/hosts' IPv4 lines do not answer) on every connect
# and accept.  Where the resolver drops a query, glibc retries after 5 s, in
# the TCPStore server's one thread too: the bench would time DNS, not the
# store.  As root, CMD runs in a private mount namespace (unshare -m) whose
# /etc/hosts is this machine's plus 127.0.0.1-8 in both forms; nothing
# outside it changes.  Otherwise (not root, or unshare fails) CMD runs as is
# and a line on stderr says so.  --check: exit 0 when the namespace works.
set -u
hosts=$(mktemp "${TMPDIR:-/tmp}/no_rdns.XXXXXX") || exit 2
trap 'rm -f "$hosts"' EXIT
{
	cat /etc/hosts
	for i in 1 2 3 4 5 6 7 8; do
		echo "127.0.0.$i bench-lo$i"
		echo "::ffff:127.0.0.$i bench-lo$i"
	done
} >"$hosts"
works() { [ "$(id -u)" = 0 ] && unshare -m sh -c 'mount --bind "$0" /etc/hosts' "$hosts" 2>/dev/null; }
if [ "${1:-}" = --check ]; then
	works
	exit $?
fi
if works; then
	unshare -m sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$hosts" "$@"
	exit $?
fi
echo "no_rdns.sh: not root or unshare -m failed: reverse lookups go to the resolver" >&2
"$@"
