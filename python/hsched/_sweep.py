"""Parameter sweeps over seeds, on Ray (``pip install ray``).

Each point of the sweep is a call ``fn(seed=s, **params)`` that returns a
dict of results (or a list of dicts: several rows). The points run as Ray
tasks on a local Ray instance (default) or on a cluster given its address;
their rows are gathered into one data frame with the parameters and the
seed. A point that raises, or whose worker dies, becomes a row with its
``error`` and leaves the others alone.
"""

from __future__ import annotations

import itertools
import sys
import time
import traceback
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import pandas as pd

Point = Dict[str, Any]
Progress = Callable[[int, int, int], None]


def _points(params: Union[Mapping[str, Sequence[Any]], Sequence[Mapping[str, Any]]]) -> List[Point]:
    """A grid (dict of lists: every combination) or a list of points."""
    if isinstance(params, Mapping):
        keys = list(params)
        for k in keys:
            if not isinstance(k, str):
                raise TypeError(f"params: keys must be str, got {type(k).__name__}")
            v = params[k]
            if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
                raise TypeError(f"params[{k!r}]: expected a list of values, got {type(v).__name__}")
        values = [list(params[k]) for k in keys]
        return [dict(zip(keys, combo)) for combo in itertools.product(*values)]
    if isinstance(params, (list, tuple)):
        out = []
        for i, p in enumerate(params):
            if not isinstance(p, Mapping):
                raise TypeError(f"params[{i}]: expected a dict of parameters, got {type(p).__name__}")
            out.append(dict(p))
        return out
    raise TypeError(f"params: expected a dict of lists or a list of dicts, got {type(params).__name__}")


def _seeds(seeds: Union[int, Sequence[int]]) -> List[int]:
    if isinstance(seeds, bool):
        raise TypeError("seeds: expected a count or a list of seeds, got a bool")
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError(f"seeds: {seeds}: give at least one seed")
        return list(range(seeds))
    if isinstance(seeds, (list, tuple, range)):
        out = list(seeds)
        for s in out:
            if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 1 << 64:
                raise ValueError(f"seeds: {s!r} is not a seed (a whole number from 0 to 2**64 - 1)")
        if not out:
            raise ValueError("seeds: the list is empty")
        return out
    raise TypeError(f"seeds: expected an int or a list of ints, got {type(seeds).__name__}")


def _run_chunk(fn: Callable[..., Any], chunk: List[Tuple[int, Point, int]]) -> List[Dict[str, Any]]:
    """Runs the points of one task; a point that raises gives an error row."""
    rows: List[Dict[str, Any]] = []
    for index, point, seed in chunk:
        base = {"point": index, **point, "seed": seed}
        try:
            out = fn(seed=seed, **point)
        except Exception as e:  # one point's failure must not lose the others
            rows.append({**base, "error": f"{type(e).__name__}: {e}",
                         "traceback": traceback.format_exc()})
            continue
        results = out if isinstance(out, list) else [out]
        for r in results:
            if not isinstance(r, Mapping):
                rows.append({**base, "error": f"TypeError: the function returned a {type(r).__name__}, not a dict"})
                break
            rows.append({**base, **r, "error": None})
    return rows


