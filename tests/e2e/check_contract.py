#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""check_contract.py - check what the tasks of ONE srun step received.

Reads the "DPGE2E" lines that tests/e2e/taskenv.sh printed (one per task;
other lines are ignored) from FILE (or stdin) and checks dpg's contract:

  RANK = SLURM_PROCID, ranks 0..N-1 unique, WORLD_SIZE = N (the step's task
  count), LOCAL_RANK = SLURM_LOCALID, LOCAL_WORLD_SIZE = this step's tasks on
  the node, NODE_RANK = GROUP_RANK = SLURM_NODEID, GROUP_WORLD_SIZE = number
  of nodes, ROLE_RANK = RANK, ROLE_WORLD_SIZE = WORLD_SIZE, ROLE_NAME set,
  MASTER_ADDR = the node of rank 0 (or --master-addr), MASTER_PORT the same
  in every task and inside the port range, every DPG_* twin equal,
  DPG_JOB_ID/DPG_STEP_ID = Slurm's, JAX_COORDINATOR_ADDRESS = MASTER_ADDR:MASTER_PORT,
  no TORCHELASTIC_* per-launch variable (JAX_LOCAL_DEVICE_IDS with G > 0).

Binding (topology-aware plugin): every task with the contract must also have
DPG_CPUS, DPG_NUMA and DPG_NICS; with --free-cpus (the Cpus_allowed_list of a
task WITHOUT dpg) the task's real affinity is checked: bind=closest -> it is
DPG_CPUS (intersected with the free CPUs; when that is empty the task stays
unbound and the stepd printed "dpg: task N: none of its CPUs ..."), and
OMP_NUM_THREADS is the size of DPG_CPUS; bind=none -> unbound, no
OMP_NUM_THREADS.  With G > 0: CUDA_VISIBLE_DEVICES (ROCR_... on AMD),
CUDA_DEVICE_ORDER=PCI_BUS_ID, DPG_GPU_VISIBILITY, G distinct DPG_GPUS per task
and distinct between the tasks of a node (unless --shared); with --topo
FIXTURE.xml the bus ids are mapped to CUDA's PCI-order indices and
CUDA_VISIBLE_DEVICES is checked exactly (isolate: only the task's own GPUs;
ordered: the same list in every task of the node, the task's own GPUs at
LOCAL_RANK*G+k); NCCL_IB_HCA is identical in the tasks of a node and names
the RDMA NICs they use; UCX_NET_DEVICES is the first NIC + ":1".  --ifname IF:
GLOO_SOCKET_IFNAME=IF, NCCL_SOCKET_IFNAME==IF.  --keep NAME=VALUE: a value the
user exported survived.  --verbose also checks the " | task N: gpus ...
(visible ...) nics ... cpus ... numa N" tail of each line.

