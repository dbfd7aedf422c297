#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# coll_table.py - the table of bench/coll_bench.sh from the files of its run
# in OUTDIR (OUTDIR/table.md, also printed).
#   coll_table.py OUTDIR            the table
#   coll_table.py --below OUTDIR    the cells below a peer, worst first, a line
#                                   each: PEER TRANSPORT N OP BYTES
import glob, itertools, math, os, re, statistics, sys

def load(d):
    """The CSV and WAIT lines of every run file in d."""
    rows = {}   # (impl, transport, n, op, bytes) -> [(busbw, us, ok, run) per run]
    waits = {}  # (impl, transport, n, op) -> [(sleep_ms, wall_ms, cpu_ms) per run]
    for path in glob.glob(os.path.join(d, "*.run*.txt")):
        m = re.search(r"\.run(\d+)\.txt$", path)
        run = int(m.group(1)) if m else 0
        for line in open(path):
            if line.startswith("WAIT,"):
                f = line.strip().split(",")
                impl, transport = f[1].split("-", 1)
                waits.setdefault((impl, transport, int(f[3]), f[2]), []).append(
                    (int(f[5]), float(f[6]), float(f[7])))
                continue
            if not line.startswith("CSV,"):
                continue
            f = line.strip().split(",")
            label, op, n, b = f[1], f[2], int(f[3]), int(float(f[4]))
            impl, transport = label.split("-", 1)
            ok = f[13] == "1"
            rows.setdefault((impl, transport, n, op, b), []).append(
                (float(f[10]), float(f[6]), ok, run))
    return rows, waits

below_only = len(sys.argv) > 2 and sys.argv[1] == "--below"
out = sys.argv[2] if below_only else sys.argv[1]
rows, waits = load(out)
alone, _ = load(os.path.join(out, "recheck"))

def cell(key):
    v = rows.get(key)
    if not v:
        return None, None, ""
    bw = [x[0] for x in v]
    t = statistics.median([x[1] for x in v])
    bad = "" if all(x[2] for x in v) else "!"
    return statistics.median(bw), t, bad + ("[%.2f-%.2f]" % (min(bw), max(bw)) if len(bw) > 1 else "")

def human(b):
    """A size as the table names it: whole MiB or KiB, else the bytes (an
    off-grid run, MINB=5000 say, whose counts the ranks may not divide)."""
    if b >= 1 << 20 and b % (1 << 20) == 0:
        return "%d MiB" % (b >> 20)
    if b % 1024 == 0:
        return "%d KiB" % (b >> 10)
    return "%d B" % b

def midranks(values):
    """Each distinct value's rank (from 1) in values sorted, ties at the
    mean of the ranks they share."""
    pool = sorted(values)
    return {v: pool.index(v) + (pool.count(v) + 1) / 2.0 for v in set(pool)}

def perm_p(a, b):
    """Two-sided exact permutation test of two samples' rank sums (the
    Mann-Whitney test, ties at mid-ranks): the share of the ways to split
    the pooled values into groups of len(a) and len(b) whose rank sum lies
    at least as far from its mean as a's does.  None below 2 values each."""
    if len(a) < 2 or len(b) < 2:
        return None
    rank = midranks(a + b)
    ranks = [rank[v] for v in a + b]
    mean = len(a) * (len(ranks) + 1) / 2.0
    obs = abs(sum(ranks[:len(a)]) - mean)
    hits = total = 0
    for idx in itertools.combinations(range(len(ranks)), len(a)):
        total += 1
        if abs(sum(ranks[i] for i in idx) - mean) >= obs - 1e-9:
            hits += 1
    return hits / total

def signed_rank_p(d):
    """Two-sided exact Wilcoxon signed-rank test of paired differences d
    (zeros dropped, ties at mid-ranks): the share of the 2^k sign flips
    whose signed rank sum lies at least as far from 0 as d's does.  None
    below 2 non-zero pairs."""
    d = [x for x in d if x != 0]
    if len(d) < 2:
        return None
    rank = midranks([abs(x) for x in d])
    r = [rank[abs(x)] for x in d]
    obs = abs(sum(ri if x > 0 else -ri for ri, x in zip(r, d)))
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=len(r)):
        total += 1
        if abs(sum(si * ri for si, ri in zip(signs, r))) >= obs - 1e-9:
            hits += 1
    return hits / total

