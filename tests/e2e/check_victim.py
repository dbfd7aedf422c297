#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""check_victim.py - check the output of a coll_victim step (tests/e2e/run.sh).

    check_victim.py --world 6 --victim 3 --death DEATH_FILE [--max-s 10] OUT

OUT holds the E2E-* lines of every task (see coll_victim.c); DEATH_FILE the
CLOCK_REALTIME at which the victim raised SIGKILL.  Every survivor must have
failed exactly once with status "peer failure", its dpg_last_error must name
the victim's rank (after its own "rank R (host)" prefix), and it must have
failed and exited (dpg_finalize returned) within --max-s seconds of the kill;
no survivor may report success or a wrong result.  Prints one line per rank
and, last, a summary with the detection times (ms after the kill).
"""
import argparse
import re
import sys

FAIL = re.compile(r"^E2E-FAIL rank (\d+) host (\S+) iter (\d+) status (.*?) call_s ([0-9.]+) "
                  r"at ([0-9.]+): (.*)$")
EXIT = re.compile(r"^E2E-EXIT rank (\d+) at ([0-9.]+)$")
OTHER = re.compile(r"^E2E-(OK|WRONG|INIT-FAIL)\b.*")
PREFIX = re.compile(r"^rank \d+ \([^)]*\) ")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--victim", type=int, required=True)
    ap.add_argument("--death", required=True)
    ap.add_argument("--max-s", type=float, default=10.0)
    ap.add_argument("--status", default="peer failure")
    ap.add_argument("out")
    a = ap.parse_args()

    try:
        death = float(open(a.death).read().split()[0])
    except (OSError, IndexError, ValueError) as e:
        print(f"error: no death time of rank {a.victim} in {a.death}: {e}")
        return 1
    fails, exits, bad = {}, {}, []
    for line in open(a.out, errors="replace"):
        line = line.rstrip("\n")
        m = FAIL.match(line)
        if m:
            r = int(m.group(1))
            if r in fails:
                bad.append(f"rank {r} failed twice")
            fails[r] = m
            continue
        m = EXIT.match(line)
        if m:
            exits[int(m.group(1))] = float(m.group(2))
            continue
        m = OTHER.match(line)
        if m:
            bad.append(f"unexpected: {line}")

    name = re.compile(rf"(^|[^0-9])rank {a.victim}([^0-9]|$)")
    det = {}
    for r in range(a.world):
        if r == a.victim:
            if r in fails or r in exits:
                bad.append(f"the victim rank {r} was still running after its SIGKILL")
            continue
        m = fails.get(r)
        if m is None:
            bad.append(f"rank {r}: no E2E-FAIL line (did it hang, succeed, or get killed by Slurm?)")
            continue
        status, call_s, at, msg = m.group(4), float(m.group(5)), float(m.group(6)), m.group(7)
        d = at - death
        det[r] = d
        x = exits.get(r)
        xs = f"exited +{(x - death) * 1e3:.0f} ms" if x is not None else "NO E2E-EXIT"
        print(f"rank {r} ({m.group(2)}): iter {m.group(3)} {status}, detected +{d * 1e3:.0f} ms "
              f"(call {call_s:.3f} s), {xs}: {msg}")
        if status != a.status:
            bad.append(f"rank {r}: status '{status}', want '{a.status}'")
        if not name.search(PREFIX.sub("", msg, count=1)):
            bad.append(f"rank {r}: error does not name rank {a.victim}: {msg}")
        if not msg.startswith(f"rank {r} "):
            bad.append(f"rank {r}: error does not start with its own 'rank {r} (host)': {msg}")
        if d > a.max_s:
            bad.append(f"rank {r}: failed {d:.2f} s after the kill (limit {a.max_s:g} s)")
        if x is None:
            bad.append(f"rank {r}: did not return from dpg_finalize")
        elif x - death > a.max_s:
            bad.append(f"rank {r}: exited {x - death:.2f} s after the kill (limit {a.max_s:g} s)")
    for b in bad:
        print("error: " + b)
    if bad:
        return 1
    ms = " ".join(f"r{r}:{det[r] * 1e3:.0f}" for r in sorted(det))
    last = max(exits[r] for r in det) - death
    print(f"detected (ms after the kill) {ms}; max {max(det.values()) * 1e3:.0f} ms; "
          f"all survivors exited by +{last * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
