#!/usr/bin/env python3
"""check_contract.py - check what the tasks of ONE srun step received.

Reads the "DPGE2E" lines that tests/e2e/taskenv.sh printed (one per task;
other lines are ignored) from FILE (or stdin) and checks dpg's contract:

  RANK = SLURM_PROCID, ranks 0..N-1 unique, WORLD_SIZE = N (the step's task
  count), LOCAL_RANK = SLURM_LOCALID, LOCAL_WORLD_SIZE = this step's tasks on
  the node, NODE_RANK = GROUP_RANK = SLURM_NODEID, GROUP_WORLD_SIZE = number
  of nodes, ROLE_RANK = RANK, ROLE_WORLD_SIZE = WORLD_SIZE, ROLE_NAME set,
  MASTER_ADDR = the node of rank 0 (or --master-addr), MASTER_PORT the same
  in every task and inside the port range, every DPG_* twin equal,
  DPG_JOB_ID/DPG_STEP_ID = Slurm's, TORCHELASTIC_USE_AGENT_STORE never set.

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

CONTRACT = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK",
            "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE",
            "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT"]
DPG = ["DPG_CONTRACT", "DPG_RANK", "DPG_WORLD_SIZE", "DPG_LOCAL_RANK",
       "DPG_LOCAL_WORLD_SIZE", "DPG_NODE_RANK", "DPG_NUM_NODES",
       "DPG_MASTER_ADDR", "DPG_MASTER_PORT", "DPG_JOB_ID", "DPG_STEP_ID",
       "DPG_GPUS_PER_TASK"]
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
            got = [k for k in CONTRACT + DPG + ["TORCHELASTIC_USE_AGENT_STORE"] if k in t]
            extra = [x for x in t.get("E2E_DPG_VARS", "").split(",") if x]
            if got or extra:
                err(f"task {t.get('SLURM_PROCID')}: unexpected {sorted(set(got + extra))}")
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
        if "TORCHELASTIC_USE_AGENT_STORE" in t:
            err(f"task {t.get('SLURM_PROCID')}: TORCHELASTIC_USE_AGENT_STORE is set")
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

    plan_note = ""

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
                if k in CONTRACT + DPG and t.get(k) != v:
                    err(f"rank {r}: {k}={t.get(k)}, {what} says {v}")

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
        if a.port is not None:
            cmd += ["--port", str(a.port)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            err(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
        else:
            plan = json.loads(p.stdout)
            cross_check(plan, "dpg-plan")
            plan_note += f", matches dpg-plan ({plan.get('port_source')})"

    if a.verbose and not errs:
        lines = [l.rstrip("\n") for l in open(a.stderr) if "dpg:" in l]
        if len(lines) != n:
            err(f"{len(lines)} 'dpg:' lines on stderr for {n} tasks (want exactly one per task)")
        fmt = re.compile(r"dpg: rank=(\d+) world_size=(\d+) local_rank=(\d+) local_world_size=(\d+) "
                         r"node_rank=(\d+) num_nodes=(\d+) node=(\S+) master_addr=(\S+) "
                         r"master_port=(\d+) port_source=(\S+) gpus_per_task=(\d+)$")
        seen = set()
        for l in lines:
            m = fmt.search(l)
            if not m:
                err(f"verbose line not in the documented format: {l!r}")
                continue
            r, ws, lr, lws, nr, nn, node, ma, mp, src, g = m.groups()
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
                        gpus_per_task=t["DPG_GPUS_PER_TASK"])
            got = dict(world_size=ws, local_rank=lr, local_world_size=lws, node_rank=nr,
                       num_nodes=nn, node=node, master_addr=ma, master_port=mp, gpus_per_task=g)
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
