"""The adaptive-player experiment of Sinha 2007, Table 3.1, as the
simulator runs it (``hsched_sim::player``)."""

from __future__ import annotations

from typing import Any, Dict

from . import _args, _native
from ._args import DurationLike

_SCHEDULERS = ("coop", "fair-share", "ts", "single")


def players(n: int, scheduler: str, *, period: DurationLike = "20ms", seed: int = 1) -> Dict[str, Any]:
    """Runs ``n`` adaptive video players on one processor for 20 s and
    measures seconds 5-20 (docs/cooperative-polling.md, "Table 3.1 in
    simulation"). ``scheduler``: ``"coop"`` (cooperative polling),
    ``"fair-share"`` (the same policy, players that never poll), ``"ts"``
    or ``"single"`` (every video in one event loop); ``period`` is the
    fair-share period of the first two.

    Returns worst_tardiness_ms, mean_interval_worst_ms (the thesis's
    measure), switches_per_s, polls_per_s, fps_total, fps (per player),
    jain, dropped_per_s and policed."""
    count = _args.whole(n, "n", 1, 1000)
    s = _args.text(scheduler, "scheduler")
    if s not in _SCHEDULERS:
        raise ValueError(f"scheduler: {s!r} is not one of {', '.join(_SCHEDULERS)}")
    return dict(_native.run_players(count, s, _args.duration_ns(period, "period"), _args.seed(seed) or 0))
