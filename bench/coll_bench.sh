#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# coll_bench.sh - libdpg's CPU collectives side by side with Open MPI on this
# machine: allreduce, reduce_scatter, allgather and bcast bus bandwidth
# (nccl-tests formulas) for 4 KiB .. 64 MiB, over shared memory and over
# TCP loopback, for each rank count; the runs are interleaved (dpg, then
# Open MPI, per configuration, RUNS times) and the table reports the median
# over runs of each run's median, with dpg/OpenMPI ratios.
#
# Usage: bench/coll_bench.sh [OUTDIR]
# Environment:
#   RANKS="2 4"            rank counts
#   TRANSPORTS="shm tcp"   shm: dpg shared memory vs Open MPI vader;
#                          tcp: dpg TCP ring vs Open MPI btl tcp (both on lo)
#   RUNS=3                 interleaved repetitions
#   OPS=allreduce,reduce_scatter,allgather,bcast
#   MINB=4096 MAXB=67108864 FACTOR=4 REPS=7 TARGET_MS=50
#   CC=gcc MPICC=mpicc.openmpi MPIRUN=mpirun.openmpi
# Needs: gcc, python3, and Open MPI (apt-get install openmpi-bin
# libopenmpi-dev); runs as root with --allow-run-as-root.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
out=${1:-/tmp/coll_bench.$(date +%Y%m%d-%H%M%S)}
RANKS=${RANKS:-"2 4"}
TRANSPORTS=${TRANSPORTS:-"shm tcp"}
RUNS=${RUNS:-3}
OPS=${OPS:-allreduce,reduce_scatter,allgather,bcast}
MINB=${MINB:-4096}
MAXB=${MAXB:-67108864}
FACTOR=${FACTOR:-4}
REPS=${REPS:-7}
TARGET_MS=${TARGET_MS:-50}
CC=${CC:-gcc}
MPICC=${MPICC:-mpicc.openmpi}
MPIRUN=${MPIRUN:-mpirun.openmpi}

mkdir -p "$out"
echo "# output in $out"

if ! command -v "$MPICC" >/dev/null 2>&1 || ! command -v "$MPIRUN" >/dev/null 2>&1; then
	echo "coll_bench.sh: Open MPI not found ($MPICC, $MPIRUN): apt-get -o DPkg::Lock::Timeout=600" \
		"install -y --no-install-recommends openmpi-bin libopenmpi-dev" >&2
	exit 1
fi

# ---- build (by hand, so that no configured tree is needed)
L=$top/lib
CFLAGS="-std=gnu11 -D_GNU_SOURCE -O3 -g -I$top/include -I$L/common -I$L/runtime -I$L/runtime/cpu"
if ! $CC $CFLAGS -o "$out/coll_bench" "$top/bench/coll_bench.c" \
	"$L/runtime/cpu/cpu_backend.c" "$L/runtime/cpu/ring.c" "$L/runtime/cpu/shm.c" \
	"$L/runtime/cpu/shm_seg.c" "$L/runtime/cpu/shm_direct.c" "$L/runtime/cpu/hello.c" "$L/runtime/cpu/hops.c" \
	"$L/runtime/cpu/stamp.c" "$L/runtime/track.c" "$L/runtime/cpu/reduce.c" "$L"/runtime/store_*.c "$L/runtime/digest.c" \
	"$L/runtime/net.c" "$L/common/err.c" "$L/common/parse.c" -lcrypto -lm -lpthread -lrt \
	> "$out/build.log" 2>&1 ||
   ! $MPICC -O2 -o "$out/coll_mpi" "$top/bench/coll_mpi.c" -lm >> "$out/build.log" 2>&1; then
	cat "$out/build.log" >&2
	exit 1
fi

ARGS="-b $MINB -e $MAXB -f $FACTOR -r $REPS -t $TARGET_MS -c $OPS"
OMPI="$MPIRUN --allow-run-as-root --oversubscribe --mca oob_tcp_if_include lo"

{
	echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs"
	grep -m1 'model name' /proc/cpuinfo || true
	$MPIRUN --version 2>/dev/null | head -1 || true
} > "$out/env.txt"

