#!/usr/bin/env python3
"""Runs every experiment and says which hold.

    python experiments/run_all.py            # the full forms, with figures in experiments/out
    python experiments/run_all.py --short    # the short forms (CI): exit 1 if any result leaves its tolerance
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


def main() -> int:
    passthrough = sys.argv[1:]
    failed = []
    for name in EXPERIMENTS:
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
    print(f"all {len(EXPERIMENTS)} experiments hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
