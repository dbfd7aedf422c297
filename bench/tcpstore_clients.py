#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""tcpstore_clients.py - the rendezvous of store_bench.c through PyTorch's
TCPStore (Debian python3-torch 1.13), with the same shape and clock.

  /usr/bin/python3 bench/tcpstore_clients.py -n CLIENTS [-p PROCS] [-a ADDRS] [-t TIMEOUT_S]

The client processes are forked (torch already imported) and their threads
started before the clock; then this process starts the TCPStore server and
releases them.  Client i connects to 127.0.0.(1 + i % ADDRS), sets addr/<i>,
adds 1 to "arrived" (the N-th arrival sets "go"), waits for "go" and gets its
neighbour's address.  Prints one line:
  tcpstore clients=N procs=P rendezvous_s=S ok=K fail=F [error: first error]
"""
import argparse
import ctypes
import os
import resource
import select
import signal
import socket
import struct
import sys
import threading
import time
from datetime import timedelta

import torch.distributed as dist


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def child(first, count, n, addrs, timeout_s, start_fd, ready_w, res_w):
    # die with the parent (PR_SET_PDEATHSIG = 1), however it ends
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    raise_nofile()
    threading.stack_size(256 * 1024)
    go = threading.Event()
    port = [0]
    errors = [None] * count
    stores = [None] * count

    def worker(k):
        i = first + k
        go.wait()
        try:
            c = dist.TCPStore(f"127.0.0.{1 + i % addrs}", port[0], n + 1, False,
                              timedelta(seconds=timeout_s), wait_for_workers=False)
            stores[k] = c
            c.set(f"addr/{i}", f"host{i}:1234")
            if c.add("arrived", 1) == n:
                c.set("go", "1")
            c.wait(["go"])
            j = (i + 1) % n
            if c.get(f"addr/{j}") != f"host{j}:1234".encode():
                errors[k] = "wrong value"
        except Exception as e:  # noqa: BLE001 - record whatever TCPStore raises
            errors[k] = f"client {i}: {type(e).__name__}: {e}"

    made = 0
    ths = []
    try:
        for k in range(count):
            t = threading.Thread(target=worker, args=(k,), daemon=True)
            t.start()
            ths.append(t)
            made += 1
    except RuntimeError as e:
        for k in range(made, count):
            errors[k] = f"could start only {made} of {count} threads: {e}"
    os.write(ready_w, b"r")
    port[0] = struct.unpack("<H", os.read(start_fd, 2))[0]
    go.set()
    for t in ths:
        t.join()
    fails = [e for e in errors if e is not None]
    first_err = (fails[0] if fails else "").replace("\n", " ")[:300]
    os.write(res_w, f"{count - len(fails)} {len(fails)} {first_err}\n".encode())
    os._exit(0)


def note(t0, what):
    if os.environ.get("BENCH_DEBUG"):
        print(f"[{time.monotonic() - t0:8.3f}] {what}", file=sys.stderr, flush=True)


def main():
    tstart = time.monotonic()
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=1024)
    ap.add_argument("-p", type=int, default=8)
    ap.add_argument("-a", type=int, default=8)
    ap.add_argument("-t", type=float, default=60.0)
    a = ap.parse_args()
    raise_nofile()
    # a free port for the server (TCPStore 1.13 cannot report one it picked)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()

    ready_r, ready_w = os.pipe()
    res_r, res_w = os.pipe()
    starts, pids = [], []
    for p in range(a.p):
        first, last = a.n * p // a.p, a.n * (p + 1) // a.p
        sr, sw = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(sw)
            os.close(ready_r)
            os.close(res_r)
            child(first, last - first, a.n, a.a, a.t, sr, ready_w, res_w)
        os.close(sr)
        starts.append(sw)
        pids.append(pid)
    os.close(ready_w)
    os.close(res_w)
    note(tstart, "forked")
    for _ in range(a.p):
        if os.read(ready_r, 1) != b"r":
            sys.exit("tcpstore_clients: a client process died")

    server = dist.TCPStore("127.0.0.1", port, a.n + 1, True,
                           timedelta(seconds=a.t), wait_for_workers=False)
    note(tstart, "clients ready, server up")
    t0 = time.monotonic()
    for sw in starts:
        os.write(sw, struct.pack("<H", port))
        os.close(sw)
    ok = fail = 0
    first_err = ""
    buf = b""
    done = 0
    # a client may connect just before its timeout and then wait a full one
    limit = t0 + 2 * a.t + 10
    while done < a.p:
        left = limit - time.monotonic()
        if left <= 0 or not select.select([res_r], [], [], left)[0]:
            nfds = len(os.listdir("/proc/self/fd"))
            lim = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            first_err = first_err or (
                f"no result after {2 * a.t + 10:.0f} s (hung); the server process holds "
                f"{nfds} of its {lim} file descriptors (TCPStore 1.13 opens 2 "
                f"connections and 1 thread per client)")
            fail += a.n - ok - fail
            break
        chunk = os.read(res_r, 65536)
        if not chunk:
            first_err = first_err or "a client process died"
            fail += a.n - ok - fail
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            k, f, msg = (line.decode().split(" ", 2) + [""])[:3]
            ok += int(k)
            fail += int(f)
            first_err = first_err or msg
            done += 1
            note(tstart, f"result {done}: {line[:200]!r}")
    t1 = time.monotonic()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
    note(tstart, "children reaped")
    print(f"tcpstore clients={a.n} procs={a.p} rendezvous_s={t1 - t0:.3f} ok={ok} "
          f"fail={fail}" + (f" error: {first_err}" if first_err else ""), flush=True)
    del server
    os._exit(0 if fail == 0 else 1)


if __name__ == "__main__":
    main()
