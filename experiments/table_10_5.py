#!/usr/bin/env python3
"""Regehr 2001, Table 10.5 (§10.5.2): a CPU-bound real-time application
(10 ms per frame; a gap of more than 33 ms between frames is a miss)
against 0, 1 and 10 CPU-bound background threads, with a hard reservation
(RESBH 10 33: Rez under FP, Fig 10.6 left), a soft one (RESBS 10 33: a
Join of Rez and TS, Fig 10.6 right) or none (TS at high, default or low
priority). 30-second runs, as in the table (--short is the same: it takes a
fraction of a second).

    python experiments/table_10_5.py            # the table and its figure
    python experiments/table_10_5.py --short    # CI
"""

from __future__ import annotations

import sys
import time

import hsched
from _common import Check, arguments, figure_path, pct, report

HIGH, DEFAULT, LOW = 15, 8, 1

# (background threads, guarantee label, %a, FPS, misses, %b): the table.
TABLE = [
    (0, "RESBH 10 33", 32.6, 32.6, 0, None),
    (0, "RESBS 10 33", 100.0, 100.0, 0, None),
    (0, "NULL", 100.0, 100.0, 0, None),
    (1, "RESBH 10 33", 32.6, 32.6, 0, 67.3),
    (1, "RESBS 10 33", 67.3, 67.3, 0, 32.6),
    (1, "NULL (high pri.)", 96.7, 96.7, 6, 3.26),
    (1, "NULL (default pri.)", 49.9, 49.9, 290, 50.0),
    (1, "NULL (low pri.)", 3.11, 3.11, 985, 96.9),
    (10, "RESBH 10 33", 32.5, 32.5, 0, 67.3),
    (10, "RESBS 10 33", 38.8, 38.8, 0, 61.1),
    (10, "NULL (high pri.)", 68.9, 68.9, 10, 31.0),
    (10, "NULL (default pri.)", 9.58, 9.58, 772, 90.3),
    (10, "NULL (low pri.)", 3.57, 3.57, 888, 96.4),
]


R = 10 / 33  # the reservation's share of the processor
QUANTUM, STARVATION = 0.030, 3.0  # ts defaults (crates/policies/src/ts.rs)
BOOST = QUANTUM / (STARVATION + QUANTUM)  # one boosted quantum per starvation period


def departure(bg: int, label: str, figure: str, seconds: float):
    """Why hsched's figure differs from the table, where it does, and the
    bound the simulator's model predicts for it."""
    tick = ("the table's 32.6 % comes from enforcing the reservation at clock ticks (a 1024 Hz tick "
            "gives 32.56 %, below); the simulator's timers are precise by default, which gives exactly 10/33")
    boost = ("ts boosts a starved thread for one 30 ms quantum after 3 s (Windows 2000 doubles the "
             "boosted quantum and scans once a second, crates/policies/src/ts.rs)")
    if figure == "a" and label.startswith("RESBH"):
        return tick, (100 * R - 0.2, 100 * R + 0.2)
    if figure == "a" and label.startswith("RESBS") and bg:
        share = R + (1 - R) / (bg + 1)  # the reservation plus its turn of the rest
        return tick + ", plus an equal turn of the rest", (100 * share - 0.5, 100 * share + 0.5)
    if label == "NULL (high pri.)" and bg == 1 and figure == "a":
        return boost + ": the background thread gets 1 %, not 3 %", (100 * (1 - BOOST) - 0.3, 100)
    if label == "NULL (low pri.)" and figure == "a":
        return boost + ": the renderer runs only when boosted", (100 * BOOST - 0.3, 100 * BOOST + 0.1)
    if label == "NULL (default pri.)" and bg == 1 and figure == "misses":
        # Two threads alternate whole quanta: every turn of the background
        # thread leaves a 30 ms gap plus a frame.
        turns = seconds / (2 * QUANTUM)
        return ("exact 30 ms quanta alternate, so every turn of the background thread is a miss",
                (0.97 * turns, 1.01 * turns))
    if label == "NULL (high pri.)" and bg == 10:
        rest = 10 * QUANTUM / (STARVATION + 10 * QUANTUM)
        if figure == "a":
            return ("all ten starved threads are boosted together every 3 s, 30 ms each: "
                    "the renderer keeps about 91 %"), (100 * (1 - rest) - 1, 100 * (1 - rest) + 1)
        bursts = seconds / (STARVATION + 10 * QUANTUM)
        return ("each boosted quantum, at the renderer's priority 15, leaves a 40 ms gap: "
                "ten misses per burst of boosts"), (0.8 * 10 * bursts, 1.1 * 10 * bursts)
    return None


