"""Hierarchies: load, check, analyze, simulate.

Everything here calls the same Rust code as the ``hsched`` command
(through :mod:`hsched._native`); this module only checks arguments and
turns reports into data frames.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import pandas as pd

from . import _args, _native, _toml
from ._args import DurationLike

PathLike = Union[str, "os.PathLike[str]"]

#: Statistics of a distribution in the report (docs/metrics.md).
_DIST_STATS = ("count", "min", "max", "mean", "p50", "p90", "p99", "p999")


def _path(value: object, name: str) -> str:
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)  # type: ignore[arg-type]
    raise TypeError(f"{name}: expected a path (str or os.PathLike), got {type(value).__name__}")


def _flatten(row: Mapping[str, Any]) -> Dict[str, Any]:
    """A report row with its distributions spread into columns:
    ``lateness_ns`` becomes ``lateness_count``, ``lateness_p99_ns``, ..."""
    out: Dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, Mapping) or (v is None and k in ("lateness_ns", "dispatch_latency_ns")):
            base = k[:-3] if k.endswith("_ns") else k
            for s in _DIST_STATS:
                x = None if v is None else v.get(s)
                out[f"{base}_count" if s == "count" else f"{base}_{s}_ns"] = x
        else:
            out[k] = v
    return out


@dataclass(frozen=True)
class Problem:
    """A guarantee problem, as ``hsched check`` prints it."""

    #: A stable code (``unacceptable``, ``refused``, ``request-unsatisfied``, ...).
    code: str
    #: One line.
    headline: str
    #: ``(label, text)`` pairs: ``expected``, ``why``, ``path``, ``hint``.
    details: List[Tuple[str, str]]
    #: ``"scheduler"`` or ``"thread"``, or None.
    kind: Optional[str]
    #: The node's name, or None.
    node: Optional[str]
    #: The file, as loaded.
    file: str
    #: Where the node is declared (1-based), when known.
    line: Optional[int]
    col: Optional[int]
    #: The CLI's rendering.
    text: str

    @property
    def hint(self) -> Optional[str]:
        """The ``hint`` detail, if any."""
        return next((v for k, v in self.details if k == "hint"), None)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class CheckResult:
    """What :meth:`Hierarchy.check` found. True when there is no problem."""

    file: str
    summary: str
    problems: List[Problem]
    notes: List[str]

    @property
    def ok(self) -> bool:
        """No guarantee problem."""
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            return "\n".join([f"{self.file}: ok ({self.summary})", *self.notes])
        n = len(self.problems)
        tail = f"{self.file}: {n} guarantee problem{'' if n == 1 else 's'}: the hierarchy does not keep its promises"
        return "\n".join([*(p.text.rstrip() for p in self.problems), "", tail, *self.notes])


@dataclass(frozen=True)
class Analysis:
    """``hsched analyze --json`` as data (schema ``hsched-analyze/1``,
    docs/guarantees.md)."""

    #: The whole JSON document.
    data: Dict[str, Any]

    @property
    def composes(self) -> bool:
        """Every guarantee composes (as ``hsched check``)."""
        return bool(self.data["composes"])

    @property
    def certified(self) -> bool:
        """It composes and every rate-monotonic application is certified to meet its deadlines."""
        return bool(self.data["certified"])

    @property
    def instances(self) -> pd.DataFrame:
        """One row per scheduler instance: what it receives, uses and its status."""
        rows = [
            {
                "name": i["name"],
                "policy": i["policy"],
                "receives": ", ".join(r for r in i["receives"] if r),
                "uses": ", ".join(i["uses"]),
                "request": i["request"],
                "status": i["status"],
            }
            for i in self.data["instances"]
        ]
        return pd.DataFrame(rows, columns=["name", "policy", "receives", "uses", "request", "status"])

    @property
    def applications(self) -> pd.DataFrame:
        """One row per rate-monotonic application: its verdict and proposed reservation."""
        rows = []
        for a in self.data["applications"]:
            r = a.get("reservation") or {}
            rows.append(
                {
                    "scheduler": a["scheduler"],
                    "under": a["under"],
                    "verdict": a["verdict"],
                    "reason": a["reason"],
                    "utilization": a["utilization"],
                    "reservation": r.get("guarantee"),
                    "reservation_amount_ns": r.get("amount_ns"),
                    "reservation_period_ns": r.get("period_ns"),
                }
            )
        cols = ["scheduler", "under", "verdict", "reason", "utilization", "reservation",
                "reservation_amount_ns", "reservation_period_ns"]
        return pd.DataFrame(rows, columns=cols)

    @property
    def response_times(self) -> pd.DataFrame:
        """One row per thread of each application, in priority order:
        its task, worst-case response time and whether it meets its deadline."""
        rows = [
            {"application": a["scheduler"], "verdict": a["verdict"], **t}
            for a in self.data["applications"]
            for t in a["threads"]
        ]
        cols = ["application", "verdict", "thread", "priority", "exec_ns", "charged_exec_ns",
                "period_ns", "deadline_ns", "jitter_ns", "utilization", "response_ns", "meets"]
        return pd.DataFrame(rows, columns=cols)

    @property
    def problems(self) -> List[Dict[str, Any]]:
        """The guarantee problems, as data."""
        return list(self.data["problems"])


#: The columns of :attr:`SimResult.jobs`, as ``hsched sim --job-records``
#: writes them to ``jobs.csv``.
JOB_COLUMNS = ("thread", "job", "release_ns", "deadline_ns", "completion_ns",
               "response_ns", "lateness_ns", "missed")


@dataclass(frozen=True)
class SimResult:
    """A simulation's report (docs/metrics.md defines every figure)."""

    #: The JSON report, as parsed.
    report: Dict[str, Any]
    #: The trace and Gantt chart written, if asked.
    trace: Optional[str] = None
    gantt: Optional[str] = None
    #: Whether the run kept per-job records (``sim(..., jobs=True)``).
    job_records: bool = False
    _frames: Dict[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)

    @property
    def duration_ns(self) -> int:
        """Simulated time."""
        return int(self.report["duration_ns"])

    @property
    def seed(self) -> int:
        """The seed the run used."""
        return int(self.report["seed"])

    def _frame(self, key: str, flatten: bool = False) -> pd.DataFrame:
        if key not in self._frames:
            rows = self.report[key]
            self._frames[key] = pd.DataFrame([_flatten(r) for r in rows] if flatten else rows)
        return self._frames[key]

    @property
    def threads(self) -> pd.DataFrame:
        """One row per thread: CPU time, share, jobs, misses, lateness and
        dispatch latency (distributions spread into ``*_p99_ns`` columns)."""
        return self._frame("threads", flatten=True)

    @property
    def schedulers(self) -> pd.DataFrame:
        """One row per scheduler instance: the CPU time it received."""
        return self._frame("schedulers")

    @property
    def jobs(self) -> pd.DataFrame:
        """One row per job with a deadline, when the run kept them
        (``sim(..., jobs=True)``): ``thread``, ``job`` (from 0, in release
        order), ``release_ns``, ``deadline_ns``, ``completion_ns``,
        ``response_ns``, ``lateness_ns`` and ``missed``. A job that did not
        finish has no completion, response or lateness (``<NA>``) and is
        missed when its deadline passed before the end. Raises
        ``ValueError`` when the run was not asked for them."""
        if "jobs" not in self._frames:
            if not self.job_records and "jobs" not in self.report:
                raise ValueError("jobs: the run kept no per-job records; simulate with jobs=True")
            rows = self.report.get("jobs", [])
            frame = pd.DataFrame(rows, columns=list(JOB_COLUMNS))
            for c in ("job", "release_ns", "deadline_ns"):
                frame[c] = frame[c].astype("int64")
            for c in ("completion_ns", "response_ns", "lateness_ns"):
                frame[c] = frame[c].astype("Int64")
            frame["missed"] = frame["missed"].astype(bool)
            self._frames["jobs"] = frame
        return self._frames["jobs"]

    @property
    def principals(self) -> pd.DataFrame:
        """One row per principal."""
        return self._frame("principals")

    @property
    def cpus(self) -> pd.DataFrame:
        """One row per processor: busy, idle, stolen, switching."""
        if "per_cpu" not in self._frames:
            self._frames["per_cpu"] = pd.DataFrame(self.report["machine"]["per_cpu"])
        return self._frames["per_cpu"]

    @property
    def machine(self) -> Dict[str, Any]:
        """The machine's totals."""
        return {k: v for k, v in self.report["machine"].items() if k != "per_cpu"}

    def thread(self, name: str) -> Dict[str, Any]:
        """One thread's figures as a dict; ``KeyError`` if there is none."""
        for t in self.report["threads"]:
            if t["name"] == name:
                return dict(t)
        raise KeyError(name)

    def to_json(self) -> str:
        """The report as ``hsched sim --json`` prints it."""
        return json.dumps(self.report, indent=2)


