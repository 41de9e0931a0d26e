#!/usr/bin/env python3
"""Regehr 2001, Fig 6.2 (§6.1.3): the parameter space of a CPU reservation
for the Media Player task set of Table 6.1 (six rate-monotonic threads,
24.1 % of the CPU). For each (period, amount) of a grid, hsched analyzes
the application under a hard reservation of that size (Theorem 6.2's
ghost task) and simulates it for 4 s against a CPU-bound background
thread; the figure shades what the analysis refuses and marks each
simulated miss. Checks: the utilization of Table 6.1, the reservation the
search of §6.1.2 proposes against the text's "around 1.5 ms / 6 ms", and
that no reservation the analysis accepts misses a deadline in simulation.

    python experiments/fig_6_2.py            # a 12 x 12 grid
    python experiments/fig_6_2.py --short    # a 5 x 5 grid (CI)
    python experiments/fig_6_2.py --ray      # the grid as a sweep on Ray
"""

from __future__ import annotations

import os
import re
import sys
import time

import hsched
from _common import ROOT, Check, arguments, figure_path, report

EXAMPLE = os.path.join(ROOT, "examples", "media-player.toml")


def text_for(amount_ms: float, period_ms: float) -> str:
    """The example with the player's reservation set to amount / period
    (and its request dropped: refused sizes are the point of the figure)."""
    with open(EXAMPLE, encoding="utf-8") as f:
        text = f.read()
    text = text.replace('params = { amount = "1.5ms", period = "6ms" }',
                        f'params = {{ amount = "{amount_ms}ms", period = "{period_ms}ms" }}', 1)
    return re.sub(r'^guarantee = "RESBH 1.5 6"\n', "", text, count=1, flags=re.M)


def point(seed: int, amount_ms: float, period_ms: float) -> dict:
    """One grid point: the analysis's verdict and the simulated misses."""
    h = hsched.loads(text_for(amount_ms, period_ms), name=f"media-player {amount_ms}/{period_ms}")
    a = h.analyze()
    app = a.applications.set_index("scheduler").loc["player"]
    r = h.sim("4s", seed=seed)
    player = r.threads[r.threads["scheduler"] == "player"]
    return {"schedulable": app["verdict"] == "met", "misses": int(player["deadline_misses"].sum())}


def main() -> int:
    args = arguments(__doc__.splitlines()[0], ray=True)
    started = time.monotonic()
    steps = 5 if args.short else 12
    periods = [round(2.0 + 10.0 * k / (steps - 1), 3) for k in range(steps)]  # 2 .. 12 ms
    checks = []

    a = hsched.analyze(EXAMPLE)
    rt = a.response_times
    checks.append(Check("Table 6.1 utilization (%)", 24.1, 100 * rt["utilization"].sum(), 0.05))
    res = a.applications.iloc[0]
    p_ms, x_ms = res["reservation_period_ns"] / 1e6, res["reservation_amount_ns"] / 1e6
    checks.append(Check("proposed reservation: period (ms)", 6.0, p_ms, 0.5))
    checks.append(Check("proposed reservation: amount (ms)", 1.5, x_ms, 0.15))

    points = []
    for p in periods:
        for k in range(steps):
            # Amounts from a 5 % to a 60 % share of each period.
            points.append({"period_ms": p, "amount_ms": round(p * (0.05 + 0.55 * k / (steps - 1)), 3)})
    backend = "ray" if args.ray or args.address else "serial"
    df = hsched.sweep(point, points, seeds=[1], backend=backend, address=args.address,
                      progress=backend == "ray")
    failed = df[df["error"].notna()]
    for _, row in failed.iterrows():
        print(f"  point {row['amount_ms']} / {row['period_ms']} ms (seed {row['seed']}) failed: {row['error']}")
    ok = df[df["error"].isna()]
    unsound = ok[ok["schedulable"] & (ok["misses"] > 0)]
    checks.append(Check("accepted reservations that miss in simulation", 0, len(unsound), 0))
    checks.append(Check("grid points that failed to run", 0, len(failed), 0))
    status = report("Regehr 2001, Fig 6.2: parameter space of a per-application CPU reservation",
                    f"Regehr 2001, §6.1.3, Table 6.1 and Fig 6.2 ({len(df)} grid points, 4 s runs)",
                    checks, started)
    print(f"\n  the analysis accepts {int(ok['schedulable'].sum())} of {len(ok)} points; "
          f"{int((ok['misses'] > 0).sum())} points miss in simulation")
    path = figure_path(args, "fig_6_2.svg")
    if path:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 5))
        bad, good = ok[~ok["schedulable"]], ok[ok["schedulable"]]
        ax.scatter(bad["period_ms"], bad["amount_ms"], marker="s", s=120, c="0.75",
                   label="refused by the analysis")
        ax.scatter(good["period_ms"], good["amount_ms"], marker="s", s=120, c="white",
                   edgecolors="0.6", label="accepted")
        miss = ok[ok["misses"] > 0]
        ax.scatter(miss["period_ms"], miss["amount_ms"], marker="x", c="red", label="misses in simulation")
        ax.plot([0, 12], [0, 12 * 0.241], "k--", lw=0.8, label="24.1 % utilization")
        ax.plot([p_ms], [x_ms], "b*", ms=12, label=f"search: {x_ms:.3f} / {p_ms:.1f} ms")
        ax.set_xlabel("reservation period (ms)")
        ax.set_ylabel("reservation amount (ms)")
        ax.legend(fontsize=8, loc="upper left")
        fig.tight_layout()
        fig.savefig(path)
        print(f"\n  figure: {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