def hierarchy(label: str, bg: int, timer: str = "precise") -> hsched.Hierarchy:
    if label.startswith("RESBH"):
        placement = 'scheduler = "rez"\nparams = { amount = "10ms", period = "33ms" }'
    elif label.startswith("RESBS"):
        placement = 'scheduler = "join"'
    else:
        prio = HIGH if "high" in label else LOW if "low" in label else DEFAULT
        placement = f'scheduler = "ts"\nparams = {{ priority = {prio} }}'
    background = (
        f'[[thread]]\nname = "bg"\ncount = {bg}\nscheduler = "ts"\nworkload = {{ kind = "cpu-bound" }}\n'
        if bg else ""
    )
    text = f"""
[machine]
cpus = 1
timer = "{timer}"
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = {{ priority = 1 }}
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
params = {{ priority = 0 }}
[[scheduler]]
name = "join"
policy = "join"
parents = [{{ name = "rez", amount = "10ms", period = "33ms" }}, {{ name = "ts" }}]
[[thread]]
name = "app"
{placement}
workload = {{ kind = "frame-renderer", work = "10ms", miss_gap = "33ms" }}
{background}"""
    return hsched.loads(text, name=f"table-10.5 {label} {bg}bg")


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    started = time.monotonic()
    # 30 s runs take a tenth of a second: the short form is the table.
    seconds = 30
    scale = seconds / 30
    checks = []
    rows = []
    for bg, label, a_pct, fps, misses, b_pct in TABLE:
        r = hierarchy(label, bg).sim(f"{seconds}s")
        app = r.thread("app")
        got_a = pct(app["share"])
        got_b = pct(sum(t["share"] for t in r.report["threads"] if t["name"].startswith("bg")))
        got_m = app["deadline_misses"] / scale
        rows.append((bg, label, got_a, got_m, got_b))
        name = f"{bg:>2} bg, {label}"
        # %a (= FPS): within 1.5 points of the table; misses: none where
        # the table has none, else within a third of its count (at least 10).
        a = Check(f"{name}: %a", a_pct, got_a, 1.5)
        m = Check(f"{name}: misses", misses, got_m, 0 if misses == 0 else max(10, misses / 3))
        for c, key in ((a, "a"), (m, "misses")):
            known = departure(bg, label, key, seconds)
            if known:
                c.departure, c.bound = known
        checks += [a, m]
    status = report("Regehr 2001, Table 10.5: a CPU-bound real-time application with contention",
                    "Regehr 2001, §10.5.2, Table 10.5 (30 s runs)",
                    checks, started)
    # The tick side of the RESBH departure: enforced at a periodic timer's
    # ticks, the reservation runs past its budget to the next tick (more
    # CPU), and its replenishments wait for a tick too (gaps over 33 ms).
    # A 1024 Hz tick gives the table's 32.6 % without a miss; finer ticks
    # approach 10/33 and, at 4096 Hz, miss frames by about 0.2 ms.
    print("\n  RESBH 10 33, 1 background thread, with tick-rounded timers (the departure above; no check):")
    for timer in ("4096hz", "2048hz", "1024hz", "512hz", "100hz"):
        r = hierarchy("RESBH 10 33", 1, timer).sim(f"{seconds}s")
        app = r.thread("app")
        print(f"    timer {timer:>7}: %a {pct(app['share']):.2f}, misses {app['deadline_misses']}")
    path = figure_path(args, "table_10_5.svg")
    if path:
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True)
        for ax, bg in zip(axes, (0, 1, 10)):
            mine = [r for r in rows if r[0] == bg]
            theirs = [t for t in TABLE if t[0] == bg]
            xs = range(len(mine))
            ax.bar([x - 0.2 for x in xs], [t[2] for t in theirs], 0.4, label="Regehr 2001")
            ax.bar([x + 0.2 for x in xs], [m[2] for m in mine], 0.4, label="hsched")
            ax.set_xticks(list(xs))
            ax.set_xticklabels([m[1].replace(" pri.", "").replace("NULL ", "") for m in mine],
                               rotation=30, ha="right", fontsize=8)
            ax.set_title(f"{bg} background thread{'s' if bg != 1 else ''}")
        axes[0].set_ylabel("%a (= FPS)")
        axes[0].legend()
        fig.tight_layout()
        fig.savefig(path)
        print(f"\n  figure: {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