With --plan DPG_PLAN it also asks dpg-plan (the library's own planner) for
the same step and compares every task's variables with its answer.

--none checks the opposite: no task got any contract variable.
Prints one summary line; exits 1 listing every violation.
"""
import argparse
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

CONTRACT = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK",
            "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE",
            "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "JAX_COORDINATOR_ADDRESS"]
# torchrun's per-launch variables: never in a dpg task, removed if inherited
TORCHELASTIC = ["TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID",
                "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
                "TORCHELASTIC_ERROR_FILE"]
DPG = ["DPG_CONTRACT", "DPG_RANK", "DPG_WORLD_SIZE", "DPG_LOCAL_RANK",
       "DPG_LOCAL_WORLD_SIZE", "DPG_NODE_RANK", "DPG_NUM_NODES",
       "DPG_MASTER_ADDR", "DPG_MASTER_PORT", "DPG_JOB_ID", "DPG_STEP_ID",
       "DPG_GPUS_PER_TASK"]
# exported with a node plan (GPU variables only when G > 0)
BINDING = ["DPG_CPUS", "DPG_NUMA", "DPG_NICS"]
# never set by anyone but dpg in this lab (--none: must be absent)
BINDING_ONLY_DPG = ["CUDA_DEVICE_ORDER", "DPG_GPU_VISIBILITY", "DPG_GPUS", "DPG_NICS",
                    "DPG_CPUS", "DPG_NUMA", "UCX_NET_DEVICES", "NCCL_IB_HCA",
                    "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "OMP_NUM_THREADS",
                    "JAX_LOCAL_DEVICE_IDS"]
# compared with dpg-plan --topology when its answer has them (the CPU ones
# depend on the cores Slurm gave the step, which dpg-plan does not know)
PLAN_BINDING = ["CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
                "DPG_GPU_VISIBILITY", "DPG_GPUS", "DPG_NICS", "UCX_NET_DEVICES",
                "NCCL_IB_HCA", "JAX_LOCAL_DEVICE_IDS"]
TWINS = [("RANK", "DPG_RANK"), ("WORLD_SIZE", "DPG_WORLD_SIZE"),
         ("LOCAL_RANK", "DPG_LOCAL_RANK"),
         ("LOCAL_WORLD_SIZE", "DPG_LOCAL_WORLD_SIZE"),
         ("NODE_RANK", "DPG_NODE_RANK"), ("GROUP_WORLD_SIZE", "DPG_NUM_NODES"),
         ("MASTER_ADDR", "DPG_MASTER_ADDR"), ("MASTER_PORT", "DPG_MASTER_PORT")]


def parse(stream):
    tasks = []
    for line in stream:
        line = line.rstrip("\n")
        if not line.startswith("DPGE2E\t"):
            continue
        d = {}
        for f in line.split("\t")[1:]:
            k, _, v = f.partition("=")
            d[k] = v
        tasks.append(d)
    return tasks


def expand(expr):
    """Minimal Slurm hostlist expansion (enough for n[1-3],x[01-02,5])."""
    out = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", expr):
        m = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", part)
        if not m:
            out.append(part)
            continue
        pre, rng, post = m.groups()
        for r in rng.split(","):
            lo, _, hi = r.partition("-")
            hi = hi or lo
            w = len(lo)
            for i in range(int(lo), int(hi) + 1):
                out += [pre + str(i).zfill(w) + x for x in expand(post)] if post else [pre + str(i).zfill(w)]
    return out


def cpulist(s):
    """'0-3,8' -> {0,1,2,3,8}"""
    out = set()
    for part in (s or "").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def fmt_cpus(cpus):
    """{0,1,2,8} -> '0-2,8'"""
    out, c = [], sorted(cpus)
    i = 0
    while i < len(c):
        j = i
        while j + 1 < len(c) and c[j + 1] == c[j] + 1:
            j += 1
        out.append(str(c[i]) if i == j else f"{c[i]}-{c[j]}")
        i = j + 1
    return ",".join(out)


def load_topo(path):
    """GPUs of an hwloc XML in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID),
    the PCIe switch (nearest bridge shared) of each, and the OpenFabrics NICs."""
    root = ET.parse(path).getroot()
    parent = {c: p for p in root.iter() for c in p}
    gpus, ofed = [], set()
    for o in root.iter("object"):
        if o.get("type") == "PCIDev":
            cls, _, rest = (o.get("pci_type") or "").partition(" ")
            vendor = rest[1:5] if rest.startswith("[") else ""
            if cls[:2] == "03" and vendor in ("10de", "1002"):
                chain, p = [], parent.get(o)
                while p is not None:
                    chain.append(p)
                    p = parent.get(p)
                gpus.append((o.get("pci_busid").lower(), chain))
        if o.get("type") == "OSDev" and o.get("osdev_type") == "3":
            ofed.add(o.get("name"))
    gpus.sort()
    return [b for b, _ in gpus], {b: c for b, c in gpus}, ofed


def close(chains, a, b):
    """True if the nearest common ancestor of two GPUs is a PCI bridge
    (same PCIe switch), not a package or the machine."""
    ca, cb = chains[a], chains[b]
    for x in ca:
        if x in cb:
            return x.get("type") == "Bridge"
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?")
    ap.add_argument("--tasks", type=int, help="expected WORLD_SIZE (number of task lines)")
    ap.add_argument("--nodes", type=int, help="expected number of nodes of the step")
    ap.add_argument("--lws", help="expected LOCAL_WORLD_SIZE per node, in node order, e.g. 3,2")
    ap.add_argument("--cyclic", action="store_true", help="expect rank r on node index r %% nodes")
    ap.add_argument("--block", action="store_true", help="expect ranks in node order (block)")
    ap.add_argument("--master-node", help="expected node running rank 0")
    ap.add_argument("--master-addr", help="expected MASTER_ADDR (default: node of rank 0)")
    ap.add_argument("--port", type=int, help="expected MASTER_PORT")
    ap.add_argument("--port-range", default="20000-32767", help="MASTER_PORT must lie inside")
    ap.add_argument("--gpus", help="expected DPG_GPUS_PER_TASK")
    ap.add_argument("--resolve", action="store_true", help="MASTER_ADDR must resolve in every task")
    ap.add_argument("--none", action="store_true", help="expect NO contract variable at all")
    ap.add_argument("--plan", help="dpg-plan binary: cross-check every variable")
    ap.add_argument("--conf", action="append", default=[], help="plugstack argument for dpg-plan")
    ap.add_argument("--plan-json", help="dpg-plan --json output made INSIDE the step: cross-check")
    ap.add_argument("--stderr", help="the step's stderr (for --verbose)")
    ap.add_argument("--verbose", action="store_true",
                    help="--dpg-verbose: exactly one correct 'dpg: rank=...' line per task on --stderr")
    ap.add_argument("--port-source", help="expected port_source= in the verbose lines")
    ap.add_argument("--json-out", help="write the parsed tasks here")
    ap.add_argument("--free-cpus", help="Cpus_allowed_list of a task without dpg (checks affinity; '' = don't)")
    ap.add_argument("--bind", choices=["closest", "none"], default="closest",
                    help="expected binding mode (default closest)")
    ap.add_argument("--ifname", help="expected GLOO_SOCKET_IFNAME (NCCL_SOCKET_IFNAME '=IF'); '' = neither")
    ap.add_argument("--topo", help="the hwloc XML the plugin used (topology_xml=): exact GPU checks")
    ap.add_argument("--visibility", choices=["ordered", "isolate"], default="ordered")
    ap.add_argument("--disjoint", action="store_true",
                    help="the CPUs of the tasks of a node are non-empty and pairwise disjoint")
    ap.add_argument("--same-plan", action="store_true",
                    help="every node got the same plan (per local rank)")
    ap.add_argument("--close", action="store_true", help="each task's GPUs share a PCIe switch (--topo)")
    ap.add_argument("--shared", action="store_true", help="GPUs may serve several tasks (gpu_sharing)")
    ap.add_argument("--keep", action="append", default=[], metavar="NAME=VALUE",
                    help="a variable the user exported, kept in every task")
    ap.add_argument("--inherited", action="append", default=[], metavar="NAME",
                    help="NAME may come from an enclosing step: not checked")
    a = ap.parse_args()

    with (open(a.file) if a.file else sys.stdin) as f:
        tasks = parse(f)
    errs = []

    def err(msg):
        if len(errs) < 40:
            errs.append(msg)

    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(tasks, f)
    if not tasks:
        print("no task output (no DPGE2E lines)")
        return 1
    if a.tasks is not None and len(tasks) != a.tasks:
        err(f"{len(tasks)} task lines, expected {a.tasks}")
    step_ids = {(t.get("SLURM_JOB_ID"), t.get("SLURM_STEP_ID")) for t in tasks}
    if len(step_ids) != 1:
        err(f"lines from several steps: {sorted(step_ids)}")

    if a.none:
        for t in tasks:
            keep = {kv.partition("=")[0] for kv in a.keep}
            got = [k for k in CONTRACT + DPG + TORCHELASTIC + BINDING_ONLY_DPG
                   if k in t and k not in keep]
            extra = [x for x in t.get("E2E_DPG_VARS", "").split(",") if x]
            if got or extra:
                err(f"task {t.get('SLURM_PROCID')}: unexpected {sorted(set(got + extra))}")
            if a.free_cpus and "E2E_CPUS_ALLOWED" in t and \
                    cpulist(t["E2E_CPUS_ALLOWED"]) != cpulist(a.free_cpus):
                err(f"task {t.get('SLURM_PROCID')}: bound to CPUs {t['E2E_CPUS_ALLOWED']} "
                    f"without dpg's contract (a task without dpg has {a.free_cpus})")
        if errs:
            print("\n".join(errs))
            return 1
        j, s = next(iter(step_ids))
        what = f"step {j}.{s}" if s is not None else f"job {j} (not a step)"
        print(f"{what}: {len(tasks)} tasks, no contract variables (as expected)")
        return 0

    for t in tasks:
        miss = [k for k in CONTRACT + DPG if k not in t]
        if miss:
            err(f"task SLURM_PROCID={t.get('SLURM_PROCID')}: missing {miss}")
        for k in TORCHELASTIC:
            if k in t:
                err(f"task {t.get('SLURM_PROCID')}: {k} is set (inherited, not removed)")
        if "MASTER_ADDR" in t and "MASTER_PORT" in t:
            host = f"[{t['MASTER_ADDR']}]" if ":" in t["MASTER_ADDR"] else t["MASTER_ADDR"]
            if t.get("JAX_COORDINATOR_ADDRESS") != f"{host}:{t['MASTER_PORT']}":
                err(f"task {t.get('SLURM_PROCID')}: JAX_COORDINATOR_ADDRESS="
                    f"{t.get('JAX_COORDINATOR_ADDRESS')}, expected {host}:{t['MASTER_PORT']}")
    if errs:
        print("\n".join(errs))
        return 1

    n = len(tasks)
    byrank = {}
    for t in tasks:
        p = t["SLURM_PROCID"]
        if t["RANK"] != p:
            err(f"RANK={t['RANK']} but SLURM_PROCID={p}")
        if t["RANK"] in byrank:
            err(f"RANK {t['RANK']} appears twice")
        byrank[t["RANK"]] = t
    if sorted(byrank, key=int) != [str(i) for i in range(n)]:
        err(f"ranks are {sorted(byrank, key=int)}, expected 0..{n - 1}")

    # Slurm's own view of the step (SLURMD_NODENAME, SLURM_LOCALID, SLURM_NODEID)
    nodes = {}
    for t in tasks:
        nodes.setdefault(t["SLURMD_NODENAME"], []).append(t)
    step_nodes = expand(tasks[0].get("SLURM_STEP_NODELIST", ""))
    if sorted(nodes) != sorted(step_nodes):
        err(f"tasks ran on {sorted(nodes)} but SLURM_STEP_NODELIST={tasks[0].get('SLURM_STEP_NODELIST')}")
    nnodes = len(nodes)
    if a.nodes is not None and nnodes != a.nodes:
        err(f"step ran on {nnodes} nodes, expected {a.nodes}")
    rank0 = byrank.get("0")
    master_node = rank0["SLURMD_NODENAME"] if rank0 else None
    exp_addr = a.master_addr or master_node
    if a.master_node and master_node != a.master_node:
        err(f"rank 0 ran on {master_node}, expected {a.master_node}")

    for t in tasks:
        r = t["RANK"]
        node = t["SLURMD_NODENAME"]
        local = nodes[node]
        chk = [("WORLD_SIZE", str(n)), ("LOCAL_RANK", t["SLURM_LOCALID"]),
               ("LOCAL_WORLD_SIZE", str(len(local))), ("NODE_RANK", t["SLURM_NODEID"]),
               ("GROUP_RANK", t["SLURM_NODEID"]), ("GROUP_WORLD_SIZE", str(nnodes)),
               ("ROLE_RANK", r), ("ROLE_WORLD_SIZE", str(n)), ("MASTER_ADDR", exp_addr),
               ("DPG_JOB_ID", t["SLURM_JOB_ID"]), ("DPG_STEP_ID", t["SLURM_STEP_ID"])]
        if a.gpus is not None:
            chk.append(("DPG_GPUS_PER_TASK", a.gpus))
        if a.port is not None:
            chk.append(("MASTER_PORT", str(a.port)))
        for k, v in chk:
            if t.get(k) != v:
                err(f"rank {r} on {node}: {k}={t.get(k)}, expected {v}")
        for k, d in TWINS:
            if t.get(k) != t.get(d):
                err(f"rank {r}: {k}={t.get(k)} but {d}={t.get(d)}")
        if not t.get("ROLE_NAME"):
            err(f"rank {r}: ROLE_NAME is empty")
        if not t.get("DPG_CONTRACT"):
            err(f"rank {r}: DPG_CONTRACT is empty")
        if step_nodes and node in step_nodes and t["SLURM_NODEID"] != str(step_nodes.index(node)):
            err(f"rank {r}: SLURM_NODEID={t['SLURM_NODEID']} but {node} is #{step_nodes.index(node)} of the step")
        if a.resolve:
            ip = t.get("E2E_RESOLVED", "FAILED")
            own = (rank0 or {}).get("E2E_ADDRS", "").split()
            if ip == "FAILED":
                err(f"rank {r} on {node}: MASTER_ADDR={t.get('MASTER_ADDR')} does not resolve")
            elif not ip.startswith("127.") and rank0 and ip not in own:
                err(f"rank {r}: MASTER_ADDR={t.get('MASTER_ADDR')} resolves to {ip}, "
                    f"not an address of rank 0's host ({own})")
    for node, local in nodes.items():
        lr = sorted(int(t["SLURM_LOCALID"]) for t in local)
        if lr != list(range(len(local))):
            err(f"{node}: local ranks {lr}")
    if a.lws:
        want = [int(x) for x in a.lws.split(",")]
        got = [len(nodes.get(x, [])) for x in step_nodes]
        if got != want:
            err(f"tasks per node {got}, expected {want}")
    if a.cyclic:
        for t in tasks:
            if int(t["SLURM_NODEID"]) != int(t["RANK"]) % nnodes:
                err(f"cyclic: rank {t['RANK']} on node #{t['SLURM_NODEID']}")

    if a.block:
        order = [int(byrank[str(i)]["SLURM_NODEID"]) for i in range(n) if str(i) in byrank]
        if order != sorted(order):
            err(f"block: node ids by rank {order}")

    ports = {t["MASTER_PORT"] for t in tasks}
    addrs = {t["MASTER_ADDR"] for t in tasks}
    if len(ports) != 1:
        err(f"MASTER_PORT differs between tasks: {sorted(ports)}")
    if len(addrs) != 1:
        err(f"MASTER_ADDR differs between tasks: {sorted(addrs)}")
    port = next(iter(ports))
    lo, hi = (int(x) for x in a.port_range.split("-"))
    if a.port is None and not (port.isdigit() and lo <= int(port) <= hi):
        err(f"MASTER_PORT={port} outside {lo}-{hi}")

    # ---------------------------------------------------------------- binding
    keep = dict(kv.partition("=")[::2] for kv in a.keep)
    for t in tasks:
        for k, v in list(keep.items()):
            if t.get(k) != v:
                err(f"rank {t['RANK']}: {k}={t.get(k)}, but the user exported {k}={v}")
    keep.update({k: None for k in a.inherited})
    topo_gpus, topo_chains, topo_ofed = load_topo(a.topo) if a.topo else (None, None, None)
    warn_lines = []
    if a.stderr:
        warn_lines = [l.rstrip("\n") for l in open(a.stderr) if "dpg: task " in l]
    free = cpulist(a.free_cpus) if a.free_cpus else None
    unbound_expected = 0
    bind_note = []
    for t in tasks:
        r = t["RANK"]
        miss = [k for k in BINDING if k not in t]
        if miss:
            err(f"rank {r}: contract without binding variables {miss}")
            continue
        cpus = cpulist(t["DPG_CPUS"])
        if not cpus:
            err(f"rank {r}: DPG_CPUS is empty")
        if not re.fullmatch(r"-1|\d+", t["DPG_NUMA"]):
            err(f"rank {r}: DPG_NUMA={t['DPG_NUMA']!r} is not a NUMA node index")
        if a.ifname is not None:
            for k, want in (("GLOO_SOCKET_IFNAME", a.ifname or None),
                            ("NCCL_SOCKET_IFNAME", "=" + a.ifname if a.ifname else None)):
                if k not in keep and t.get(k) != want:
                    err(f"rank {r}: {k}={t.get(k)}, expected {want}")
        allowed = cpulist(t.get("E2E_CPUS_ALLOWED")) if "E2E_CPUS_ALLOWED" in t else None
        if a.bind == "closest":
            if "OMP_NUM_THREADS" not in keep and t.get("OMP_NUM_THREADS") != str(len(cpus)):
                err(f"rank {r}: OMP_NUM_THREADS={t.get('OMP_NUM_THREADS')}, but DPG_CPUS="
                    f"{t['DPG_CPUS']} has {len(cpus)} CPUs")
            if free is not None and allowed is not None:
                want = cpus & free
                if not want:
                    unbound_expected += 1
                    pat = f"dpg: task {t['LOCAL_RANK']}: none of its CPUs {t['DPG_CPUS']} is available"
                    if allowed != free:
                        err(f"rank {r}: none of DPG_CPUS={t['DPG_CPUS']} exists here, so it must "
                            f"stay unbound ({a.free_cpus}), but runs on {t['E2E_CPUS_ALLOWED']}")
                    if a.stderr and not any(pat in l and f"-{t['SLURMD_NODENAME']}:" in l
                                            for l in warn_lines):
                        err(f"rank {r}: not bindable, but no '{pat}' line from {t['SLURMD_NODENAME']}")
                elif allowed != want:
                    err(f"rank {r} on {t['SLURMD_NODENAME']}: Cpus_allowed_list="
                        f"{t['E2E_CPUS_ALLOWED']}, expected {fmt_cpus(want)} (DPG_CPUS="
                        f"{t['DPG_CPUS']} on CPUs {a.free_cpus})")
        else:
            if "OMP_NUM_THREADS" not in keep and "OMP_NUM_THREADS" in t:
                err(f"rank {r}: bind=none but OMP_NUM_THREADS={t['OMP_NUM_THREADS']}")
            if free is not None and allowed is not None and allowed != free:
                err(f"rank {r}: bind=none but bound to {t['E2E_CPUS_ALLOWED']} (free: {a.free_cpus})")
    if a.stderr and free is not None and a.bind == "closest" and len(warn_lines) != unbound_expected:
        err(f"{len(warn_lines)} 'dpg: task N: ...' lines on stderr, expected {unbound_expected}: "
            f"{warn_lines[:3]}")
    if a.bind == "none" and a.stderr and warn_lines:
        err(f"bind=none but stderr has {warn_lines[:2]}")

    for node, local in nodes.items():
        if errs:
            break
        if a.bind == "none" and len({t["DPG_CPUS"] for t in local}) != 1:
            err(f"{node}: bind=none, but the tasks have different DPG_CPUS "
                f"{sorted({t['DPG_CPUS'] for t in local})}")
        if a.disjoint:
            sets = [(t["RANK"], cpulist(t["DPG_CPUS"])) for t in local]
            for i, (ri, si) in enumerate(sets):
                for rj, sj in sets[i + 1:]:
                    if si & sj:
                        err(f"{node}: ranks {ri} and {rj} share CPUs {fmt_cpus(si & sj)}")
            bind_note.append(f"{node}: " + " | ".join(
                f"r{t['RANK']} cpus {t.get('E2E_CPUS_ALLOWED')} omp {t.get('OMP_NUM_THREADS')}"
                for t in sorted(local, key=lambda x: int(x["LOCAL_RANK"]))))
        hca = {t.get("NCCL_IB_HCA") for t in local}
        if "NCCL_IB_HCA" not in keep and len(hca) != 1:
            err(f"{node}: NCCL_IB_HCA differs between tasks: {sorted(map(str, hca))}")
        hca = next(iter(hca))
        if topo_ofed is not None and "NCCL_IB_HCA" not in keep:
            used = [x for t in local for x in t["DPG_NICS"].split(",") if x in topo_ofed]
            want = ("=" + ",".join(sorted(set(used), key=used.index))) if used else None
            got = set(hca.lstrip("=").split(",")) if hca else set()
            if (hca is None) != (want is None) or got != set(used) or \
                    (hca is not None and not hca.startswith("=")):
                err(f"{node}: NCCL_IB_HCA={hca}, expected the RDMA NICs of its tasks ({want})")
        for t in local:
            first = t["DPG_NICS"].split(",")[0]
            if "UCX_NET_DEVICES" in keep:
                continue
            if topo_ofed is not None:
                want = first + ":1" if first in topo_ofed else None
            else:
                want = first + ":1" if "UCX_NET_DEVICES" in t else None
            if t.get("UCX_NET_DEVICES") != want:
                err(f"rank {t['RANK']}: UCX_NET_DEVICES={t.get('UCX_NET_DEVICES')}, expected {want}")

    # GPUs
    g = int(tasks[0].get("DPG_GPUS_PER_TASK", "0") or 0)
    gpu_note = []
    for t in tasks if g == 0 else []:
        bad = [k for k in ("DPG_GPUS", "DPG_GPU_VISIBILITY", "CUDA_DEVICE_ORDER") if k in t]
        if bad:
            err(f"rank {t['RANK']}: G=0 but {bad} set")
    for node, local in nodes.items() if g > 0 else []:
        if errs:
            break
        local = sorted(local, key=lambda x: int(x["LOCAL_RANK"]))
        owns = {}
        for t in local:
            r = t["RANK"]
            var = "ROCR_VISIBLE_DEVICES" if "ROCR_VISIBLE_DEVICES" in t and \
                "CUDA_DEVICE_ORDER" not in t else "CUDA_VISIBLE_DEVICES"
            t["_vis"] = t.get(var)
            bus = [b.lower() for b in t.get("DPG_GPUS", "").split(",") if b]
            if t["_vis"] is None:
                err(f"rank {r}: G={g} but no {var}")
            if var == "CUDA_VISIBLE_DEVICES" and t.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
                err(f"rank {r}: CUDA_DEVICE_ORDER={t.get('CUDA_DEVICE_ORDER')}, expected PCI_BUS_ID")
            if t.get("DPG_GPU_VISIBILITY") != a.visibility:
                err(f"rank {r}: DPG_GPU_VISIBILITY={t.get('DPG_GPU_VISIBILITY')}, expected {a.visibility}")
            if len(bus) != g or len(set(bus)) != g:
                err(f"rank {r}: DPG_GPUS={t.get('DPG_GPUS')} is not {g} distinct GPUs")
            owns[r] = bus
            if topo_gpus is not None:
                unknown = [b for b in bus if b not in topo_gpus]
                if unknown:
                    err(f"rank {r}: DPG_GPUS has {unknown}, not GPUs of {a.topo}")
                    continue
                t["_own"] = [topo_gpus.index(b) for b in bus]
                if a.close and any(not close(topo_chains, bus[0], b) for b in bus[1:]):
                    err(f"rank {r}: its GPUs {bus} do not share a PCIe switch")
            # Slurm's GRES: the task's GPUs must be among the step's allocated ones
            if topo_gpus is not None:
                alloc = set()
                for x in local:
                    if x.get("SLURM_STEP_GPUS"):
                        alloc |= cpulist(x["SLURM_STEP_GPUS"])
                if alloc and not set(t["_own"]) <= alloc:
                    err(f"rank {r}: dpg gave GPUs {t['_own']} ({t['DPG_GPUS']}), Slurm allocated "
                        f"{fmt_cpus(alloc)} (SLURM_STEP_GPUS)")
        if errs:
            continue
        allbus = [b for t in local for b in owns[t["RANK"]]]
        if not a.shared and len(set(allbus)) != len(allbus):
            err(f"{node}: tasks share GPUs: {[owns[t['RANK']] for t in local]}")
        if topo_gpus is None:
            continue
        node_gpus = sorted({x for t in local for x in t["_own"]})
        for t in local:
            r, lr = t["RANK"], int(t["LOCAL_RANK"])
            try:
                vis = [int(x) for x in t["_vis"].split(",")]
            except ValueError:
                err(f"rank {r}: visible devices {t['_vis']!r} are not indices")
                continue
            pos = [vis.index(o) for o in t["_own"] if o in vis]
            if t.get("JAX_LOCAL_DEVICE_IDS") != ",".join(map(str, pos)):
                err(f"rank {r}: JAX_LOCAL_DEVICE_IDS={t.get('JAX_LOCAL_DEVICE_IDS')}, its GPUs "
                    f"{t['_own']} are at {pos} of {t['_vis']}")
            if a.visibility == "isolate":
                if vis != t["_own"]:
                    err(f"rank {r}: isolate: sees {t['_vis']}, its GPUs are {t['_own']} ({t['DPG_GPUS']})")
            else:
                if len(set(vis)) != len(vis) or sorted(vis) != node_gpus:
                    err(f"rank {r}: ordered: sees {t['_vis']}, the node's step GPUs are {node_gpus}")
                elif not a.shared and vis[lr * g:lr * g + g] != t["_own"]:
                    err(f"rank {r}: ordered: entries [{lr * g}:{lr * g + g}] of {t['_vis']} are "
                        f"{vis[lr * g:lr * g + g]}, its own GPUs are {t['_own']} ({t['DPG_GPUS']})")
                elif a.shared and not set(t["_own"]) <= set(vis):
                    err(f"rank {r}: ordered: {t['_own']} not in {t['_vis']}")
        if a.visibility == "ordered" and len({t["_vis"] for t in local}) != 1:
            err(f"{node}: ordered, but the tasks see different lists {sorted({t['_vis'] for t in local})}")
        gpu_note.append(f"{node}: " + " ".join(f"r{t['RANK']}={t['_vis']}" for t in local))

    if a.same_plan and not errs:
        keys = ["DPG_GPUS", "CUDA_VISIBLE_DEVICES", "DPG_NICS", "DPG_CPUS", "DPG_NUMA",
                "NCCL_IB_HCA", "UCX_NET_DEVICES", "OMP_NUM_THREADS"]
        by = {}
        for t in tasks:
            by.setdefault((t["LOCAL_WORLD_SIZE"], t["LOCAL_RANK"]), {})[t["SLURMD_NODENAME"]] = \
                tuple(t.get(k) for k in keys)
        for (lws, lr), per_node in sorted(by.items()):
            if len(set(per_node.values())) != 1:
                err(f"local rank {lr}: the nodes planned differently: "
                    + "; ".join(f"{nd}: {dict(zip(keys, v))}" for nd, v in sorted(per_node.items())))
        if len(nodes) < 2:
            err("--same-plan needs a step on several nodes")

    plan_note = ""
    if gpu_note:
        plan_note += ", visible " + "; ".join(gpu_note)
    if bind_note:
        plan_note += ", " + "; ".join(bind_note)

    plan_keys = set()
    cpu_keys = []

    def cross_check(plan, what):
        prow = {str(x["rank"]): x for x in plan["tasks"]}
        if len(prow) != n:
            err(f"{what} has {len(prow)} tasks, the step had {n}")
        for r, t in byrank.items():
            x = prow.get(r)
            if x is None:
                continue
            if x["node"] != t["SLURMD_NODENAME"]:
                err(f"rank {r}: ran on {t['SLURMD_NODENAME']}, {what} says {x['node']}")
            for k, v in x["env"].items():
                if (k in CONTRACT + DPG or k in PLAN_BINDING + cpu_keys and k not in keep) and \
                        t.get(k) != v:
                    err(f"rank {r}: {k}={t.get(k)}, {what} says {v}")
            bk = [k for k in PLAN_BINDING + cpu_keys if k in x["env"]]
            if bk:
                plan_keys.update(bk)

    if a.plan_json and not errs:
        with open(a.plan_json) as f:
            plan = json.load(f)
        cross_check(plan, "dpg-plan (run in the step)")
        plan_note += f", matches in-step dpg-plan ({plan.get('port_source')})"
    if a.plan and not errs:
        t0 = tasks[0]
        cmd = [a.plan, "--nodelist", t0["SLURM_STEP_NODELIST"], "--ntasks", str(n),
               "--tasks-per-node", t0["SLURM_STEP_TASKS_PER_NODE"],
               "--job-id", t0["SLURM_JOB_ID"], "--step-id", t0["SLURM_STEP_ID"],
               "--gpus-per-task", t0["DPG_GPUS_PER_TASK"], "--json"]
        dist = t0.get("SLURM_DISTRIBUTION", "block").split(":")[0].split(",")[0]
        if dist == "plane":
            dist = "plane=" + t0.get("SLURM_DIST_PLANESIZE", "1")
        if dist in ("block", "cyclic") or dist.startswith("plane="):
            cmd += ["--distribution", dist]
        for c in a.conf:
            cmd += ["--conf", c]
        helptext = subprocess.run([a.plan, "--help"], capture_output=True, text=True)
        helptext = helptext.stdout + helptext.stderr
        if "--gpu-visibility" in helptext and a.visibility:
            cmd += ["--gpu-visibility", a.visibility]
        if "--bind" in helptext:
            cmd += ["--bind", a.bind]
        # the CPUs Slurm gave the step on a node (the plugin reads them from
        # Slurm, dpg-plan cannot): the union of the node's DPG_CPUS, as the
        # plan splits all of them (bind=closest) or gives all (none)
        usable = {fmt_cpus(set().union(*(cpulist(t.get("DPG_CPUS")) for t in local)))
                  for local in nodes.values()}
        if "--cpus" in helptext and any("topology_xml=" in c for c in a.conf) and len(usable) == 1:
            cmd += ["--cpus", next(iter(usable))]
            cpu_keys.extend(["DPG_CPUS", "DPG_NUMA", "OMP_NUM_THREADS"])
        if a.port is not None:
            cmd += ["--port", str(a.port)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            err(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
        else:
            plan = json.loads(p.stdout)
            cross_check(plan, "dpg-plan")
            plan_note += f", matches dpg-plan ({plan.get('port_source')})"
            if plan_keys:
                plan_note += f" incl. {len(plan_keys)} binding variables"

    if a.verbose and not errs:
        # documented format: "dpg: rank=... gpus_per_task=G | task N: gpus BUSIDS
        # (visible PHYS) nics NICS cpus LIST numa N" ("gpus none", no "(visible)"
        # when G=0).  The CPU warnings ("dpg: task N: none of its CPUs ...") were checked above
        lines = [l.rstrip("\n") for l in open(a.stderr) if "dpg:" in l and "dpg: task " not in l]
        if len(lines) != n:
            err(f"{len(lines)} 'dpg:' lines on stderr for {n} tasks (want exactly one per task)")
        fmt = re.compile(r"dpg: rank=(\d+) world_size=(\d+) local_rank=(\d+) local_world_size=(\d+) "
                         r"node_rank=(\d+) num_nodes=(\d+) node=(\S+) master_addr=(\S+) "
                         r"master_port=(\d+) port_source=(\S+) gpus_per_task=(\d+)"
                         r" \| task (\d+): gpus (\S+)(?: \(visible (\S*)\))? nics (\S+) "
                         r"cpus (\S+) numa (-?\d+)$")
        seen = set()
        for l in lines:
            m = fmt.search(l)
            if not m:
                err(f"verbose line not in the documented format: {l!r}")
                continue
            r, ws, lr, lws, nr, nn, node, ma, mp, src, g, tlr, tg, tvis, tnics, tcpus, tnuma = m.groups()
            if r in seen:
                err(f"rank {r} printed twice")
            seen.add(r)
            t = byrank.get(r)
            if t is None:
                err(f"verbose line for unknown rank {r}")
                continue
            want = dict(world_size=t["WORLD_SIZE"], local_rank=t["LOCAL_RANK"],
                        local_world_size=t["LOCAL_WORLD_SIZE"], node_rank=t["NODE_RANK"],
                        num_nodes=t["GROUP_WORLD_SIZE"], node=t["SLURMD_NODENAME"],
                        master_addr=t["MASTER_ADDR"], master_port=t["MASTER_PORT"],
                        gpus_per_task=t["DPG_GPUS_PER_TASK"],
                        task=t["LOCAL_RANK"], gpus=t.get("DPG_GPUS") or "none",
                        nics=t.get("DPG_NICS") or "none", cpus=t.get("DPG_CPUS"),
                        numa=t.get("DPG_NUMA"))
            got = dict(world_size=ws, local_rank=lr, local_world_size=lws, node_rank=nr,
                       num_nodes=nn, node=node, master_addr=ma, master_port=mp, gpus_per_task=g,
                       task=tlr, gpus=tg, nics=tnics, cpus=tcpus, numa=tnuma)
            if (tvis is None) != (tg == "none"):
                err(f"verbose rank {r}: '(visible ...)' must come with GPUs and only then: {l!r}")
            if "_own" in t:
                want["visible"] = ",".join(map(str, t["_own"]))
                got["visible"] = tvis
            if a.port_source:
                want["port_source"] = a.port_source
                got["port_source"] = src
            for k in want:
                if want[k] != got[k]:
                    err(f"verbose rank {r}: {k}={got[k]}, expected {want[k]}")
        srcs = sorted({m.group(1) for m in (re.search(r"port_source=(\S+)", l) for l in lines) if m})
        plan_note += f", {len(lines)} verbose lines (port_source={','.join(srcs)})"

    if errs:
        print("\n".join(errs))
        return 1
    t0 = byrank["0"]
    lws = ",".join(str(len(nodes.get(x, []))) for x in step_nodes)
    print(f"step {t0['SLURM_JOB_ID']}.{t0['SLURM_STEP_ID']}: {n} tasks on {nnodes} nodes "
          f"({lws}), MASTER={t0['MASTER_ADDR']}:{t0['MASTER_PORT']}{plan_note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
