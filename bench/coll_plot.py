#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""coll_plot.py - draw one op's bus bandwidth (dpg vs Open MPI and Gloo,
where they ran) from the table.md that coll_bench.sh writes, as a
self-contained SVG (no plotting library needed); the title names the host
line of the table.

    bench/coll_plot.py bench/results/coll.md allreduce > bench/results/coll_allreduce.svg
"""
import math
import re
import sys

COLORS = {"shm n=2": "#1f77b4", "tcp n=2": "#ff7f0e", "shm n=4": "#2ca02c", "tcp n=4": "#d62728"}
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "B": 1}


def host(path):
    """The CPU and date of the table's host line ("" without one)."""
    for line in open(path, encoding="utf-8"):
        m = re.match(r"host: CPU (.+?), (\d+) CPUs, (\d{4}-\d\d-\d\d)", line)
        if m:
            return f"{m.group(1)}, {m.group(2)} CPUs, {m.group(3)}"
    return ""


def parse(path, op):
    """{label: {"dpg": [(bytes, GB/s)], "ompi": [...], "gloo": [...]}} for one
    op's table."""
    lines = open(path, encoding="utf-8").read().splitlines()
    start = lines.index(f"## {op}")
    header = None
    series = {}
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == "size":
            header = cells
            continue
        if header is None or cells[0].startswith("-") or cells[0].startswith(":"):
            continue
        num, unit = cells[0].split()
        size = int(num) * UNITS[unit]
        for name, val in zip(header[1:], cells[1:]):
            m = re.match(r"(dpg|ompi|gloo) (\w+ n=\d+)", name)
            if not m:
                continue
            who, label = m.groups()
            series.setdefault(label, {}).setdefault(who, []).append(
                (size, float(val.split()[0])))
    return series


STYLES = (("dpg", "", "dpg"), ("ompi", ' stroke-dasharray="6 4"', "Open MPI"),
          ("gloo", ' stroke-dasharray="2 3"', "Gloo"))


def svg(series, op, where):
    w, h, ml, mr, mt, mb = 760, 440, 70, 170, 40, 55
    pts = [p for s in series.values() for v in s.values() for p in v]
    xmin, xmax = math.log2(min(p[0] for p in pts)), math.log2(max(p[0] for p in pts))
    ymax = max(p[1] for p in pts) * 1.1

    def x(b):
        return ml + (math.log2(b) - xmin) / (xmax - xmin) * (w - ml - mr)

    def y(v):
        return h - mb - v / ymax * (h - mt - mb)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{ml}" y="22" font-size="14">{op} busbw: dpg solid, Open MPI 4.1 '
           f'dashed, Gloo dotted ({where})</text>']
    for i in range(0, 6):
        v = ymax * i / 5
        out.append(f'<line x1="{ml}" x2="{w - mr}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{ml - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.1f}</text>')
    for b in sorted({p[0] for p in pts}):
        lab = f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
        out.append(f'<text x="{x(b):.1f}" y="{h - mb + 18}" text-anchor="middle">{lab}</text>')
    out.append(f'<text x="{(ml + w - mr) / 2}" y="{h - 12}" text-anchor="middle">message size</text>')
    out.append(f'<text x="16" y="{(mt + h - mb) / 2}" transform="rotate(-90 16 {(mt + h - mb) / 2})" '
               f'text-anchor="middle">busbw GB/s</text>')
    ly = mt + 10
    for label, s in series.items():
        color = COLORS.get(label, "black")
        for who, dash, name in STYLES:
            if who not in s:
                continue
            path = " ".join(f"{x(b):.1f},{y(v):.1f}" for b, v in sorted(s[who]))
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
            out.append(f'<line x1="{w - mr + 12}" x2="{w - mr + 40}" y1="{ly}" y2="{ly}" '
                       f'stroke="{color}" stroke-width="2"{dash}/>')
            out.append(f'<text x="{w - mr + 46}" y="{ly + 4}">{name} {label}</text>')
            ly += 18
    out.append("</svg>")
    return "\n".join(out)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: coll_plot.py TABLE.md OP")
    series = parse(sys.argv[1], sys.argv[2])
    if not series:
        sys.exit(f"coll_plot.py: no '{sys.argv[2]}' table in {sys.argv[1]}")
    print(svg(series, sys.argv[2], host(sys.argv[1]) or "this host"))


if __name__ == "__main__":
    main()