def runs_bw(key):
    return [x[0] for x in rows.get(key, [])]

def pfmt(pv):
    return "%.3f" % pv if pv is not None else "-"

keys = sorted({(k[1], k[2], k[3]) for k in rows if not k[0].startswith("limit")},
              key=lambda k: (k[2], k[0], k[1]))
ops = ["allreduce", "reduce_scatter", "allgather", "bcast"]
peers = [p for p in ("ompi", "gloo") if any(k[0] == p for k in rows)]
pname = {"ompi": "Open MPI", "gloo": "Gloo"}
failed = os.path.join(out, "failed.txt")
failed = open(failed).read().strip() if os.path.exists(failed) else ""
lines = [open(os.path.join(out, "host.txt")).read().strip(), ""] + \
        ([failed, ""] if failed else []) + [
         "# busbw in GB/s (1e9 B/s), median over runs [min-max of run medians]; "
         "ratio = dpg / peer" + ("; peers: " + ", ".join(pname[p] for p in peers) if peers else
                                 "; no peer ran"), ""]
fmt = lambda x, r: (("%.2f %s" if x >= 0.1 else "%.4f %s") % (x, r)).strip() if x is not None else "-"
worst = {}  # peer -> (ratio, op, transport, n, bytes)
for op in ops:
    confs = sorted({(k[0], k[1]) for k in keys if k[2] == op}, key=lambda c: (c[1], c[0]))
    if not confs:
        continue
    lines.append("## %s" % op)
    lines.append("")
    hdr = "| size |"
    for t, n in confs:
        hdr += " dpg %s n=%d |" % (t, n)
        hdr += "".join(" %s %s n=%d | ratio |" % (p, t, n) for p in peers)
    lines.append(hdr)
    lines.append("|---:|" + ("---:|" * (1 + 2 * len(peers))) * len(confs))
    sizes = sorted({k[4] for k in rows if k[3] == op})
    for b in sizes:
        s = "| %s |" % human(b)
        for t, n in confs:
            d, _, dr = cell(("dpg", t, n, op, b))
            s += " %s |" % fmt(d, dr)
            for p in peers:
                o, _, orr = cell((p, t, n, op, b))
                ratio = "-"
                if d and o:
                    ratio = "%.2f" % (d / o)
                    if p not in worst or d / o < worst[p][0]:
                        worst[p] = (d / o, op, t, n, b)
                s += " %s | %s |" % (fmt(o, orr), ratio)
        lines.append(s)
    lines.append("")
lines.append("## worst cell")
lines.append("")
if not worst:
    lines.append("no peer ran: no ratio")
for p in peers:
    if p in worst:
        r, op, t, n, b = worst[p]
        pv = perm_p(runs_bw(("dpg", t, n, op, b)), runs_bw((p, t, n, op, b)))
        lines.append("worst vs %s: %.2fx (%s %s n=%d %s; runs' p = %s)" % (
            pname[p], r, op, t, n, human(b), pfmt(pv)))
headline_at = len(lines)    # the cells below re-measured alone go here
lines.append("")
def ref(t, n, op, b, kind=""):
    """The reference busbw of a cell and how it waited: shm's one-node
    reference (kind "ring": the kernel-copy one, cmalimit), or the better of
    tcplimit's two waits (kind "ring": -F)."""
    if t == "shm":
        v, _, _ = cell(("limitcma" if kind else "limit", "shm", n, op, b))
        return v, "kernel copy" if kind and v is not None else ""
    best = (None, "")
    for y in ("spin", "block"):
        v, _, _ = cell(("limit" + kind + y, t, n, op, b))
        if v is not None and (best[0] is None or v > best[0]):
            best = (v, y)
    return best

below = []  # (peer, ratio, op, transport, n, bytes, dpg, peer busbw)
for op in ops:
    for t, n, o2 in keys:
        if o2 != op:
            continue
        for b in sorted({k[4] for k in rows if k[3] == op and k[1] == t and k[2] == n}):
            d, _, _ = cell(("dpg", t, n, op, b))
            for p in peers:
                o, _, _ = cell((p, t, n, op, b))
                if d and o and d / o < 1.0:
                    below.append((p, d / o, op, t, n, b, d, o))
