#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# launch_overhead.sh - what does dpg add to an srun step launch?
#
#   PLUGIN_SO=/abs/build/.libs/dpg.so bench/launch_overhead.sh
#
# Starts a 3-node minicluster (tests/e2e/minicluster.sh; NETNS=1 works too),
# takes ONE allocation (salloc -N3 -n6) and times, inside it, RUNS launches
# of each variant, interleaved and in rotating order so that drift and
# warm-up hit every variant alike:
#   plugin  : plugstack "optional dpg.so", srun -N3 -n6 --dpg-gpus-per-task=0 true
#             (the defaults: every node loads its topology from the node's
#             cache, /var/cache/dpg/topology, saved by the first step after a
#             boot; plans, and binds each task: bind=closest)
#   live    : plugstack "optional dpg.so topology_cache=no", --dpg-gpus-per-task=0
#             (every step discovers the LIVE topology with hwloc)
#   empty   : EMPTY plugstack.conf,        srun -N3 -n6 true
#   loaded  : plugstack "optional dpg.so", srun -N3 -n6 true   (plugin loaded, not asked)
#   nobind  : plugstack "optional dpg.so bind=none", --dpg-gpus-per-task=0 (live
#             topology and plan, no sched_setaffinity)
#   xml     : plugstack "optional dpg.so topology_xml=FIXTURE", --dpg-gpus-per-task=0
#             (the admin's cached XML instead of discovery; bind=closest;
#             FIXTURE = tests/fixtures/topo/synthetic-2s-4gpu-2sw.xml or TOPO_XML)
# srun and slurmstepd re-read plugstack.conf at every launch, so the file is
# rewritten (outside the timed region) before each run.  Steps use --overlap
# so that a launch never waits for the previous step's CPUs to be released
# (a controller round trip that is not the plugin's cost).
# Prints median, mean, sd, min, max per variant and the ratios plugin/empty.
#
# --smoke (or SMOKE=1): RUNS=3, WARMUP=1.
# Knobs: PLUGIN_SO (default BUILD/.libs/dpg.so, BUILD as in bench/lib.sh:
# build/werror or build/dev of this tree), RUNS (30),
# WARMUP (3 per variant, untimed), VARIANTS ("plugin live empty loaded nobind xml"),
# TOPO_XML (the xml variant's file), NETNS=1, RAW_OUT=FILE (keep raw samples),
# any minicluster.sh knob.  Needs root and slurmctld slurmd slurm-client munge.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
E2E_DIR=$TOP/tests/e2e
. "$E2E_DIR/lib.sh"
bench_top=$TOP
bench_name=launch_overhead.sh
. "$HERE/lib.sh"
SMOKE=${SMOKE:-0}
if [ "${1:-}" = --smoke ]; then SMOKE=1; shift; fi
if [ "$SMOKE" = 1 ]; then RUNS=${RUNS:-3}; WARMUP=${WARMUP:-1}; fi

RUNS=${RUNS:-30}
WARMUP=${WARMUP:-3}
TOPO_XML=${TOPO_XML:-$TOP/tests/fixtures/topo/synthetic-2s-4gpu-2sw.xml}
read -r -a VARIANTS <<<"${VARIANTS:-plugin live empty loaded nobind xml}"
[ -n "${PLUGIN_SO:-}" ] || { bench_build; PLUGIN_SO=$BUILD/.libs/dpg.so; }
[ -f "$PLUGIN_SO" ] || { echo "launch_overhead: no plugin at PLUGIN_SO=$PLUGIN_SO (configure with Slurm, then make)" >&2; exit 2; }
PLUGIN_SO=$(cd "$(dirname "$PLUGIN_SO")" && pwd)/$(basename "$PLUGIN_SO")
[ "$(id -u)" = 0 ] || { echo "launch_overhead: must run as root" >&2; exit 2; }
for v in $(compgen -v); do case $v in SLURM_*|SPANK_*|_SLURM_*) unset "$v";; esac; done

