# SPDX-License-Identifier: BSD-3-Clause
# coll_gloo.py - the peer PyTorch users run: ProcessGroupGloo's allreduce,
# reduce_scatter, all_gather and broadcast, measured exactly as coll_bench.c
# and coll_mpi.c measure (same sizes, warm-up, calibration, barrier-started
# batches, max over ranks, nccl-tests bus factors) so it prints the same CSV.
#
# Usage: python coll_gloo.py -n RANKS [-b MIN] [-e MAX] [-f FACTOR] [-r REPS]
#          [-t TARGET_MS] [-c OPS] [-l LABEL] [-W MS] [-P]
# -W MS: the late-peer measurement of coll_bench.c (WAIT lines: the wall and
# CPU time, user + system of the whole process, of a call whose last rank,
# or broadcast's root, comes MS ms late; median of 3, max over the waiting
# ranks).
# Ranks are processes on this host joined through a TCPStore on 127.0.0.1;
# gloo's pairs run over loopback TCP (gloo has no shared-memory transport, so
# this is what a one-node PyTorch CPU job gets).  Each rank is pinned to CPU
# rank % ncpus unless -P.  float32 sum, out of place, results checked once per
# size.  Output: CSV,label,op,n,bytes,iters,t_med_us,t_min_us,t_max_us,algbw,
# busbw,busbw_lo,busbw_hi,ok   (GB/s = 1e9 B/s), and "skip: ..." lines for
# an op this torch's gloo does not support.
import argparse
import math
import os
import resource
import socket
import sys
import time

