"""Run every benchmark in turn and print their reports (the numbers in docs/BENCHMARKS.md).

    PYTHONPATH=src python benchmarks/run_all.py [--quick]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = ["bench_lil_ucb.py", "bench_fixed_budget.py", "bench_track_and_stop.py", "bench_thompson.py",
              "bench_reproduction_kernels.py", "bench_ask_tell.py", "bench_parallel.py", "bench_memory.py"]

if __name__ == "__main__":
    extra = sys.argv[1:]
    for name in BENCHMARKS:
        subprocess.run([sys.executable, str(HERE / name), *extra], check=True)
        print(flush=True)
