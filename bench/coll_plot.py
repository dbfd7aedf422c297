#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""coll_plot.py - draw one op's bus bandwidth (dpg vs Open MPI) from the
table.md that coll_bench.sh writes, as a self-contained SVG (no plotting
library needed).

    bench/coll_plot.py bench/coll_results.md allreduce > bench/results/coll_allreduce.svg
"""
import math
import re
import sys

COLORS = {"shm n=2": "#1f77b4", "tcp n=2": "#ff7f0e", "shm n=4": "#2ca02c", "tcp n=4": "#d62728"}
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "B": 1}


def parse(path, op):
    """{label: {"dpg": [(bytes, GB/s)], "ompi": [...]}} for one op's table."""
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
            m = re.match(r"(dpg|ompi) (\w+ n=\d+)", name)
            if not m:
                continue
            who, label = m.groups()
            series.setdefault(label, {}).setdefault(who, []).append(
                (size, float(val.split()[0])))
    return series


def svg(series, op):
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
           f'<text x="{ml}" y="22" font-size="15">{op} bus bandwidth: dpg (solid) vs '
           f'Open MPI 4.1 (dashed), 2-vCPU VM</text>']
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
        for who, dash in (("dpg", ""), ("ompi", ' stroke-dasharray="6 4"')):
            if who not in s:
                continue
            path = " ".join(f"{x(b):.1f},{y(v):.1f}" for b, v in sorted(s[who]))
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
            out.append(f'<line x1="{w - mr + 12}" x2="{w - mr + 40}" y1="{ly}" y2="{ly}" '
                       f'stroke="{color}" stroke-width="2"{dash}/>')
            out.append(f'<text x="{w - mr + 46}" y="{ly + 4}">{"dpg" if who == "dpg" else "Open MPI"} {label}</text>')
            ly += 18
    out.append("</svg>")
    return "\n".join(out)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: coll_plot.py TABLE.md OP")
    series = parse(sys.argv[1], sys.argv[2])
    if not series:
        sys.exit(f"coll_plot.py: no '{sys.argv[2]}' table in {sys.argv[1]}")
    print(svg(series, sys.argv[2]))


if __name__ == "__main__":
    main()