class Hierarchy:
    """A parsed and validated hierarchy. Make one with :func:`load`,
    :func:`loads` or :func:`from_dict`."""

    __slots__ = ("_h",)

    def __init__(self, native: "_native.NativeHierarchy") -> None:
        self._h = native

    def __repr__(self) -> str:
        return f"<hsched.Hierarchy {self.file!r}: {self.summary}>"

    @property
    def file(self) -> str:
        """The name it is reported under: its path, or the name given to :func:`loads`."""
        return self._h.file

    @property
    def summary(self) -> str:
        """``1 CPU, 8 schedulers, 8 threads``."""
        return self._h.summary()

    @property
    def cpus(self) -> int:
        """Processors."""
        return self._h.cpus

    @property
    def schedulers(self) -> pd.DataFrame:
        """name, policy and parents of every scheduler instance, in file order."""
        rows = [{"name": n, "policy": p, "parents": list(ps)} for n, p, ps in self._h.schedulers()]
        return pd.DataFrame(rows, columns=["name", "policy", "parents"])

    @property
    def threads(self) -> pd.DataFrame:
        """name and scheduler of every thread, in file order."""
        return pd.DataFrame(self._h.threads(), columns=["name", "scheduler"])

    def check(self) -> CheckResult:
        """The guarantee check of ``hsched check``: every scheduler receives a
        guarantee it can use and every request is met (Regehr 2001, ch. 5)."""
        problems, notes = self._h.check()
        return CheckResult(
            file=self.file,
            summary=self.summary,
            problems=[Problem(**p) for p in problems],
            notes=list(notes),
        )

    def analyze(self, *, tolerance: float = 0.01, horizon: DurationLike = "1h") -> Analysis:
        """``hsched analyze``: what every instance receives, the response
        times of each rate-monotonic application and the reservation the
        search of Regehr 2001, §6.1.2 proposes.

        ``tolerance``: how much more utilization than the smallest the
        search may give a longer period (a fraction: 0.01 is 1 %).
        ``horizon``: the longest busy period followed."""
        tol = _args.number(tolerance, "tolerance", 0.0, 10.0)
        hz = _args.duration_ns(horizon, "horizon")
        return Analysis(json.loads(self._h.analyze(tol, hz)))

    def sim(
        self,
        duration: Optional[DurationLike] = None,
        *,
        seed: Optional[int] = None,
        check_protocol: bool = False,
        trace: Optional[PathLike] = None,
        gantt: Optional[PathLike] = None,
        window: Optional[Tuple[DurationLike, DurationLike]] = None,
        gantt_color: str = "cpu",
        jobs: bool = False,
    ) -> SimResult:
        """Runs the hierarchy on the simulator, as ``hsched sim``.

        ``duration`` and ``seed`` default to the file's ``[sim]`` section
        (else 10 s and 0). ``trace`` writes a Perfetto trace (read it back
        with :func:`hsched.read_trace`), ``gantt`` an SVG Gantt chart of
        ``window`` (default: the first second), which also limits the trace;
        ``gantt_color="thread"`` colors its bars by thread, not processor.
        ``jobs=True`` keeps a record of every job with a deadline, as the
        data frame :attr:`SimResult.jobs` (and the report's ``jobs`` list);
        off by default, as the records grow with the run.
        Raises :class:`SimulationError` when the run cannot finish."""
        d = _args.opt_duration_ns(duration, "duration")
        s = _args.seed(seed)
        cp = _args.boolean(check_protocol, "check_protocol")
        tr = None if trace is None else _path(trace, "trace")
        ga = None if gantt is None else _path(gantt, "gantt")
        win = None
        if window is not None:
            if not isinstance(window, (tuple, list)) or len(window) != 2:
                raise TypeError("window: expected a pair (start, end) of durations")
            a = _args.duration_ns(window[0], "window[0]", allow_zero=True)
            b = _args.duration_ns(window[1], "window[1]")
            if b <= a:
                raise ValueError("window: the window must end after it starts")
            if tr is None and ga is None:
                raise ValueError("window: chooses what gantt and trace show, and neither was given")
            win = (a, b)
        gc = _args.text(gantt_color, "gantt_color")
        if gc not in ("cpu", "thread"):
            raise ValueError(f"gantt_color: `{gc}` is not one of cpu, thread")
        jr = _args.boolean(jobs, "jobs")
        report = json.loads(self._h.sim(d, s, cp, tr, ga, win, gc, jr))
        return SimResult(report, trace=tr, gantt=ga, job_records=jr)

    def default_duration_ns(self) -> int:
        """The run length :meth:`sim` uses without a duration."""
        return self._h.default_duration_ns()


