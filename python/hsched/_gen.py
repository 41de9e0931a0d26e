"""Random task sets (``hsched generate``)."""

from __future__ import annotations

from typing import Optional

import pandas as pd

from . import _args, _native
from ._args import DurationLike
from ._core import Hierarchy, loads

_METHODS = ("uunifast", "uunifast-discard", "randfixedsum")
_DEADLINES = ("implicit", "constrained", "arbitrary")


class TaskSet:
    """A generated set of periodic tasks."""

    __slots__ = ("_s", "seed")

    def __init__(self, native: "_native.NativeTaskSet", seed: int) -> None:
        self._s = native
        #: The seed that generated it.
        self.seed = seed

    def __repr__(self) -> str:
        return f"<hsched.TaskSet {len(self)} tasks, U={self.utilization:.4f}, seed {self.seed}>"

    def __len__(self) -> int:
        return len(self._s.tasks())

    @property
    def tasks(self) -> pd.DataFrame:
        """name, utilization, period_ns, exec_ns, deadline_ns, jitter_ns and
        the deadline-monotonic priority of each task."""
        return pd.DataFrame(self._s.tasks())

    @property
    def utilization(self) -> float:
        """The total utilization after rounding execution times to nanoseconds."""
        return self._s.utilization()

    def to_hierarchy(self, cpus: int = 1) -> str:
        """A hierarchy file: an ``fp`` root with deadline-monotonic priorities."""
        return self._s.to_hierarchy(_args.whole(cpus, "cpus", 1, 1024))

    def to_threads(self, scheduler: str, *, priorities: bool = False) -> str:
        """Only the ``[[thread]]`` tables, under ``scheduler``, to add to
        another file (``priorities``: a deadline-monotonic ``priority`` each)."""
        return self._s.to_threads(_args.text(scheduler, "scheduler"), _args.boolean(priorities, "priorities"))

    def hierarchy(self, cpus: int = 1) -> Hierarchy:
        """:meth:`to_hierarchy`, parsed."""
        return loads(self.to_hierarchy(cpus), name=f"<taskset seed {self.seed}>")


def generate(
    n: int,
    utilization: float,
    *,
    method: str = "uunifast",
    min_task_utilization: float = 0.0,
    max_task_utilization: float = 1.0,
    period_min: DurationLike = "10ms",
    period_max: DurationLike = "1s",
    granularity: DurationLike = "1ms",
    deadlines: str = "implicit",
    deadline_factor: Optional[float] = None,
    jitter: float = 0.0,
    seed: int = 0,
) -> TaskSet:
    """Generates ``n`` periodic tasks of total ``utilization``, as
    ``hsched generate``.

    ``method``: ``"uunifast"`` (Bini & Buttazzo 2005; a total of at most
    1), ``"uunifast-discard"`` (Davis & Burns 2009) or ``"randfixedsum"``
    (Stafford's algorithm, Emberson, Stafford & Davis 2010), the last two
    keeping each task within ``[min_task_utilization,
    max_task_utilization]``. Periods are log-uniform in ``[period_min,
    period_max]``, multiples of ``granularity`` (``0``: not rounded).
    ``deadlines``: ``"implicit"`` (D = T), ``"constrained"`` (D uniform in
    ``[max(C, deadline_factor*T), T]``) or ``"arbitrary"`` (D uniform in
    ``[C, deadline_factor*T]``, default factor 2). ``jitter``: release
    jitter as a fraction of the period. Raises :class:`GenerateError` for
    parameters out of range."""
    n = _args.whole(n, "n", 1, 100_000)
    u = _args.number(utilization, "utilization", 0.0, 1e6)
    if u <= 0:
        raise ValueError("utilization: must be above 0")
    m = _args.text(method, "method")
    if m not in _METHODS:
        raise ValueError(f"method: {m!r} is not one of {', '.join(_METHODS)}")
    dk = _args.text(deadlines, "deadlines")
    if dk not in _DEADLINES:
        raise ValueError(f"deadlines: {dk!r} is not one of {', '.join(_DEADLINES)}")
    df = None if deadline_factor is None else _args.number(deadline_factor, "deadline_factor", 0.0, 1000.0)
    gran = 0 if granularity in (0, "0") else _args.duration_ns(granularity, "granularity")
    s = _args.seed(seed)
    native = _native.generate(
        n,
        u,
        m,
        _args.number(min_task_utilization, "min_task_utilization", 0.0, 1e6),
        _args.number(max_task_utilization, "max_task_utilization", 0.0, 1e6),
        _args.duration_ns(period_min, "period_min"),
        _args.duration_ns(period_max, "period_max"),
        gran,
        dk,
        df,
        _args.number(jitter, "jitter", 0.0, 1.0),
        s,
    )
    return TaskSet(native, s or 0)