e2e_pick_ports
LAB=$(mktemp -d "${TMPDIR:-/tmp}/dpg-bench.XXXXXX")
chmod 755 "$LAB"
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -f "$LAB/slurm.conf" ] && "$E2E_DIR/minicluster-stop.sh" "$LAB" >/dev/null
	rm -rf "$LAB"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

LAB_DIR=$LAB NODES=3 PLUGIN_SO=$PLUGIN_SO "$E2E_DIR/minicluster.sh" >/dev/null || exit 1
. "$LAB/env.sh"
WITH="optional $PLUGIN_SO"

J=$(salloc -N3 -n6 --no-shell -J bench 2>&1 | sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p')
[ -n "$J" ] || { echo "launch_overhead: salloc failed" >&2; exit 1; }

prepare() { # VARIANT: write its plugstack.conf, print its srun options
	case $1 in
	plugin) echo "$WITH" >"$LAB/plugstack.conf"; echo --dpg-gpus-per-task=0;;
	live) echo "$WITH topology_cache=no" >"$LAB/plugstack.conf"; echo --dpg-gpus-per-task=0;;
	loaded) echo "$WITH" >"$LAB/plugstack.conf";;
	empty) : >"$LAB/plugstack.conf";;
	nobind) echo "$WITH bind=none" >"$LAB/plugstack.conf"; echo --dpg-gpus-per-task=0;;
	xml) echo "$WITH topology_xml=$TOPO_XML" >"$LAB/plugstack.conf"; echo --dpg-gpus-per-task=0;;
	*) echo "launch_overhead: unknown variant $1" >&2; exit 2;;
	esac
}
[ -r "$TOPO_XML" ] || { echo "launch_overhead: no TOPO_XML=$TOPO_XML" >&2; exit 2; }

declare -A SANITY
CACHE=/var/cache/dpg/topology/topology.cache   # the default topology_cache=
# sanity: each variant really does what it says (contract, binding, or nothing)
probe='echo "$RANK|${DPG_CPUS-}|${OMP_NUM_THREADS-}|$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"'
free=$(: >"$LAB/plugstack.conf"; srun --jobid="$J" --overlap -N1 -n1 bash -c "$probe" | cut -d'|' -f4)
for v in "${VARIANTS[@]}"; do
	opts=$(prepare "$v") || exit 2
	out=$(srun --jobid="$J" --overlap -N3 -n6 $opts bash -c "$probe" 2>"$LAB/probe.err") ||
		{ cat "$LAB/probe.err" >&2; echo "launch_overhead: $v: srun failed" >&2; exit 1; }
	ranks=$(cut -d'|' -f1 <<<"$out" | grep -c '[0-9]')
	bound=$(awk -F'|' -v f="$free" '$4 != f' <<<"$out" | wc -l)
	warn=$(grep -c 'dpg: ' "$LAB/probe.err")
	case $v in
	plugin|live|xml) want_r=6; [ "$bound" -gt 0 ] || { echo "launch_overhead: $v: no task bound:" >&2; echo "$out" >&2; exit 1; };;
	nobind) want_r=6; [ "$bound" = 0 ] || { echo "launch_overhead: $v: tasks bound" >&2; exit 1; };;
	*) want_r=0; [ "$bound" = 0 ] || { echo "launch_overhead: $v: tasks bound" >&2; exit 1; };;
	esac
	[ "$ranks" = $want_r ] || { echo "launch_overhead: $v: $ranks tasks with RANK, expected $want_r" >&2; echo "$out" >&2; exit 1; }
	[ "$v" = plugin ] && { [ -f "$CACHE" ] || { echo "launch_overhead: plugin: no topology cache $CACHE after a step" >&2; exit 1; }; }
	t0=$(sort -t'|' -k1,1n <<<"$out" | head -1)
	SANITY[$v]="$ranks/6 with RANK, $bound/6 bound, $warn 'dpg:' stderr lines; rank 0: DPG_CPUS=$(cut -d'|' -f2 <<<"$t0") OMP_NUM_THREADS=$(cut -d'|' -f3 <<<"$t0") affinity $(cut -d'|' -f4 <<<"$t0")"
done

