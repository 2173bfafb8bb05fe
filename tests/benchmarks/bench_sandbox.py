"""Sandbox latency: the warm pool (every limit in force) against a fresh `python3 -c` per call.

Run: .venv/bin/python tests/benchmarks/bench_sandbox.py [--calls 200]. Not collected by pytest.
Target: p50 <= 5 ms through the warm pool. Also reported, each against a baseline of the same run:
the warm pool against a fresh interpreter, and two sleeping snippets at once against one after the other.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from trainers.sandbox import SandboxLimits, WorkerPool

SNIPPET = "print(sum(range(100)))"


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
    }


def bench_pool_paced(pool: WorkerPool, calls: int, gap_s: float) -> dict[str, float]:
    """Latency of a call that finds a warm worker (calls spaced so the pool refills between them)."""
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        result = pool.run(SNIPPET)
        samples.append(time.perf_counter() - start)
        assert result.stdout == "4950\n", result
        time.sleep(gap_s)
    return percentiles(samples)


def bench_pool_sustained(pool: WorkerPool, calls: int, concurrency: int) -> dict[str, float]:
    """Back-to-back calls from `concurrency` threads: throughput is bounded by how fast workers start."""

    def one(_: int) -> float:
        start = time.perf_counter()
        assert pool.run(SNIPPET).stdout == "4950\n"
        return time.perf_counter() - start

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as executor:
        samples = list(executor.map(one, range(calls)))
    return {**percentiles(samples), "calls_per_s": calls / (time.perf_counter() - start)}


def bench_fresh_python(calls: int) -> dict[str, float]:
    """A new interpreter per call, without any isolation: the cost the pool hides."""
    samples = []
    start_all = time.perf_counter()
    for _ in range(calls):
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", SNIPPET], capture_output=True, text=True, check=True
        ).stdout
        samples.append(time.perf_counter() - start)
        assert out == "4950\n"
    return {**percentiles(samples), "calls_per_s": calls / (time.perf_counter() - start_all)}


def bench_overlapping_calls(pool: WorkerPool, seconds: float = 0.2, repeats: int = 3) -> dict[str, float]:
    """Two snippets that each sleep `seconds`, sent from two threads at once vs one after the other: the
    pool runs calls concurrently (ideal ratio 2)."""
    snippet = f"import time; time.sleep({seconds}); print(1)"

    def one(_: int) -> None:
        assert pool.run(snippet).stdout == "1\n"

    def two_at_once() -> None:
        with ThreadPoolExecutor(2) as executor:
            list(executor.map(one, range(2)))

    def best(fn) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
            time.sleep(0.05)  # let the pool refill
        return min(times)

    concurrent_s, sequential_s = best(two_at_once), best(lambda: [one(i) for i in range(2)])
    return {"concurrent_s": concurrent_s, "sequential_s": sequential_s, "ratio": sequential_s / concurrent_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--pool-size", type=int, default=4)
    args = parser.parse_args()
    pool = WorkerPool(SandboxLimits(), size=args.pool_size)
    print("isolation:", pool.isolation())
    time.sleep(1.0)
    rows = {
        "warm pool, paced (latency)": bench_pool_paced(pool, args.calls, gap_s=0.05),
        "warm pool, sustained (x2 threads)": bench_pool_sustained(pool, args.calls, concurrency=2),
        "fresh python3 -c per call": bench_fresh_python(max(20, args.calls // 4)),
    }
    overlap = bench_overlapping_calls(pool)
    pool.close()
    paced = rows["warm pool, paced (latency)"]
    print(f"{'mode':38s} {'p50 ms':>8s} {'p99 ms':>8s} {'calls/s':>9s}")
    for name, row in rows.items():
        rate = f"{row['calls_per_s']:9.1f}" if "calls_per_s" in row else f"{'-':>9s}"  # paced: sleeps between
        print(f"{name:38s} {row['p50_ms']:8.2f} {row['p99_ms']:8.2f} {rate}")
    print("target p50 <= 5 ms:", "met" if paced["p50_ms"] <= 5 else "NOT met")
    fresh = rows["fresh python3 -c per call"]
    print(f"warm pool p50 is {fresh['p50_ms'] / paced['p50_ms']:.1f}x faster than a fresh python3 -c")
    print(
        f"two 0.2 s snippets at once: {overlap['concurrent_s']:.3f} s vs {overlap['sequential_s']:.3f} s one "
        f"after the other ({overlap['ratio']:.2f}x, ideal 2x)"
    )


if __name__ == "__main__":
    main()
