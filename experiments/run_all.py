#!/usr/bin/env python3
"""Runs every experiment and says which hold.

    python experiments/run_all.py            # the full forms, with figures in experiments/out
    python experiments/run_all.py --short    # the short forms (CI): exit 1 if any result leaves its tolerance
    sudo python experiments/run_all.py --live   # also the live ones (real threads, root)

The live experiments measure this machine, not a model: on a shared
2-CPU virtual machine their ratios move by a third between runs of a few
seconds, more than the documents' differences they are compared with, so
CI does not run them and a reader runs them on a quiet machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Most important first.
EXPERIMENTS = ["table_10_5.py", "table_10_4.py", "fig_6_2.py", "worked_examples_5_3_3.py",
               "stolen_time_11_3_11_4.py", "best_tables.py", "coop_table_3_1.py", "steere_figs_5_8.py"]
# On real threads, as root (each says SKIPPED without it).
LIVE = ["vassal_tables_1_2.py"]


def main() -> int:
    live = "--live" in sys.argv[1:]
    passthrough = [a for a in sys.argv[1:] if a != "--live"]
    chosen = EXPERIMENTS + LIVE if live else EXPERIMENTS
    failed = []
    for name in chosen:
        started = time.monotonic()
        print(f"==== {name} {' '.join(passthrough)}".rstrip(), flush=True)
        rc = subprocess.call([sys.executable, os.path.join(HERE, name), *passthrough])
        print(f"==== {name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {time.monotonic() - started:.1f} s\n",
              flush=True)
        if rc != 0:
            failed.append(name)
    if failed:
        print(f"experiments that left their tolerance: {', '.join(failed)}")
        return 1
    print(f"all {len(chosen)} experiments hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
