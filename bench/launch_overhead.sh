#!/usr/bin/env bash
# launch_overhead.sh - what does dpg add to an srun step launch?
#
#   PLUGIN_SO=/abs/build/.libs/dpg.so bench/launch_overhead.sh
#
# Starts a 3-node minicluster (tests/e2e/minicluster.sh; NETNS=1 works too),
# takes ONE allocation (salloc -N3 -n6) and times, inside it, RUNS launches
# of each variant, interleaved and in rotating order so that drift and
# warm-up hit every variant alike:
#   plugin  : plugstack "optional dpg.so", srun -N3 -n6 --dpg-gpus-per-task=0 true
#   empty   : EMPTY plugstack.conf,        srun -N3 -n6 true
#   loaded  : plugstack "optional dpg.so", srun -N3 -n6 true   (plugin loaded, not asked)
# srun and slurmstepd re-read plugstack.conf at every launch, so the file is
# rewritten (outside the timed region) before each run.  Steps use --overlap
# so that a launch never waits for the previous step's CPUs to be released
# (a controller round trip that is not the plugin's cost).
# Prints median, mean, sd, min, max per variant and the ratios plugin/empty.
#
# Knobs: PLUGIN_SO (default build/.libs/dpg.so of this tree), RUNS (30),
# WARMUP (3 per variant, untimed), NETNS=1, RAW_OUT=FILE (keep raw samples),
# any minicluster.sh knob.  Needs root and slurmctld slurmd slurm-client munge.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
E2E_DIR=$TOP/tests/e2e
. "$E2E_DIR/lib.sh"

RUNS=${RUNS:-30}
WARMUP=${WARMUP:-3}
PLUGIN_SO=${PLUGIN_SO:-$TOP/build/.libs/dpg.so}
[ -f "$PLUGIN_SO" ] || { echo "launch_overhead: no plugin at PLUGIN_SO=$PLUGIN_SO (build first)" >&2; exit 2; }
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

# sanity: the plugin really acts in "plugin" and not in "empty"
echo "$WITH" >"$LAB/plugstack.conf"
n=$(srun --jobid="$J" --overlap -N3 -n6 --dpg-gpus-per-task=0 printenv RANK | wc -l)
[ "$n" = 6 ] || { echo "launch_overhead: plugin did not export RANK ($n tasks had it)" >&2; exit 1; }
: >"$LAB/plugstack.conf"
srun --jobid="$J" --overlap -N3 -n6 printenv RANK >/dev/null 2>&1 && { echo "launch_overhead: RANK set without plugin?" >&2; exit 1; }

VARIANTS=(plugin empty loaded)
launch() { # VARIANT: prepare the plugstack (untimed), then time one launch in seconds
	case $1 in
	plugin) echo "$WITH" >"$LAB/plugstack.conf"; set -- --dpg-gpus-per-task=0;;
	loaded) echo "$WITH" >"$LAB/plugstack.conf"; set --;;
	empty) : >"$LAB/plugstack.conf"; set --;;
	esac
	local t0=$EPOCHREALTIME rc
	srun --jobid="$J" --overlap -N3 -n6 "$@" true; rc=$?
	local t1=$EPOCHREALTIME
	[ $rc = 0 ] || { echo "launch_overhead: srun failed ($rc)" >&2; exit 1; }
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
echo "# dpg launch overhead: srun --jobid=J --overlap -N3 -n6 [--dpg-gpus-per-task=0] true"
echo "# inside one allocation (salloc -N3 -n6), $RUNS interleaved runs per variant after $WARMUP warm-up each,"
echo "# Slurm $(slurmd -V | awk '{print $2}'), $mode, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $((SECONDS - t_start)) s"
printf '%-8s %9s %9s %8s %8s %8s %4s\n' variant median_ms mean_ms sd_ms min_ms max_ms n
declare -A MED MEAN
for v in "${VARIANTS[@]}"; do
	read -r med mean sd mn mx n <<<"$(stats $v)"
	MED[$v]=$med; MEAN[$v]=$mean
	printf '%-8s %9s %9s %8s %8s %8s %4s\n' "$v" "$med" "$mean" "$sd" "$mn" "$mx" "$n"
done
awk -v pm="${MED[plugin]}" -v em="${MED[empty]}" -v pa="${MEAN[plugin]}" -v ea="${MEAN[empty]}" \
	-v lm="${MED[loaded]}" 'BEGIN {
	printf "ratio plugin/empty: median %.3f (%+.1f ms), mean %.3f (%+.1f ms)\n", pm / em, pm - em, pa / ea, pa - ea
	printf "ratio loaded/empty: median %.3f (%+.1f ms)\n", lm / em, lm - em
}'