def _print_progress(done: int, total: int, failed: int) -> None:
    sys.stderr.write(f"\rsweep: {done}/{total} points done, {failed} failed")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def sweep(
    fn: Callable[..., Any],
    params: Union[Mapping[str, Sequence[Any]], Sequence[Mapping[str, Any]]],
    seeds: Union[int, Sequence[int]] = 1,
    *,
    address: Optional[str] = None,
    num_cpus: Optional[int] = None,
    chunk_size: int = 1,
    progress: Union[bool, Progress] = True,
    backend: str = "ray",
    runtime_env: Optional[Dict[str, Any]] = None,
) -> pd.DataFrame:
    """Runs ``fn(seed=s, **point)`` for every point of ``params`` and every
    seed, and gathers the rows into one data frame.

    ``params``: a dict of lists (every combination) or a list of dicts.
    ``seeds``: a count (0, 1, ... N-1) or a list. ``fn`` returns a dict of
    results, or a list of dicts for several rows per point.

    ``backend="ray"`` (default) runs the points as Ray tasks: on a local
    Ray instance started with ``num_cpus`` processors unless Ray is already
    initialized, or on the cluster at ``address`` (``"auto"`` inside a
    cluster, ``"ray://HEAD:10001"`` from outside; docs/python.md says how).
    ``runtime_env`` goes to ``ray.init`` (for instance
    ``{"pip": ["hsched"]}`` on a cluster without the package).
    ``backend="serial"`` runs them in this process, in order.
    ``chunk_size`` points share one task (fewer, larger tasks for short
    points). ``progress``: True prints ``done/total`` on stderr; a callable
    is called as ``progress(done, total, failed)``.

    The frame has the columns ``point`` (the point's index), the
    parameters, ``seed``, the results, and ``error`` (None, or the
    exception of a point that raised or whose worker died; its traceback
    in ``traceback``). Rows are in point order, then seed order.
    """
    if not callable(fn):
        raise TypeError(f"fn: expected a function, got {type(fn).__name__}")
    points = _points(params)
    seed_list = _seeds(seeds)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size: {chunk_size!r}: give a whole number of at least 1")
    if backend not in ("ray", "serial"):
        raise ValueError(f"backend: {backend!r} is not 'ray' or 'serial'")
    if address is not None and not isinstance(address, str):
        raise TypeError(f"address: expected a str, got {type(address).__name__}")
    report: Optional[Progress]
    if progress is True:
        report = _print_progress
    elif progress is False or progress is None:
        report = None
    elif callable(progress):
        report = progress
    else:
        raise TypeError(f"progress: expected a bool or a function, got {type(progress).__name__}")

    work = [(i, p, s) for i, p in enumerate(points) for s in seed_list]
    chunks = [work[k:k + chunk_size] for k in range(0, len(work), chunk_size)]
    total = len(work)
    rows: List[Dict[str, Any]] = []
    if backend == "serial":
        for chunk in chunks:
            rows.extend(_run_chunk(fn, chunk))
            if report:
                report(len({(r["point"], r["seed"]) for r in rows}), total,
                       sum(1 for r in rows if r.get("error")))
    else:
        rows = _on_ray(fn, chunks, total, address, num_cpus, runtime_env, report)
    frame = pd.DataFrame(rows)
    if "error" not in frame.columns:
        frame["error"] = None
    return frame.sort_values(["point", "seed"], kind="stable").reset_index(drop=True)


def _pickle_by_value(fn: Callable[..., Any]) -> None:
    """Ships ``fn``'s module to the workers with it when they cannot import
    it (a script, a test file, a notebook): Ray pickles functions of
    importable modules by name."""
    import os
    import sysconfig

    from ray import cloudpickle

    mod = sys.modules.get(getattr(fn, "__module__", "") or "")
    if mod is None or mod.__name__ == "__main__" or mod.__name__.split(".")[0] == "hsched":
        return
    path = getattr(mod, "__file__", None) or ""
    installed = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    if path and not any(os.path.abspath(path).startswith(os.path.abspath(p)) for p in installed):
        cloudpickle.register_pickle_by_value(mod)


def _on_ray(
    fn: Callable[..., Any],
    chunks: List[List[Tuple[int, Point, int]]],
    total: int,
    address: Optional[str],
    num_cpus: Optional[int],
    runtime_env: Optional[Dict[str, Any]],
    report: Optional[Progress],
) -> List[Dict[str, Any]]:
    try:
        import ray
    except ImportError:
        raise ImportError(
            "hsched.sweep runs on Ray: pip install ray, or pass backend='serial'"
        ) from None
    if not ray.is_initialized():
        kwargs: Dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
        if address is None:
            kwargs["num_cpus"] = num_cpus
        else:
            kwargs["address"] = address
        if runtime_env is not None:
            kwargs["runtime_env"] = runtime_env
        ray.init(**kwargs)
    _pickle_by_value(fn)
    # No retries: a point whose worker dies is reported, not run twice.
    task = ray.remote(max_retries=0)(_run_chunk)
    fn_ref = ray.put(fn)
    pending = {task.remote(fn_ref, c): c for c in chunks}
    rows: List[Dict[str, Any]] = []
    done = failed = 0
    last = 0.0
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
        for ref in ready:
            chunk = pending.pop(ref)
            try:
                got = ray.get(ref)
            except Exception as e:  # the worker died: each of its points fails
                got = [{"point": i, **p, "seed": s, "error": f"{type(e).__name__}: {e}"}
                       for i, p, s in chunk]
            rows.extend(got)
            done += len(chunk)
            failed += len({(r["point"], r["seed"]) for r in got if r.get("error")})
        now = time.monotonic()
        if report and (ready and (now - last > 0.5 or not pending)):
            report(done, total, failed)
            last = now
    return rows
