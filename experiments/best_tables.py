#!/usr/bin/env python3
"""Banachowski 2002 ("BEST Does Better"), Tables 3.1 and 4.1: a CPU hog
beside one to three srtsim video tasks, ten experiments under Linux 2.4
(`linux24`), BEST, BEST-RATE and rate monotonic (`fp`, priorities by true
period), with a reference column the report does not have: EDF told every
task's true period (`edf-true-periods`, hsched_sim::reference), the misses
the workload itself forces. 100 s per run at an 800 Hz tick, seeds 1-3 and
their mean, as crates/sim/tests/best_report.rs and docs/best.md (which
explains every departure) run them; --short runs seed 1 only.

    python experiments/best_tables.py            # both tables, the full table and the figure
    python experiments/best_tables.py --short    # CI: seed 1
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import hsched
from _common import Check, arguments, figure_path, report

SECONDS = 100
SCHEDS = [("Linux", "linux24"), ("BEST", "best"), ("BEST-RATE", "best-rate"), ("RM", "fp"),
          ("EDF", "edf-true-periods")]


@dataclass(frozen=True)
class Exp:
    id: int
    hogs: int
    hog_nice: int
    video: bool  # srtsim's video mode (random I/P/B frames), else constant
    srts: Sequence[Tuple[float, float, str]]  # fps, mean CPU fraction, label
    report: Dict[str, Sequence[float]]  # scheduler -> misses % per task


# The report's Tables 3.1 (Exps. 1-6) and 4.1 (Exps. 7-10).
EXPS = [
    Exp(1, 1, 0, True, [(25, 0.50, "25fps 50%")], {"Linux": [7.8], "BEST": [0.1], "RM": [0.0]}),
    Exp(2, 1, 0, True, [(25, 0.31, "25fps 31%"), (33, 0.28, "33fps 28%")],
        {"Linux": [1.7, 0.1], "BEST": [0.0, 0.0], "RM": [0.5, 0.0]}),
    Exp(3, 1, 0, True, [(25, 0.625, "25fps 62.5%")], {"Linux": [26.7], "BEST": [4.8], "RM": [4.8]}),
    Exp(4, 1, 0, True, [(25, 0.41, "25fps 41%"), (33, 0.40, "33fps 40%")],
        {"Linux": [26.8, 24.4], "BEST": [4.6, 3.3], "RM": [16.7, 0.0]}),
    Exp(5, 1, 0, True, [(13, 0.30, "13fps 30%"), (19, 0.30, "19fps 30%"), (62, 0.31, "62fps 31%")],
        {"Linux": [40.7, 37.1, 20.1], "BEST": [0.1, 0.1, 0.0], "RM": [7.7, 0.0, 0.0]}),
    Exp(6, 1, 0, True, [(25, 0.625, "25fps 62.5%"), (33, 0.625, "33fps 62.5%")],
        {"Linux": [52.4, 44.0], "BEST": [51.3, 16.7], "RM": [83.4, 5.6]}),
    Exp(7, 1, 0, False, [(25, 0.50, "25fps 50%")], {"Linux": [7.8], "BEST": [0.0], "BEST-RATE": [0.0]}),
    Exp(8, 3, 0, False, [(25, 0.25, "25fps 25%")], {"Linux": [5.6], "BEST": [0.0], "BEST-RATE": [0.0]}),
    # "requires an average of 2/3 of the CPU" (§4.1), labelled 67%.
    Exp(9, 1, 10, False, [(33, 2 / 3, "33fps 67%")], {"Linux": [11.0], "BEST": [0.0], "BEST-RATE": [0.0]}),
    Exp(10, 1, 0, False, [(25, 0.50, "25fps 50%"), (50, 0.50, "50fps 50%")],
        {"Linux": [32.0, 21.0], "BEST": [1.6, 1.6], "BEST-RATE": [25.0, 14.3]}),
]

MASK = (1 << 64) - 1


def random_gop(seed: int, n: int) -> str:
    """n frame types as srtsim draws them (I, P 1/6 each, B 2/3), from
    SplitMix64 as the Rust test draws them, so both run the same frames."""
    out, state = [], seed & MASK
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        out.append("IP"[z % 6] if z % 6 < 2 else "B")
    return "".join(out)


def ns(x: float) -> str:
    return f"{math.floor(x + 0.5)}ns"


def hierarchy(e: Exp, policy: str, seed: int) -> hsched.Hierarchy:
    """The file best_report.rs builds: the scheduler under test at the root."""
    t = f'[machine]\ncpus = 1\ntimer = "800hz"\n\n[[scheduler]]\nname = "root"\npolicy = "{policy}"\n\n'
    by_rate = sorted(range(len(e.srts)), key=lambda k: -e.srts[k][0])
    for k in range(e.hogs):
        params = {"fp": "{ priority = 0 }", "edf-true-periods": "{}"}.get(policy, f"{{ nice = {e.hog_nice} }}")
        t += (f'[[thread]]\nname = "hog{k}"\nscheduler = "root"\nparams = {params}\n'
              'workload = { kind = "cpu-bound" }\n\n')
    for k, (fps, util, _) in enumerate(e.srts):
        period = 1e9 / fps
        mean = period * util
        if policy == "fp":
            params = f"{{ priority = {len(e.srts) - by_rate.index(k)} }}"
        elif policy == "edf-true-periods":
            params = f'{{ period = "{ns(period)}" }}'
        else:
            params = "{}"
        if e.video:
            gop = random_gop(seed * 1000 + e.id * 16 + k, int(SECONDS * fps) + 1)
            work = f'i = "{ns(1.5 * mean)}", p = "{ns(1.25 * mean)}", b = "{ns(0.85 * mean)}", gop = "{gop}"'
        else:
            work = f'exec = "{ns(mean)}"'
        t += (f'[[thread]]\nname = "srt{k}"\nscheduler = "root"\nparams = {params}\n'
              f'workload = {{ kind = "video", period = "{ns(period)}", {work}, on_miss = "continue" }}\n\n')
    return hsched.loads(t, name=f"best-exp{e.id}-{policy}.toml", reference_policies=True)


@dataclass
class Outcome:
    misses: List[float]  # % per task, mean over seeds
    lo: List[float]
    hi: List[float]
    shares: List[float]  # %, hogs then tasks


def simulate(e: Exp, policy: str, seeds: Sequence[int]) -> Outcome:
    runs = []
    for seed in seeds:
        r = hierarchy(e, policy, seed).sim(f"{SECONDS}s", seed=seed)
        th = r.threads.set_index("name")
        misses = [100.0 * th.loc[f"srt{k}", "deadline_misses"] / max(1, th.loc[f"srt{k}", "jobs"])
                  for k in range(len(e.srts))]
        names = [f"hog{k}" for k in range(e.hogs)] + [f"srt{k}" for k in range(len(e.srts))]
        runs.append((misses, [100.0 * th.loc[n, "share"] for n in names]))
    mean = lambda cols: [sum(c) / len(c) for c in zip(*cols)]  # noqa: E731
    ms = [m for m, _ in runs]
    return Outcome(mean(ms), [min(c) for c in zip(*ms)], [max(c) for c in zip(*ms)], mean([s for _, s in runs]))


# Where the simulation departs from the report, why (docs/best.md,
# "Differences of more than a few points, explained") and the bound the
# model predicts instead, as a function of the outcomes.
def departure(e: Exp, sched: str, k: int, out: Dict[Tuple[int, str], Outcome]) -> Optional[Tuple[str, Tuple[float, float]]]:
    edf = out[(e.id, "EDF")].misses[k]
    if e.id == 5 and sched == "BEST":
        return (f"the three tasks need 93 % with ±50 % frame times; EDF told the true periods misses {edf:.1f} % "
                "on the same frames, so the report's 0.1 % cannot come from Table 2.4's workload: "
                "BEST stays within 4 points of that EDF", (edf - 1.0, edf + 4.0))
    if e.id == 5 and sched == "RM" and k == 0:
        return ("the same burstier frames: the 13 fps task at the lowest priority absorbs every overload",
                (15.0, 35.0))
    if e.id == 6 and sched == "BEST":
        tot = sum(out[(6, "BEST")].misses)
        return (f"at 125 % the task in period keeps a whole period's budget and the other falls back to best "
                f"effort; the split is history-dependent (§3.5 'wavy'); the total ({tot:.1f} against 68 points) "
                "and the hog's share agree", (15.0, 40.0))
    if e.id == 7 and sched == "Linux":
        return ("the report repeats Exp. 1's 7.8 for Exp. 7; in constant mode 20-ms frames leave more slack",
                (2.0, 6.0))
    if e.id == 9 and sched == "Linux":
        return ("with the nice-10 hog's half quantum, linux24's epochs end while the task sleeps and the task "
                "carries over four times the hog's counter; no reading of the 2.4 scheduler found gives 11 % "
                "without breaking Exps. 1, 3 and 8", (0.0, 2.0))
    if e.id == 10 and sched in ("Linux", "BEST-RATE"):
        return ("each process gets about its third, so both tasks are short; with 'finish the late frame', the "
                "miss percentage measures how lateness spreads over frames, which depends on phase",
                (10.0, 35.0))
    return None


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    started = time.monotonic()
    seeds = [1] if args.short else [1, 2, 3]
    out: Dict[Tuple[int, str], Outcome] = {}
    for e in EXPS:
        for label, policy in SCHEDS:
            out[(e.id, label)] = simulate(e, policy, seeds)
    checks: List[Check] = []
    for e in EXPS:
        for sched, values in e.report.items():
            for k, doc in enumerate(values):
                got = out[(e.id, sched)].misses[k]
                c = Check(f"Exp {e.id:>2} {e.srts[k][2]:<12} {sched:<9} misses %", doc, got, max(2.0, 0.2 * doc))
                known = departure(e, sched, k, out)
                if known:
                    c.departure, c.bound = known
                checks.append(c)
    # The CPU shares the report states (docs/best.md, second table).
    sh = lambda i, s, j: out[(i, s)].shares[j]  # noqa: E731
    checks += [
        Check("Exp  1 BEST: hog's share %", 50.0, sh(1, "BEST", 0), 3.0),
        Check("Exp  3 RM: task's share %", 62.5, sh(3, "RM", 1), 2.0),
        Check("Exp  3 Linux: task's share %", 50.0, sh(3, "Linux", 1), 3.0),
        Check("Exp  6 Linux: hog's share %", 33.3, sh(6, "Linux", 0), 2.0),
        Check("Exp  6 RM: hog's share % (< 1)", 0.0, sh(6, "RM", 0), 1.0),
        Check("Exp  6 BEST: hog's share %", 15.0, sh(6, "BEST", 0), 3.0),
        Check("Exp  9 every scheduler: task's share % (2/3)", 66.7,
              min(sh(9, s, 1) for s in ("Linux", "BEST", "BEST-RATE")), 1.0),
        Check("Exp 10 BEST: hog's share % (< 4)", 2.0, sh(10, "BEST", 0), 2.0),
    ] + [Check(f"Exp  8 {s}: share % of process {j}", 25.0, sh(8, s, j), 4.0)
         for s in ("Linux", "BEST-RATE") for j in range(4)] \
      + [Check(f"Exp 10 BEST-RATE: share % of process {j}", 33.3, sh(10, "BEST-RATE", j), 6.0) for j in range(3)]
    # The ranking: wherever the report has one scheduler more than 2 points
    # ahead of another on a task, hsched orders them the same way.
    held = total = 0
    broken = []
    for e in EXPS:
        for a, ra in e.report.items():
            for b, rb in e.report.items():
                for k in range(len(e.srts)):
                    if ra[k] + 2.0 < rb[k]:
                        total += 1
                        if out[(e.id, a)].misses[k] < out[(e.id, b)].misses[k]:
                            held += 1
                        else:
                            broken.append(f"Exp {e.id}: {a} ahead of {b}")
    ranking = Check(f"orderings of the report reproduced (of {total})", total, held, 0,
                    departure="both that break are Exp. 9's Linux against BEST and BEST-RATE (above): "
                    + "; ".join(broken), bound=(total - 2, total - 2))
    checks.append(ranking)
    # The reference: BEST below saturation stays within 4 points of EDF
    # told the true periods (the price of inferring them).
    worst = max(out[(e.id, "BEST")].misses[k] - out[(e.id, "EDF")].misses[k]
                for e in EXPS if e.id != 6 for k in range(len(e.srts)))
    checks.append(Check("BEST minus EDF (true periods), worst task below saturation, points", 0.0, worst, 4.0))
    status = report("Banachowski 2002, Tables 3.1 and 4.1: BEST and BEST-RATE against Linux 2.4 and RM",
                    f"Banachowski 2002, §3.4 Table 3.1 and §4.1 Table 4.1 ({SECONDS} s runs, seeds "
                    f"{', '.join(map(str, seeds))}; EDF: hsched's reference, not in the report)", checks, started)
    print("\n  misses %, report / hsched (mean; range over seeds), and the EDF reference:")
    print(f"  {'exp':>3}  {'task':<12}" + "".join(f"  {s:>17}" for s, _ in SCHEDS))
    for e in EXPS:
        for k, (_, _, label) in enumerate(e.srts):
            cells = []
            for s, _ in SCHEDS:
                o = out[(e.id, s)]
                doc = e.report.get(s)
                d = f"{doc[k]:.1f}" if doc else "–"
                cells.append(f"{d:>5} / {o.misses[k]:>4.1f}" + (f" ({o.lo[k]:.0f}-{o.hi[k]:.0f})" if len(seeds) > 1 else ""))
            print(f"  {e.id:>3}  {label:<12}" + "".join(f"  {c:>17}" for c in cells))
    path = figure_path(args, "best_tables.svg")
    if path:
        import matplotlib.pyplot as plt

        rows = [(e, k) for e in EXPS for k in range(len(e.srts))]
        fig, axes = plt.subplots(2, 1, figsize=(13, 8))
        for ax, part, title in ((axes[0], [r for r in rows if r[0].id <= 6], "Table 3.1 (video mode)"),
                                (axes[1], [r for r in rows if r[0].id > 6], "Table 4.1 (constant mode)")):
            width = 0.8 / len(SCHEDS)
            for j, (s, _) in enumerate(SCHEDS):
                xs = [i + (j - 2) * width for i in range(len(part))]
                ax.bar(xs, [out[(e.id, s)].misses[k] for e, k in part], width, label=f"{s} (hsched)")
                docs = [(x, e.report[s][k]) for x, (e, k) in zip(xs, part) if s in e.report]
                ax.plot([x for x, _ in docs], [d for _, d in docs], "k_", markersize=9, mew=2)
            ax.set_xticks(range(len(part)))
            ax.set_xticklabels([f"Exp {e.id}\n{e.srts[k][2]}" for e, k in part], fontsize=7)
            ax.set_ylabel("deadlines missed (%)")
            ax.set_title(f"{title}: bars hsched, black marks the report")
        axes[0].legend(fontsize=8, ncol=5)
        fig.tight_layout()
        fig.savefig(path)
        print(f"\n  figure: {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
