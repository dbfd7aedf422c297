#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# deps.sh - install the Debian 12 packages dpg's build, tests and demo need.
# Usage: scripts/deps.sh [--no-torch]   (root; skips what is already installed)
set -euo pipefail
pkgs=(build-essential autoconf automake libtool pkg-config
      libhwloc-dev hwloc libssl-dev llvm-14 libcmocka-dev valgrind
      slurmctld slurmd slurm-client munge libslurm-dev
      iproute2 procps bc groff man-db debhelper dh-autoreconf clang libclang-rt-14-dev
      openmpi-bin libopenmpi-dev libxxhash-dev)
[ "${1:-}" = --no-torch ] || pkgs+=(python3-torch)
missing=()
for p in "${pkgs[@]}"; do
	grep -q 'install ok installed' <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#pkgs[@]} packages present"
	exit 0
fi
[ "$(id -u)" = 0 ] || { echo "deps: missing ${missing[*]}; run as root to install them" >&2; exit 1; }
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
