#!/usr/bin/env python3
"""The Python API's overhead on a simulation: ``Hierarchy.sim`` against
``hsched sim --json`` on the simulator's 4-level benchmark
(crates/sim/benches/four_level.toml, 100 threads on 2 processors).

Each round runs the CLI (a child process: its CPU time from
``getrusage(RUSAGE_CHILDREN)``) and the Python call (this process's CPU
time, including reading the file and parsing the JSON report); rounds
alternate so that a noisy machine affects both alike. It prints the best
and the median of each and their ratio.

    python python/examples/sim_overhead.py [--duration 60s] [--rounds 5] [--hsched target/release/hsched]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import time

import hsched

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "crates", "sim", "benches", "four_level.toml")


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", default="60s")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--hsched", default="hsched")
    args = p.parse_args()
    cli, py, cli_wall, py_wall = [], [], [], []
    for _ in range(args.rounds):
        c0, w0 = children_cpu(), time.perf_counter()
        out = subprocess.run([args.hsched, "sim", BENCH, "--duration", args.duration, "--json"],
                             check=True, capture_output=True).stdout
        cli.append(children_cpu() - c0)
        cli_wall.append(time.perf_counter() - w0)
        c0, w0 = time.process_time(), time.perf_counter()
        r = hsched.load(BENCH).sim(args.duration)
        py.append(time.process_time() - c0)
        py_wall.append(time.perf_counter() - w0)
        assert r.report["events"] > 0 and len(out) > 0
    print(f"4-level benchmark, {args.duration} simulated, {args.rounds} rounds, {r.report['events']} HSI inputs per run")
    for name, cpu, wall in (("hsched sim --json", cli, cli_wall), ("Hierarchy.sim", py, py_wall)):
        print(f"  {name:<18} CPU s: best {min(cpu):.3f}, median {statistics.median(cpu):.3f}; "
              f"wall s: best {min(wall):.3f}, median {statistics.median(wall):.3f}")
    print(f"  Python / CLI CPU time: best {min(py) / min(cli):.3f}, median "
          f"{statistics.median(py) / statistics.median(cli):.3f}")


if __name__ == "__main__":
    main()
