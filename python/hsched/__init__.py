"""hsched from Python: hierarchical CPU scheduling (Regehr 2001's
Hierarchical Loadable Schedulers) on a deterministic simulator, with the
guarantee analysis, task-set generators and sweeps on Ray.

    >>> import hsched
    >>> h = hsched.load("examples/home-computer.toml")
    >>> h.check().ok
    True
    >>> r = h.sim("2s", seed=1)
    >>> r.threads[["name", "share", "deadline_misses"]]  # doctest: +SKIP

The Rust crates do the work (the same code as the ``hsched`` command);
this package checks arguments and returns pandas data frames. The guide is
docs/python.md.
"""

from __future__ import annotations

from ._native import GenerateError, HierarchyError, SimulationError, __version__
from ._core import (
    Analysis,
    CheckResult,
    Hierarchy,
    Problem,
    SimResult,
    analyze,
    check,
    from_dict,
    load,
    loads,
    sim,
    to_toml,
)
from . import guarantee
from ._gen import TaskSet, generate
from ._players import players
from ._sweep import sweep
from ._trace import Trace, read_trace

__all__ = [
    "Analysis",
    "CheckResult",
    "GenerateError",
    "Hierarchy",
    "HierarchyError",
    "Problem",
    "SimResult",
    "SimulationError",
    "TaskSet",
    "Trace",
    "__version__",
    "analyze",
    "check",
    "from_dict",
    "generate",
    "guarantee",
    "load",
    "loads",
    "players",
    "read_trace",
    "sim",
    "sweep",
    "to_toml",
]
