#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ckpt_bench.sh - checkpoints at disk speed: dpg_zero_save and dpg_zero_load
# side by side with a raw write+fsync (dd bs=8M conv=fsync) and a raw read of
# the same bytes on the same file system, interleaved in one run, at world 1
# and 2 (CPU backend, loopback); and dpg_zero_save_async's blocking time.
# Reads are cold (the page cache dropped before each) when run as root.
#
# Usage: bench/ckpt_bench.sh [--smoke] [BUILD_DIR] [OUT.md]   (BUILD_DIR: or BUILD=)
#   BUILD_DIR: a configured and built tree (default build/dev; make
#   extra-programs builds bench/ckpt_bench in it)
# Environment: NUMEL=67108864 (fp32 parameters; x 12 bytes with AdamW's
#              master + moments) REPS=3 WORLDS="1 2" DIR=/tmp/dpg-ckpt-bench.$$
set -eu
smoke=""
if [ "${1:-}" = "--smoke" ]; then smoke=--smoke; shift; fi
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
bench_top=$top
bench_name=ckpt_bench.sh
. "$here/lib.sh"
[ -z "${1:-}" ] || BUILD=$1
bench_build
build=$BUILD
out=${2:-$top/bench/results/ckpt.md}
NUMEL=${NUMEL:-67108864}
REPS=${REPS:-3}
WORLDS=${WORLDS:-"1 2"}
DIR=${DIR:-/tmp/dpg-ckpt-bench.$$}
if [ -n "$smoke" ]; then out=${2:-/dev/null}; NUMEL=1048576; REPS=1; fi
mkdir -p -m 0700 "$DIR"
bench_need bin ckpt_bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$DIR"' EXIT
drop=""
[ "$(id -u)" = 0 ] && drop=--drop-caches

BENCH_TIMEOUT=300

{
	echo "# Checkpoints: dpg_zero_save/_load vs raw write+fsync/read of the same bytes"
	echo
	bench_host
	echo
	echo "\`bench/ckpt_bench.sh $smoke\` on $(lscpu | sed -n 's/^Model name: *//p' | head -1)," \
		"$(nproc) cores, $(date -u +%Y-%m-%d), file system of $DIR:" \
		"$(df -T "$(dirname "$DIR")" | awk 'NR == 2 { print $2 " on " $1 }')."
	echo "NUMEL=$NUMEL fp32 parameters (AdamW: master + 2 moments, 12 bytes each, all"
	echo "ranks together), 8 units, stage 1; median of $REPS interleaved rounds of"
	echo "raw write (8 MiB writes + fsync, new file) -> save -> raw read -> load ->"
	echo "save_async + wait, a barrier around each.  Cold reads (page cache dropped"
	echo "before each read): $([ -n "$drop" ] && echo yes || echo "no (not root)").  ratio = raw time / dpg time."
	echo "CPU s: the CPU time of rank 0's process (all threads) during the op, what it costs"
	echo "whatever else the machine runs (a loaded machine stretches the wall time of CPU-bound work)."
	echo "Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "| world | GB | raw write GB/s | save GB/s | save/raw | raw read GB/s | load GB/s | load/raw | save s | async blocking s | async save+wait s | CPU s raw write / save / raw read / load / async save+wait |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
} > "$tmp/md"
for w in $WORLDS; do
	line=$(bench_run_world "$w" "$bin" $drop --numel "$NUMEL" --reps "$REPS" --dir "$DIR/w$w")
	echo "$line"
	echo "$line" | awk '{
		for (i = 1; i < NF; i++) v[$i] = $(i + 1)
		printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s / %s / %s / %s |\n", v["world"],
			v["GB"], v["raw_write_GBps"], v["save_GBps"], v["save_ratio"],
			v["raw_read_GBps"], v["load_GBps"], v["load_ratio"], v["save_s"],
			v["async_block_s"], v["async_total_s"], v["raw_write"], v["save"],
			v["raw_read"], v["load"], v["async"] }' >> "$tmp/md"
done
if [ "$out" != /dev/null ]; then
	cp "$tmp/md" "$out"
	echo "# wrote $out"
fi
cat "$tmp/md"