if below_only:
    for p, r, op, t, n, b, d, o in sorted(below, key=lambda x: x[1]):
        print(p, t, n, op, b)
    sys.exit(0)
lines.append("## cells below a peer")
lines.append("")
if not below:
    lines.append("none" if worst else "no peer ran")
else:
    pvs = [perm_p(runs_bw(("dpg", t, n, op, b)), runs_bw((p, t, n, op, b)))
           for p, r, op, t, n, b, d, o in below]
    sig = sum(1 for pv in pvs if pv is not None and pv < 0.05)
    # the least p the runs allow: both sides apart, of C(a+b, a) splits
    nr = sorted({(len(runs_bw(("dpg", t, n, op, b))), len(runs_bw((p, t, n, op, b))))
                 for p, r, op, t, n, b, d, o in below})
    floor = "; ".join("with %d and %d runs it cannot go below %.2g" %
                      (a, c, 2.0 / math.comb(a + c, a)) for a, c in nr if a > 1 and c > 1)
    lines.append("Each with the references measured in the same run (shm: the one-node "
                 "reference and, for all_gather and broadcast, the kernel-copy one; tcp: the "
                 "TCP references, bare and in a ring's order; both below) and "
                 "dpg's and the peer's share of each.  p: how often runs this far apart come "
                 "from two implementations that do not differ (exact two-sided permutation "
                 "test of the runs' rank sums, Mann-Whitney%s).  %d of the %d cells have "
                 "p < 0.05." % ("; " + floor if floor else "", sig, len(below)))
    lines.append("")
    lines.append("| peer | op | transport | n | size | dpg | peer | ratio | p | reference | dpg / ref "
                 "| peer / ref | ring or kernel-copy ref | dpg / it | peer / it | per run, us: dpg / peer |")
    lines.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    def per_run(key):
        return " ".join("%.3g" % x[1] for x in sorted(rows.get(key, []), key=lambda x: x[3]))
    share = lambda x, lim: "%.2f" % (x / lim) if lim else "-"
    for (p, r, op, t, n, b, d, o), pv in zip(below, pvs):
        lim, how = ref(t, n, op, b)
        rl, rhow = ref(t, n, op, b, "ring")
        lines.append("| %s | %s | %s | %d | %s | %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s / %s |" % (
            pname[p], op, t, n, human(b), fmt(d, ""), fmt(o, ""), r, pfmt(pv),
            (fmt(lim, "") + (" (%s)" % how if how else "")) if lim else "-",
            share(d, lim), share(o, lim),
            (fmt(rl, "") + " (%s)" % rhow) if rl else "-", share(d, rl), share(o, rl),
            per_run(("dpg", t, n, op, b)), per_run((p, t, n, op, b))))
lines.append("")

def alone_cell(p, t, n, op, b):
    """A cell below re-measured alone: (rounds, dpg us, peer us, dpg's us per
    round, the peer's, busbw ratio of the medians, p, rounds dpg was ahead,
    the median of the rounds' own ratios, its signed-rank p).  The paired
    figures compare dpg with the peer of the same round only: where the
    host drifts between fast and slow spells longer than a round (both
    sides' times jump together), they are not moved by which spell each
    side's median fell in."""
    dv = {x[3]: x for x in alone.get(("dpg", t, n, op, b), [])}
    pv = {x[3]: x for x in alone.get((p, t, n, op, b), [])}
    both = sorted(set(dv) & set(pv))
    if not both:
        return None
    d_bw = [dv[r][0] for r in both]
    p_bw = [pv[r][0] for r in both]
    return (len(both), statistics.median(dv[r][1] for r in both),
            statistics.median(pv[r][1] for r in both), [dv[r][1] for r in both],
            [pv[r][1] for r in both], statistics.median(d_bw) / statistics.median(p_bw),
            perm_p(d_bw, p_bw), sum(1 for r in both if dv[r][0] > pv[r][0]),
            statistics.median(d / q for d, q in zip(d_bw, p_bw)),
            signed_rank_p([math.log(d / q) for d, q in zip(d_bw, p_bw)]))