run=1
while [ "$run" -le "$RUNS" ]; do
	for n in $RANKS; do
		for t in $TRANSPORTS; do
			f="$out/dpg-$t-n$n.run$run.txt"
			echo "# run $run: dpg $t n=$n (load $(cut -d' ' -f1-3 /proc/loadavg))"
			echo "# load before: $(cat /proc/loadavg)" > "$f"
			"$out/coll_bench" -n "$n" -m "$t" -l "dpg-$t" $ARGS >> "$f"
			echo "# load after: $(cat /proc/loadavg)" >> "$f"

			f="$out/ompi-$t-n$n.run$run.txt"
			echo "# run $run: ompi $t n=$n (load $(cut -d' ' -f1-3 /proc/loadavg))"
			if [ "$t" = shm ]; then
				btl="--mca btl self,vader"
			else
				btl="--mca btl self,tcp --mca btl_tcp_if_include lo"
			fi
			echo "# load before: $(cat /proc/loadavg)" > "$f"
			# shellcheck disable=SC2086
			$OMPI $btl -np "$n" "$out/coll_mpi" -l "ompi-$t" $ARGS >> "$f"
			echo "# load after: $(cat /proc/loadavg)" >> "$f"
		done
	done
	run=$((run + 1))
done

python3 - "$out" <<'EOF'
import glob, os, re, statistics, sys
out = sys.argv[1]
rows = {}   # (impl, transport, n, op, bytes) -> [busbw per run]
for path in glob.glob(os.path.join(out, "*.run*.txt")):
    for line in open(path):
        if not line.startswith("CSV,"):
            continue
        f = line.strip().split(",")
        label, op, n, b = f[1], f[2], int(f[3]), int(float(f[4]))
        impl, transport = label.split("-", 1)
        ok = f[13] == "1"
        rows.setdefault((impl, transport, n, op, b), []).append((float(f[10]), float(f[6]), ok))

def cell(key):
    v = rows.get(key)
    if not v:
        return None, None, ""
    bw = [x[0] for x in v]
    t = statistics.median([x[1] for x in v])
    bad = "" if all(x[2] for x in v) else "!"
    return statistics.median(bw), t, bad + ("[%.2f-%.2f]" % (min(bw), max(bw)) if len(bw) > 1 else "")

def human(b):
    return "%d MiB" % (b >> 20) if b >= 1 << 20 else "%d KiB" % (b >> 10)

keys = sorted({(k[1], k[2], k[3]) for k in rows}, key=lambda k: (k[2], k[0], k[1]))
ops = ["allreduce", "reduce_scatter", "allgather", "bcast"]
lines = ["# busbw in GB/s (1e9 B/s), median over runs [min-max of run medians]; "
         "ratio = dpg / Open MPI", ""]
for op in ops:
    confs = sorted({(k[0], k[1]) for k in keys if k[2] == op}, key=lambda c: (c[1], c[0]))
    if not confs:
        continue
    lines.append("## %s" % op)
    lines.append("")
    hdr = "| size |" + "".join(" dpg %s n=%d | ompi %s n=%d | ratio |" % (t, n, t, n)
                               for t, n in confs)
    lines.append(hdr)
    lines.append("|---:|" + "---:|---:|---:|" * len(confs))
    sizes = sorted({k[4] for k in rows if k[3] == op})
    for b in sizes:
        s = "| %s |" % human(b)
        for t, n in confs:
            d, _, dr = cell(("dpg", t, n, op, b))
            o, _, orr = cell(("ompi", t, n, op, b))
            fmt = lambda x, r: ("%.2f %s" % (x, r)).strip() if x is not None else "-"
            ratio = "%.2f" % (d / o) if d and o else "-"
            s += " %s | %s | %s |" % (fmt(d, dr), fmt(o, orr), ratio)
        lines.append(s)
    lines.append("")
lines.append("## 64 MiB summary")
lines.append("")
lines.append("| op | transport | n | dpg busbw | ompi busbw | ratio |")
lines.append("|---|---|---:|---:|---:|---:|")
for op in ops:
    for t, n, o2 in keys:
        if o2 != op:
            continue
        b = max([k[4] for k in rows if k[3] == op and k[1] == t and k[2] == n] or [0])
        if b < (64 << 20) - 4096:
            continue
        d, _, dr = cell(("dpg", t, n, op, b))
        o, _, orr = cell(("ompi", t, n, op, b))
        if d is None or o is None:
            continue
        lines.append("| %s | %s | %d | %.2f %s | %.2f %s | %.2f |" % (op, t, n, d, dr, o, orr, d / o))
text = "\n".join(lines) + "\n"
open(os.path.join(out, "table.md"), "w").write(text)
print(text)
EOF
