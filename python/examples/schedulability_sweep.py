#!/usr/bin/env python3
"""Schedulability ratio against utilization, in the style of a notebook.

Generates 1 000 random task sets (UUniFast utilizations, log-uniform
periods; 100 seeds at each of 10 total utilizations), then for each set,
as one point of a sweep on Ray:

- hierarchy A, "flat RM": the tasks directly under a fixed-priority root
  with rate-monotonic priorities;
- hierarchy B, "in a reservation": the same tasks rate-monotonic inside a
  hard CPU reservation of 9 ms every 10 ms (Rez under the root), beside a
  CPU-bound background thread;

it asks the analysis whether every deadline is met (response-time analysis;
under B Theorem 6.2's ghost task, Regehr 2001, §6.1) and simulates 2 s to
count misses. The plot shows, for each hierarchy, the fraction of sets
the analysis accepts and the fraction that missed no deadline in
simulation. Every set the analysis accepts must miss nothing.

    pip install ray matplotlib
    python python/examples/schedulability_sweep.py                  # local Ray, every core
    python python/examples/schedulability_sweep.py --num-cpus 2 --out ratio.svg
    python python/examples/schedulability_sweep.py --address ray://head:10001
"""

from __future__ import annotations

import argparse
import time

import hsched

N_TASKS = 8
UTILIZATIONS = [round(0.55 + 0.05 * k, 2) for k in range(10)]  # 0.55 .. 1.00
HEADER_B = """[[scheduler]]
name = "root"
policy = "fp"

[[scheduler]]
name = "res"
policy = "rez"
parent = "root"
params = { priority = 2 }
cap = 0.95

[[scheduler]]
name = "app"
policy = "fp"
parent = "res"
params = { amount = "9ms", period = "10ms" }

[[scheduler]]
name = "ts"
policy = "ts"
parent = "root"
params = { priority = 1 }

[[thread]]
name = "background"
scheduler = "ts"
workload = { kind = "cpu-bound" }

"""


def point(seed: int, utilization: float) -> dict:
    """One task set under both hierarchies."""
    ts = hsched.generate(N_TASKS, utilization, seed=seed, period_min="10ms", period_max="100ms")
    out = {"u": ts.utilization}
    for name, h in (
        ("a", ts.hierarchy()),
        ("b", hsched.loads(HEADER_B + ts.to_threads("app", priorities=True), name=f"B seed {seed}")),
    ):
        analysis = h.analyze()
        out[f"{name}_schedulable"] = bool(analysis.applications["verdict"].eq("met").all())
        r = h.sim("2s", seed=seed)
        app = r.threads[r.threads["name"] != "background"]
        out[f"{name}_misses"] = int(app["deadline_misses"].sum())
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", type=int, default=100, help="task sets per utilization (default 100: 1 000 in all)")
    p.add_argument("--num-cpus", type=int, default=None, help="local Ray's processors (default: all)")
    p.add_argument("--address", default=None, help="a Ray cluster's address instead of a local Ray")
    p.add_argument("--backend", default="ray", choices=["ray", "serial"])
    p.add_argument("--out", default="schedulability.svg", help="the figure (SVG or PNG)")
    args = p.parse_args()

    started = time.monotonic()
    df = hsched.sweep(point, {"utilization": UTILIZATIONS}, seeds=args.sets, address=args.address,
                      num_cpus=args.num_cpus, backend=args.backend, chunk_size=10)
    elapsed = time.monotonic() - started
    ok = df[df["error"].isna()]
    for _, row in df[df["error"].notna()].head(5).iterrows():
        first = row["error"].splitlines()[0]
        print(f"failed: utilization {row['utilization']} seed {row['seed']}: {first}")
    table = ok.groupby("utilization").agg(
        sets=("seed", "count"),
        a_analysis=("a_schedulable", "mean"),
        a_sim=("a_misses", lambda m: (m == 0).mean()),
        b_analysis=("b_schedulable", "mean"),
        b_sim=("b_misses", lambda m: (m == 0).mean()),
    )
    print(table.to_string(float_format=lambda x: f"{x:.2f}"))
    unsound = ok[(ok["a_schedulable"] & (ok["a_misses"] > 0)) | (ok["b_schedulable"] & (ok["b_misses"] > 0))]
    print(f"\n{len(df)} task sets in {elapsed:.1f} s; {len(unsound)} accepted by the analysis missed a deadline")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    u = table.index
    ax.plot(u, table["a_analysis"], "o-", label="A flat RM: analysis")
    ax.plot(u, table["a_sim"], "o--", label="A flat RM: no miss in 2 s")
    ax.plot(u, table["b_analysis"], "s-", label="B RESBH 9 10: analysis")
    ax.plot(u, table["b_sim"], "s--", label="B RESBH 9 10: no miss in 2 s")
    ax.set_xlabel("total utilization of the task set")
    ax.set_ylabel("schedulable fraction")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out)
    print(f"figure: {args.out}")


if __name__ == "__main__":
    main()