rechecked = [(c, alone_cell(c[0], c[3], c[4], c[2], c[5])) for c in sorted(below, key=lambda x: x[1])]
rechecked = [(c, a) for c, a in rechecked if a is not None]
if rechecked:
    lines.append("## cells below a peer, alone")
    lines.append("")
    still = [(c, a) for c, a in rechecked if a[5] < 1.0]
    pstill = [(c, a) for c, a in rechecked if a[8] < 1.0]
    lines.append("After the table's runs, each cell below a peer (the worst %d) once more: that "
                 "size only, dpg and the peer in a shuffled order, %d round(s), no other cell "
                 "in between.  us: median per call, the median over rounds; ratio: dpg / peer "
                 "busbw of the rounds' medians, p as above; paired: the median of each "
                 "round's own dpg / peer ratio, and its p (exact two-sided Wilcoxon "
                 "signed-rank test of the rounds' log ratios), which only compare the two "
                 "within a round; ahead: rounds where dpg's was higher.  "
                 "%d of the %d still below alone, %d of them at p < 0.05; paired, %d below, "
                 "%d of them at p < 0.05." % (
                     len(rechecked), max(a[0] for c, a in rechecked), len(still),
                     len(rechecked), sum(1 for c, a in still if a[6] is not None and a[6] < 0.05),
                     len(pstill), sum(1 for c, a in pstill if a[9] is not None and a[9] < 0.05)))
    lines.append("")
    worst_alone = min(rechecked, key=lambda x: x[1][5])
    (p, r, op, t, n, b, d, o), a = worst_alone
    (pp, _, pop, pt, pn, pb, _, _), pa = min(rechecked, key=lambda x: x[1][8])
    lines.insert(headline_at, "re-measured alone (cells below a peer, %d round(s) each): %d of %d "
                 "still below, worst %.2fx vs %s (%s %s n=%d %s; p = %s); paired by round: "
                 "%d below, worst %.2fx vs %s (%s %s n=%d %s; p = %s)" % (
                     a[0], len(still), len(rechecked), a[5], pname[p], op, t, n, human(b),
                     pfmt(a[6]), len(pstill), pa[8], pname[pp], pop, pt, pn, human(pb),
                     pfmt(pa[9])))
    lines.append("| peer | op | transport | n | size | ratio in the table | rounds | dpg us | peer us "
                 "| ratio alone | p | paired ratio | paired p | dpg ahead | per round, us: dpg / peer |")
    lines.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for (p, r, op, t, n, b, d, o), a in rechecked:
        k, du, pu, dr, pr, ra, pa, ahead, pr_ratio, pr_p = a
        lines.append("| %s | %s | %s | %d | %s | %.2f | %d | %.3g | %.3g | %.2f | %s | %.2f | %s "
                     "| %d/%d | %s / %s |" % (
            pname[p], op, t, n, human(b), r, k, du, pu, ra, pfmt(pa), pr_ratio, pfmt(pr_p), ahead, k,
            " ".join("%.3g" % x for x in dr), " ".join("%.3g" % x for x in pr)))
    lines.append("")
