"""Reading back the Perfetto traces :meth:`Hierarchy.sim` writes."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Dict, Union

import pandas as pd

#: Track groups of the trace (crates/sim/src/trace.rs).
_PID_CPUS, _PID_SCHEDULERS, _PID_THREADS = 1, 2, 3
_STOLEN_TID = 1000


def _ns(us: float) -> int:
    # Timestamps are microseconds with three decimals, written from whole
    # nanoseconds: rounding recovers them exactly.
    return int(round(us * 1000.0))


@dataclass(frozen=True)
class Trace:
    """A simulation trace as tables."""

    #: Every stretch a thread ran: cpu, thread, start_ns, end_ns.
    slices: pd.DataFrame
    #: Stolen intervals: cpu, start_ns, end_ns.
    stolen: pd.DataFrame
    #: Scheduler events (grants, revocations, replenishments, notes):
    #: scheduler, time_ns, event, args.
    scheduler_events: pd.DataFrame
    #: Deadline misses the workloads saw: thread, time_ns, misses.
    misses: pd.DataFrame


def read_trace(path: Union[str, "os.PathLike[str]"]) -> Trace:
    """Reads a trace written by ``sim(trace=...)`` or ``hsched sim --trace``."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names: Dict[tuple, str] = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    slices, stolen, sched, misses = [], [], [], []
    for e in events:
        ph, pid = e.get("ph"), e.get("pid")
        if ph == "X" and pid == _PID_CPUS:
            start = _ns(e["ts"])
            row = (start, start + _ns(e.get("dur", 0.0)))
            if e["tid"] >= _STOLEN_TID:
                stolen.append((e["tid"] - _STOLEN_TID, *row))
            else:
                slices.append((e["tid"], e["name"], *row))
        elif ph == "i" and pid == _PID_SCHEDULERS:
            track = names.get((pid, e["tid"]), str(e["tid"]))
            sched.append((track, _ns(e["ts"]), e["name"], e.get("args", {})))
        elif ph == "i" and pid == _PID_THREADS:
            thread = names.get((pid, e["tid"]), str(e["tid"]))
            misses.append((thread, _ns(e["ts"]), e.get("args", {}).get("misses", 1)))
    return Trace(
        slices=pd.DataFrame(slices, columns=["cpu", "thread", "start_ns", "end_ns"]),
        stolen=pd.DataFrame(stolen, columns=["cpu", "start_ns", "end_ns"]),
        scheduler_events=pd.DataFrame(sched, columns=["scheduler", "time_ns", "event", "args"]),
        misses=pd.DataFrame(misses, columns=["thread", "time_ns", "misses"]),
    )
