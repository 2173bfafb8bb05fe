"""Generation throughput: the HF backend's own sampling loop against plain `model.generate`.

Run: .venv/bin/python tests/benchmarks/bench_generation.py [--batch 32 --new-tokens 64].
Not collected by pytest.
Target (issue 3): not slower than `model.generate` on the same tiny model and batch; aim for 1.5x.
Two workloads: every row wants the same number of tokens, and a ragged batch where rows want 8..N
tokens (as rollout turns do: they stop at tool calls), which `generate` can only run to the longest.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from trainers.backends.base import GenerationRequest
from trainers.backends.hf import HFBackend
from trainers.backends.prefill_plan import left_pad
from trainers.backends.sampling import SamplingParams
from trainers.models.tiny import build_tiny_model


def useful_tokens(row: list[int], limit: int, eos: set[int]) -> int:
    """Tokens up to the row's own limit and its first end-of-sequence (what a rollout keeps)."""
    for i, tok in enumerate(row[:limit]):
        if tok in eos:
            return i + 1
    return min(len(row), limit)


def bench_backend(
    backend: HFBackend, prompts: list[list[int]], limits: list[int], seed: int
) -> tuple[float, int]:
    requests = [
        GenerationRequest(p, n, [], SamplingParams(seed=seed)) for p, n in zip(prompts, limits, strict=True)
    ]
    start = time.perf_counter()
    outputs = backend.generate(requests)
    return time.perf_counter() - start, sum(len(o.token_ids) for o in outputs)


@torch.no_grad()
def bench_generate(
    backend: HFBackend, prompts: list[list[int]], limits: list[int], seed: int
) -> tuple[float, int]:
    ids, mask = left_pad(prompts, backend.pad_id, backend.device)
    torch.manual_seed(seed)
    start = time.perf_counter()
    out = backend.model.generate(
        input_ids=ids,
        attention_mask=mask,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_new_tokens=max(limits),
        pad_token_id=backend.pad_id,
    )
    seconds = time.perf_counter() - start
    new = out[:, ids.shape[1] :].tolist()
    return seconds, sum(useful_tokens(r, n, backend.eos_ids) for r, n in zip(new, limits, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7, help="pairs of runs: the shared machine is noisy")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    backend = HFBackend(build_tiny_model(tempfile.mkdtemp()), device="cpu")
    rng = random.Random(0)
    texts = [
        f"Question {i}: what is {rng.randint(0, 999)} * {rng.randint(0, 999)}?" * rng.randint(1, 3)
        for i in range(args.batch)
    ]
    prompts = [backend.tokenizer.encode(t, add_special_tokens=False) for t in texts]
    workloads = {
        "same_length": [args.new_tokens] * args.batch,
        "ragged": [rng.randint(8, args.new_tokens) for _ in range(args.batch)],
    }
    bench_backend(backend, prompts, [4] * args.batch, 0)  # warm-up both paths
    bench_generate(backend, prompts, [4] * args.batch, 0)
    rows = []
    for name, limits in workloads.items():
        ours, theirs = [], []
        for seed in range(args.repeats):  # interleaved, so load changes hit both alike
            seconds, tokens = bench_backend(backend, prompts, limits, seed)
            ours.append(tokens / seconds)
            seconds, tokens = bench_generate(backend, prompts, limits, seed)
            theirs.append(tokens / seconds)
        rows.append(
            {
                "workload": name,
                "backend_tokens_per_s": round(max(ours)),
                "generate_tokens_per_s": round(max(theirs)),
                # the median of back-to-back pairs is steadier than best-of on a shared machine
                "ratio": round(statistics.median(o / t for o, t in zip(ours, theirs, strict=True)), 2),
            }
        )
    print(json.dumps({"batch": args.batch, "max_new_tokens": args.new_tokens, "results": rows}, indent=2))
    print("\n| workload | HF backend tok/s | model.generate tok/s | ratio |\n|---|---|---|---|")
    for row in rows:
        ours, theirs = row["backend_tokens_per_s"], row["generate_tokens_per_s"]
        print(f"| {row['workload']} | {ours} | {theirs} | {row['ratio']}x |")
    print("\ntarget: ratio >= 1.0 (aim 1.5)")


if __name__ == "__main__":
    main()