if any(k[0] == "limit" for k in rows):
    lines.append("## one-node reference")
    lines.append("")
    lines.append("`coll_bench -m limit`: per call, the ranks meet once (each bumps its cache "
                 "line in a shared page and waits for the others') and each does, on its own "
                 "memory and all at once, the least copying the op needs on one node "
                 "(all_gather, broadcast: one memcpy of the output, the root none; "
                 "reduce_scatter: one combine of n blocks; allreduce: that and a memcpy of the "
                 "rest), in the same batches; busbw as above, and each implementation's share "
                 "of it.  glibc's memcpy: above the caches streaming stores can beat it (> 1).  "
                 "The kernel-copy reference (`-m cmalimit`, all_gather and broadcast): the "
                 "ranks meet, each reads what it lacks straight from the owners' private "
                 "buffers with process_vm_readv (all_gather: the other n-1 blocks, and a "
                 "memcpy of its own; broadcast: the whole buffer from the root), and they "
                 "meet again (an owner may not return while its buffer is read): the least "
                 "copying between processes whose buffers are not shared, as user buffers "
                 "are not; a broadcast whose root shares the copying can beat it.")
    lines.append("")
    lines.append("| op | n | size | reference busbw | dpg / ref |" +
                 "".join(" %s / ref |" % pname[p] for p in peers) +
                 " kernel-copy ref | dpg / it |" + "".join(" %s / it |" % pname[p] for p in peers))
    lines.append("|---|---:|---:|---:|---:|" + "---:|" * len(peers) + "---:|---:|" +
                 "---:|" * len(peers))
    for op in ops:
        for n in sorted({k[2] for k in rows if k[0] == "limit" and k[3] == op}):
            for b in sorted({k[4] for k in rows if k[0] == "limit" and k[3] == op and k[2] == n}):
                lim, _, _ = cell(("limit", "shm", n, op, b))
                d, _, _ = cell(("dpg", "shm", n, op, b))
                s = "| %s | %d | %s | %s | %s |" % (op, n, human(b), fmt(lim, ""),
                                                   "%.2f" % (d / lim) if d and lim else "-")
                po = [cell((p, "shm", n, op, b))[0] for p in peers]
                s += "".join(" %s |" % ("%.2f" % (o / lim) if o and lim else "-") for o in po)
                cma, _, _ = cell(("limitcma", "shm", n, op, b))
                s += " %s | %s |" % (fmt(cma, "") if cma else "-",
                                     "%.2f" % (d / cma) if d and cma else "-")
                s += "".join(" %s |" % ("%.2f" % (o / cma) if o and cma else "-") for o in po)
                lines.append(s)
    lines.append("")
if any(k[0] == "limitxfer" for k in rows):
    lines.append("## cross-CPU reference")
    lines.append("")
    lines.append("`coll_bench -m xferlimit`, allreduce to 1 MiB: per call each rank copies its "
                 "input into the next of its slots in a mapping the ranks share, they meet, "
                 "and each reduces the whole buffer out of every rank's slot: what a one-node "
                 "allreduce must do whose data crosses between the CPUs, with no stamps, "
                 "checks or failure words, in the same batches.  The shape of dpg's "
                 "shared-memory allreduce to 16 KiB; above that dpg reduce-scatters and moves "
                 "less per rank, so this is a reference for small calls only.  Where the "
                 "host passes cache lines slowly between its CPUs both slow down together.")
    lines.append("")
    lines.append("| op | n | size | cross-CPU ref busbw | dpg / ref |" +
                 "".join(" %s / ref |" % pname[p] for p in peers))
    lines.append("|---|---:|---:|---:|---:|" + "---:|" * len(peers))
    for n in sorted({k[2] for k in rows if k[0] == "limitxfer"}):
        for b in sorted({k[4] for k in rows if k[0] == "limitxfer" and k[2] == n}):
            x, _, xr = cell(("limitxfer", "shm", n, "allreduce", b))
            d, _, _ = cell(("dpg", "shm", n, "allreduce", b))
            s = "| allreduce | %d | %s | %s | %s |" % (n, human(b), fmt(x, xr),
                                                      "%.2f" % (d / x) if d and x else "-")
            s += "".join(" %s |" % ("%.2f" % (o / x) if o and x else "-")
                         for o in (cell((p, "shm", n, "allreduce", b))[0] for p in peers))
            lines.append(s)
    lines.append("")