def load(path: PathLike, *, workload: Optional[PathLike] = None,
         reference_policies: bool = False) -> Hierarchy:
    """Reads and validates a hierarchy file, with the rt-app file it names
    (or ``workload`` in its place, as ``hsched sim --workload``). Raises
    :class:`HierarchyError` with the file, line and hint.

    ``reference_policies=True`` also accepts the yardstick policies that
    are not schedulers to deploy (``edf-true-periods``: EDF told each
    child's true period, ``hsched_sim::reference``), and simulates with
    them; the ``hsched`` command does not know them."""
    p = _path(path, "path")
    w = None if workload is None else _path(workload, "workload")
    ref = _args.boolean(reference_policies, "reference_policies")
    return Hierarchy(_native.load(p, w, ref))


def loads(text: str, *, name: str = "<string>", workload: Optional[PathLike] = None,
          reference_policies: bool = False) -> Hierarchy:
    """Parses hierarchy text; errors name ``name`` as the file.
    ``reference_policies``: as for :func:`load`."""
    t = _args.text(text, "text")
    n = _args.text(name, "name")
    w = None if workload is None else _path(workload, "workload")
    ref = _args.boolean(reference_policies, "reference_policies")
    return Hierarchy(_native.parse(t, n, w, ref))


def to_toml(doc: Mapping[str, Any]) -> str:
    """The hierarchy-file text of a dict in the form :func:`from_dict` takes."""
    return _toml.dumps(doc)