launch() { # VARIANT: prepare the plugstack (untimed), then time one launch in seconds
	local opts t0 t1 rc
	opts=$(prepare "$1") || exit 2
	t0=$EPOCHREALTIME
	srun --jobid="$J" --overlap -N3 -n6 $opts true 2>>"$LAB/launch.err"; rc=$?
	t1=$EPOCHREALTIME
	[ $rc = 0 ] || { cat "$LAB/launch.err" >&2; echo "launch_overhead: srun failed ($rc)" >&2; exit 1; }
	awk -v a="${t0/,/.}" -v b="${t1/,/.}" 'BEGIN { printf "%.6f\n", b - a }'
}

RAW=$LAB/raw.txt
: >"$RAW"
for ((i = 0; i < WARMUP; i++)); do for v in "${VARIANTS[@]}"; do launch $v >/dev/null; done; done
t_start=$SECONDS
for ((i = 0; i < RUNS; i++)); do
	# rotate the order every iteration: ABC, BCA, CAB, ...
	for ((k = 0; k < ${#VARIANTS[@]}; k++)); do
		v=${VARIANTS[$(( (i + k) % ${#VARIANTS[@]} ))]}
		echo "$v $(launch $v)" >>"$RAW"
	done
done
[ -n "${RAW_OUT:-}" ] && cp "$RAW" "$RAW_OUT"

stats() { # VARIANT -> "median mean sd min max n" in ms
	awk -v v="$1" '$1 == v { print $2 * 1000 }' "$RAW" | sort -n | awk '
		{ x[NR] = $1; s += $1; ss += $1 * $1 }
		END {
			m = (NR % 2) ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2
			mean = s / NR; sd = sqrt((ss - s * s / NR) / (NR > 1 ? NR - 1 : 1))
			printf "%.1f %.1f %.1f %.1f %.1f %d\n", m, mean, sd, x[1], x[NR], NR
		}'
}
mode=multi-slurmd; [ "${NETNS:-0}" = 1 ] && mode=netns
bench_host
echo "# dpg launch overhead: srun --jobid=J --overlap -N3 -n6 [--dpg-gpus-per-task=0] true"
for v in "${VARIANTS[@]}"; do printf '#   %-7s %s\n' "$v:" "$(prepare "$v" >/dev/null; sed "s|$PLUGIN_SO|dpg.so|; s|$TOP/||" "$LAB/plugstack.conf") | ${SANITY[$v]}"; done
echo "# inside one allocation (salloc -N3 -n6), $RUNS interleaved runs per variant after $WARMUP warm-up each,"
echo "# Slurm $(slurmd -V | awk '{print $2}'), $mode, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $((SECONDS - t_start)) s"
printf '%-8s %9s %9s %8s %8s %8s %4s\n' variant median_ms mean_ms sd_ms min_ms max_ms n
declare -A MED MEAN
for v in "${VARIANTS[@]}"; do
	read -r med mean sd mn mx n <<<"$(stats $v)"
	MED[$v]=$med; MEAN[$v]=$mean
	printf '%-8s %9s %9s %8s %8s %8s %4s\n' "$v" "$med" "$mean" "$sd" "$mn" "$mx" "$n"
done
ratio() { # A B: "ratio A/B: median R (+D ms), mean R (+D ms)"
	[ -n "${MED[$1]:-}" ] && [ -n "${MED[$2]:-}" ] || return 0
	awk -v a="$1" -v b="$2" -v am="${MED[$1]}" -v bm="${MED[$2]}" -v aa="${MEAN[$1]}" -v ba="${MEAN[$2]}" 'BEGIN {
		printf "ratio %s/%s: median %.3f (%+.1f ms), mean %.3f (%+.1f ms)\n", a, b, am / bm, am - bm, aa / ba, aa - ba }'
}
for v in plugin live xml loaded nobind; do ratio $v empty; done
ratio plugin nobind   # what sched_setaffinity adds
ratio plugin live     # the node's topology cache vs live discovery
ratio xml live        # the admin's XML vs live discovery
[ -s "$LAB/launch.err" ] && echo "# srun stderr during the timed runs: $(wc -l <"$LAB/launch.err") lines, e.g. $(head -1 "$LAB/launch.err")"
exit 0