OPS = ["allreduce", "reduce_scatter", "allgather", "bcast"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bus_factor(op, n):
    if op == "allreduce":
        return 2.0 * (n - 1) / n
    return 1.0 if op == "bcast" else (n - 1) / n


def fill(torch, rank, n, op, count):
    pat = torch.arange(count, dtype=torch.int64) % 7
    return (pat + (rank + 1)).to(torch.float32)


def expected(torch, rank, n, op, count):
    pat = (torch.arange(count, dtype=torch.int64) % 7).to(torch.float32)
    rsum = float(n * (n + 1) // 2)
    rc = count // n
    if op == "allreduce":
        return rsum + n * pat
    if op == "reduce_scatter":
        return rsum + n * pat[rank * rc:(rank + 1) * rc]
    if op == "allgather":
        return torch.cat([(q + 1) + pat[:rc] for q in range(n)])
    return 1 + pat  # bcast from rank 0


class Runner:
    def __init__(self, torch, dist, rank, n):
        self.torch, self.dist, self.rank, self.n = torch, dist, rank, n

    def buffers(self, op, count):
        t = self.torch
        s = fill(t, self.rank, self.n, op, count)
        rc = count // self.n
        if op == "reduce_scatter":
            r = t.empty(rc, dtype=t.float32)
        elif op == "allgather":
            s = s[:rc].clone()
            r = t.empty(count, dtype=t.float32)
        else:
            r = t.empty(count, dtype=t.float32)
        return s, r

    def run(self, op, s, r):
        d = self.dist
        if op == "allreduce":
            r.copy_(s)
            d.all_reduce(r)
        elif op == "reduce_scatter":
            d.reduce_scatter_tensor(r, s)
        elif op == "allgather":
            d.all_gather_into_tensor(r, s)
        else:
            if self.rank == 0:
                r.copy_(s)
            d.broadcast(r, 0)

    def batch(self, op, s, r, iters):
        t = self.torch
        self.dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            self.run(op, s, r)
        x = t.tensor([(time.perf_counter() - t0) / iters], dtype=t.float64)
        self.dist.all_reduce(x, op=self.dist.ReduceOp.MAX)
        return float(x[0])

    def supported(self, op):
        """One tiny call; every rank agrees (an unsupported op raises on all)."""
        s, r = self.buffers(op, self.n * 4)
        try:
            self.run(op, s, r)
            return None
        except (RuntimeError, NotImplementedError, ValueError) as e:
            return str(e).splitlines()[0][:160]


def op_count(op, nbytes, n):
    """Elements of op at nbytes: reduce_scatter and all_gather in equal
    blocks (a multiple of n), allreduce and broadcast as asked."""
    count = nbytes // 4
    return count - count % n if op in ("reduce_scatter", "allgather") else count


def one_size(rn, a, op, nbytes):
    torch, n, rank = rn.torch, rn.n, rn.rank
    count = op_count(op, nbytes, n)
    b = count * 4.0
    s, r = rn.buffers(op, count)
    rn.run(op, s, r)
    bad = torch.tensor([0 if torch.equal(r, expected(torch, rank, n, op, count)) else 1])
    rn.dist.all_reduce(bad)
    nwarm = 2 if nbytes >= 16 << 20 else 10
    for _ in range(nwarm):
        rn.run(op, s, r)
    t1 = rn.batch(op, s, r, 1)
    cal = min(100, max(1, math.ceil(2e-3 / (t1 if t1 > 0 else 1e-6))))
    t1 = rn.batch(op, s, r, cal)
    iters = min(2000, max(1, int(a.t * 1e-3 / (t1 if t1 > 0 else 1e-6))))
    ts = sorted(rn.batch(op, s, r, iters) for _ in range(a.r))
    k = len(ts)
    tmed = ts[k // 2] if k % 2 else 0.5 * (ts[k // 2 - 1] + ts[k // 2])
    tmin, tmax = ts[0], ts[-1]
    bf = bus_factor(op, n)
    alg = b / tmed / 1e9
    if rank == 0:
        print("CSV,%s,%s,%d,%.0f,%d,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%.4f,%d" % (
            a.l, op, n, b, iters, tmed * 1e6, tmin * 1e6, tmax * 1e6, alg, alg * bf,
            b / tmax / 1e9 * bf, b / tmin / 1e9 * bf, 0 if int(bad[0]) else 1), flush=True)
        if int(bad[0]):
            print("CHECK FAILED %s bytes=%d" % (op, nbytes), file=sys.stderr)


def cpu_s():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def late_peer(rn, a, op):
    """One call of op at a.b bytes with one rank a.W ms late (the last;
    broadcast: the root), 3 times."""
    torch, n, rank = rn.torch, rn.n, rn.rank
    count = op_count(op, a.b, n)
    s, r = rn.buffers(op, count)
    walls, cpus = [], []
    for _ in range(3):
        rn.dist.barrier()
        if rank == (0 if op == "bcast" else n - 1):
            time.sleep(a.W / 1000.0)
            w = u = 0.0
            rn.run(op, s, r)
        else:
            w, u = time.perf_counter(), cpu_s()
            rn.run(op, s, r)
            w, u = time.perf_counter() - w, cpu_s() - u
        x = torch.tensor([w, u], dtype=torch.float64)
        rn.dist.all_reduce(x, op=rn.dist.ReduceOp.MAX)
        walls.append(float(x[0]))
        cpus.append(float(x[1]))
    if rank == 0:
        print("WAIT,%s,%s,%d,%d,%d,%.3f,%.3f" % (a.l, op, n, count * 4, a.W,
              sorted(walls)[1] * 1e3, sorted(cpus)[1] * 1e3), flush=True)


def rank_main(rank, a, port):
    if not a.P:
        ncpu = os.cpu_count() or 1
        if a.n <= ncpu:
            os.sched_setaffinity(0, {rank % ncpu})
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, a.n, rank == 0, use_libuv=True)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=a.n)
    rn = Runner(torch, dist, rank, a.n)
    if rank == 0:
        print("# torch %s gloo | nranks=%d | reps=%d target_ms=%.0f | GB/s = 1e9 B/s" % (
            torch.__version__, a.n, a.r, a.t), flush=True)
    ok = []
    for op in a.c.split(","):
        why = rn.supported(op)
        if why is not None:
            if rank == 0:
                print("skip: gloo %s: not supported by this torch: %s" % (op, why), flush=True)
            continue
        ok.append(op)
        nbytes = a.b
        while nbytes <= a.e:
            one_size(rn, a, op, nbytes)
            nbytes *= a.f
    for op in ok if a.W > 0 else []:
        late_peer(rn, a, op)
    dist.barrier()
    sys.stdout.flush()
    # torch 2.15's gloo teardown can abort at interpreter exit (pytorch#190489)
    os._exit(0)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("-n", type=int, default=2)
    p.add_argument("-b", type=int, default=4096)
    p.add_argument("-e", type=int, default=64 << 20)
    p.add_argument("-f", type=int, default=4)
    p.add_argument("-r", type=int, default=7)
    p.add_argument("-t", type=float, default=50.0)
    p.add_argument("-c", default=",".join(OPS))
    p.add_argument("-l", default="gloo")
    p.add_argument("-W", type=int, default=0)
    p.add_argument("-P", action="store_true")
    a = p.parse_args()
    bad = [o for o in a.c.split(",") if o not in OPS]
    if a.n < 2 or a.b < 4 or a.e < a.b or a.f < 2 or a.r < 1 or bad:
        p.error("need -n >= 2, 4 <= -b <= -e, -f >= 2, -r >= 1, -c from %s" % ",".join(OPS))
    port = free_port()
    pids = []
    for rank in range(a.n):
        pid = os.fork()
        if pid == 0:
            try:
                rank_main(rank, a, port)
            except BaseException as e:  # report, then leave without teardown
                print("coll_gloo: rank %d: %s" % (rank, e), file=sys.stderr, flush=True)
                os._exit(1)
        pids.append(pid)
    rc = 0
    for pid in pids:
        _, st = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(st) != 0:
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