def from_dict(doc: Mapping[str, Any], *, name: str = "<dict>", reference_policies: bool = False) -> Hierarchy:
    """Builds a hierarchy from a dict shaped like the file::

        hsched.from_dict({
            "scheduler": [{"name": "fp", "policy": "fp"}],
            "thread": [{"name": "video", "scheduler": "fp", "params": {"priority": 1},
                        "workload": {"kind": "periodic", "period": "33ms", "exec": "10ms"}}],
        })

    It is written as TOML (:func:`to_toml`) and validated like a file:
    errors carry the line of that text. ``reference_policies``: as for
    :func:`load`."""
    return loads(_toml.dumps(doc), name=name, reference_policies=reference_policies)


def _hierarchy(h: Union[Hierarchy, PathLike], name: str = "hierarchy") -> Hierarchy:
    if isinstance(h, Hierarchy):
        return h
    if isinstance(h, (str, os.PathLike)):
        return load(h)
    raise TypeError(f"{name}: expected a Hierarchy or a path, got {type(h).__name__}")


def check(h: Union[Hierarchy, PathLike]) -> CheckResult:
    """:meth:`Hierarchy.check` of a hierarchy or a file."""
    return _hierarchy(h).check()


def analyze(h: Union[Hierarchy, PathLike], **kwargs: Any) -> Analysis:
    """:meth:`Hierarchy.analyze` of a hierarchy or a file."""
    return _hierarchy(h).analyze(**kwargs)


def sim(h: Union[Hierarchy, PathLike], duration: Optional[DurationLike] = None, **kwargs: Any) -> SimResult:
    """:meth:`Hierarchy.sim` of a hierarchy or a file."""
    return _hierarchy(h).sim(duration, **kwargs)
