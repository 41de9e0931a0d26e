"""What every experiment shares: its command line, the table of hsched's
numbers beside the source document's, and the exit status.

Each check compares one hsched figure with the document's under a stated
tolerance. A check marked as a known departure also states why the
simulation differs and the bound hsched's figure must keep instead (what
the model predicts); it fails only outside that bound. The experiment
exits 1 when any check fails, 0 otherwise.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


@dataclass
class Check:
    """One figure: the document's, hsched's, and how close they must be."""

    what: str
    seed: Optional[float]
    got: float
    #: Allowed |got - seed| (absolute, in the figure's unit).
    tol: float
    #: For a known departure: why, and the bound [lo, hi] hsched must keep.
    departure: Optional[str] = None
    bound: Optional[Tuple[float, float]] = None

    @property
    def within(self) -> bool:
        return self.seed is not None and abs(self.got - self.seed) <= self.tol + 1e-12

    @property
    def status(self) -> str:
        if self.within:
            return "holds"
        if self.departure is not None and self.bound is not None:
            lo, hi = self.bound
            if lo - 1e-12 <= self.got <= hi + 1e-12:
                return "known departure"
        return "FAILS"


def arguments(description: str, argv: Optional[Sequence[str]] = None, *, ray: bool = False) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    if ray:
        p.add_argument("--ray", action="store_true", help="run the points as a sweep on a local Ray instance")
        p.add_argument("--address", help="with --ray: the Ray cluster's address (ray://HEAD:10001, auto)")
    p.add_argument("--short", action="store_true",
                   help="the short form run in CI: fewer or shorter runs, the same checks")
    p.add_argument("--out", default=os.path.join(HERE, "out"),
                   help="directory for the figures (default: experiments/out)")
    p.add_argument("--no-plot", action="store_true", help="do not draw the figure")
    return p.parse_args(argv)


def fmt(x: Optional[float]) -> str:
    if x is None:
        return "—"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:.3g}" if abs(x) < 0.01 else f"{x:.2f}"
    return f"{int(x)}"


def report(title: str, source: str, checks: List[Check], started: float) -> int:
    """Prints the table and the departures; returns the exit status."""
    print(f"{title}\n  source: {source}\n")
    w = max(len(c.what) for c in checks)
    print(f"  {'figure':<{w}}  {'document':>9}  {'hsched':>9}  {'tolerance':>9}  status")
    for c in checks:
        print(f"  {c.what:<{w}}  {fmt(c.seed):>9}  {fmt(c.got):>9}  {'±' + fmt(c.tol):>9}  {c.status}")
    departures = [c for c in checks if c.status == "known departure"]
    if departures:
        print("\n  known departures:")
        for c in departures:
            lo, hi = c.bound  # type: ignore[misc]
            print(f"  - {c.what}: {c.departure} (hsched must give {fmt(lo)}..{fmt(hi)}: it gives {fmt(c.got)})")
    failed = [c for c in checks if c.status == "FAILS"]
    held = sum(1 for c in checks if c.status == "holds")
    print(f"\n  {held} hold, {len(departures)} known departures, {len(failed)} fail "
          f"({time.monotonic() - started:.1f} s)")
    return 1 if failed else 0


def figure_path(args: argparse.Namespace, name: str) -> Optional[str]:
    """Where to draw `name`, or None when plotting is off or matplotlib is missing."""
    if args.no_plot:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        print("  (matplotlib is not installed: no figure)")
        return None
    os.makedirs(args.out, exist_ok=True)
    return os.path.join(args.out, name)


def pct(x: float) -> float:
    return 100.0 * x


def isclose(a: float, b: float, tol: float) -> bool:
    return math.isclose(a, b, abs_tol=tol)
