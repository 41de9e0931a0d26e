#!/usr/bin/env python3
"""Regehr 2001, Table 10.4 (§10.5.1): isolation of resource principals.
One CPU-bound thread of principal 1 against N2 CPU-bound threads of
principal 2, under one proportional-share (PS) scheduler (no isolation) or
one PS scheduler per principal under a PS root (isolation, Fig 10.5).
10-second runs, as in the table (--short: the same; they take a second).

    python experiments/table_10_4.py
"""

from __future__ import annotations

import sys
import time

import hsched
from _common import Check, arguments, figure_path, pct, report

N2 = [1, 4, 16, 64, 256]
# principal 1's share in %: the table, without and with isolation.
FLAT = [50.0, 19.9, 6.10, 1.56, 0.313]
ISOLATED = [50.0, 50.0, 50.1, 50.1, 50.2]


def hierarchy(n: int, isolated: bool) -> hsched.Hierarchy:
    doc = {
        "machine": {"cpus": 1},
        "principal": [{"name": "p1"}, {"name": "p2"}],
        "scheduler": [{"name": "root", "policy": "ps"}],
        "thread": [
            {"name": "one", "scheduler": "P1" if isolated else "root", "principal": "p1",
             "workload": {"kind": "cpu-bound"}},
            {"name": "many", "count": n, "scheduler": "P2" if isolated else "root", "principal": "p2",
             "workload": {"kind": "cpu-bound"}},
        ],
    }
    if isolated:
        doc["scheduler"] += [
            {"name": "P1", "policy": "ps", "parent": "root", "params": {"share": 1}},
            {"name": "P2", "policy": "ps", "parent": "root", "params": {"share": 1}},
        ]
    return hsched.from_dict(doc, name=f"table-10.4 N2={n} {'2-level' if isolated else '1-level'}")


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    started = time.monotonic()
    checks, got = [], {}
    for isolated, table in ((False, FLAT), (True, ISOLATED)):
        for n, seed in zip(N2, table):
            r = hierarchy(n, isolated).sim("10s")
            share = pct(r.principals.set_index("name").loc["p1", "share"])
            got[(isolated, n)] = share
            label = f"{'2-level' if isolated else '1-level'}, N2 = {n:>3}: %1"
            c = Check(label, seed, share, 0.3)
            if isolated and n >= 16:
                # The table's 50.1-50.2 % is the overhead of principal 2's
                # PS scheduler (§10.5.1: "not implemented efficiently");
                # the simulator charges no scheduling overhead.
                c.departure = ("the simulator charges no overhead to principal 2's PS scheduler, "
                               "which the dissertation names as the cause of its 50.1-50.2 %")
                c.bound = (49.9, 50.1)
            checks.append(c)
    status = report("Regehr 2001, Table 10.4: isolated and non-isolated resource principals",
                    "Regehr 2001, §10.5.1, Table 10.4 (10 s runs)", checks, started)
    path = figure_path(args, "table_10_4.svg")
    if path:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(N2, FLAT, "o--", label="1-level, Regehr 2001")
        ax.plot(N2, [got[(False, n)] for n in N2], "x-", label="1-level, hsched")
        ax.plot(N2, ISOLATED, "o--", label="2-level, Regehr 2001")
        ax.plot(N2, [got[(True, n)] for n in N2], "x-", label="2-level, hsched")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("threads of principal 2 (N2)")
        ax.set_ylabel("principal 1's share of the CPU (%)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(path)
        print(f"\n  figure: {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