if any(k[0].startswith("limit") and k[1] == "tcp" for k in rows):
    lines.append("## TCP reference")
    lines.append("")
    lines.append("`coll_bench -m tcplimit`: a ring of loopback TCP connections with nothing "
                 "else; per call each rank sends to the next and takes from the previous the "
                 "bytes the op's ring moves per rank (allreduce 2(n-1)/n of the buffer, "
                 "reduce_scatter and all_gather (n-1)/n, broadcast the buffer along the chain "
                 "from the root), both at once, neither waiting for the other (no forwarding, "
                 "no math, no headers; all_gather then copies the rank's own block into the "
                 "output, as an all_gather out of place must), in the same batches; run "
                 "twice, busy-polling (spin; "
                 "sched_yield between tries where ranks outnumber the CPUs) and sleeping in "
                 "poll(2) (block), the better kept.  A reference for the bytes, not a bound "
                 "on latency: an algorithm moving the same bytes in as few hops can match it "
                 "at small sizes.  The ring reference (`-F`) adds a ring's order: a rank "
                 "sends its own block, then only as many bytes as have come in (broadcast: "
                 "only what has come in), the most a ring of TCP hops does here; an "
                 "algorithm with fewer sequential hops than a ring's (a tree, or a linear "
                 "broadcast over a connection to every rank) can beat it.")
    lines.append("")
    lines.append("| op | n | size | reference busbw (wait) | ring reference (wait) | dpg / ref | "
                 "dpg / ring |" + "".join(" %s / ref | %s / ring |" % (pname[p], pname[p])
                                          for p in peers))
    lines.append("|---|---:|---:|---:|---:|---:|---:|" + "---:|---:|" * len(peers))
    for op in ops:
        for n in sorted({k[2] for k in rows if k[0].startswith("limit") and k[1] == "tcp" and k[3] == op}):
            for b in sorted({k[4] for k in rows if k[0].startswith("limit") and k[1] == "tcp"
                             and k[3] == op and k[2] == n}):
                lim, how = ref("tcp", n, op, b)
                rl, rhow = ref("tcp", n, op, b, "ring")
                d, _, _ = cell(("dpg", "tcp", n, op, b))
                pct = lambda x, y: "%.2f" % (x / y) if x and y else "-"
                s = "| %s | %d | %s | %s | %s | %s | %s |" % (
                    op, n, human(b), "%s (%s)" % (fmt(lim, ""), how) if lim else "-",
                    "%s (%s)" % (fmt(rl, ""), rhow) if rl else "-", pct(d, lim), pct(d, rl))
                for p in peers:
                    o, _, _ = cell((p, "tcp", n, op, b))
                    s += " %s | %s |" % (pct(o, lim), pct(o, rl))
                lines.append(s)
    lines.append("")
if waits:
    impls = ["dpg"] + peers
    lines.append("## CPU time while waiting")
    lines.append("")
    lines.append("Each op at %s once more with the last rank (broadcast: the root) %d ms late: wall / CPU time "
                 "(user + system, getrusage) of the waiting ranks' call in ms, median over "
                 "runs of the median of 3, max over the waiting ranks." % (
                     human(min(k[4] for k in rows)) if rows else "MINB",
                     max(v[0] for vs in waits.values() for v in vs)))
    lines.append("")
    lines.append("| op | transport | n |" + "".join(" %s wall / CPU ms |" % i for i in impls))
    lines.append("|---|---|---:|" + "---:|" * len(impls))
    for op in ops:
        for t, n in sorted({(k[1], k[2]) for k in waits if k[3] == op}, key=lambda c: (c[1], c[0])):
            s = "| %s | %s | %d |" % (op, t, n)
            for i in impls:
                v = waits.get((i, t, n, op))
                s += (" %.1f / %.1f |" % (statistics.median(x[1] for x in v),
                                          statistics.median(x[2] for x in v))) if v else " - |"
            lines.append(s)
    lines.append("")
lines.append("## 64 MiB summary")
lines.append("")
lines.append("| op | transport | n | dpg busbw |" + "".join(" %s busbw | ratio |" % p for p in peers))
lines.append("|---|---|---:|---:|" + "---:|---:|" * len(peers))
for op in ops:
    for t, n, o2 in keys:
        if o2 != op:
            continue
        b = max([k[4] for k in rows if k[3] == op and k[1] == t and k[2] == n] or [0])
        if b < (64 << 20) - 4096:
            continue
        d, _, dr = cell(("dpg", t, n, op, b))
        if d is None:
            continue
        s = "| %s | %s | %d | %s |" % (op, t, n, fmt(d, dr))
        for p in peers:
            o, _, orr = cell((p, t, n, op, b))
            s += " %s | %s |" % (fmt(o, orr), "%.2f" % (d / o) if o else "-")
        lines.append(s)
text = "\n".join(lines) + "\n"
open(os.path.join(out, "table.md"), "w").write(text)
print(text)
