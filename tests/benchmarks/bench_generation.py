"""Generation throughput: the HF backend's sampling loop (fast decoder and plain model calls) against
`model.generate`.

Run: .venv/bin/python tests/benchmarks/bench_generation.py [--batch 32 --new-tokens 64].
Not collected by pytest.
Target: not slower than `model.generate` on the same tiny model and batch; aim for 1.5x.
Three workloads: every row wants the same number of tokens; a ragged batch where rows want 8..N
tokens (as rollout turns do: they stop at tool calls), which `generate` can only run to the longest;
and GRPO groups (8 prompts x 8 seeded samples, 32 tokens). The three paths run interleaved, so load
changes on the shared machine hit them alike; ratios are medians over the back-to-back runs.
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
from trainers.config.sampling import SamplingParams
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
    requests = [  # a seed per row: the samples of one prompt differ
        GenerationRequest(p, n, [], SamplingParams(seed=seed * 10_000 + row))
        for row, (p, n) in enumerate(zip(prompts, limits, strict=True))
    ]
    backend.begin_rollout()  # no prefix entries carried from the previous run
    with backend.generating():  # a vLLM engine generates only inside
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
    parser.add_argument("--repeats", type=int, default=7, help="rounds of runs: the shared machine is noisy")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    fast = HFBackend(build_tiny_model(tempfile.mkdtemp()), device="cpu")
    plain = HFBackend(fast.model, fast.tokenizer, fast_decode=False)
    rng = random.Random(0)
    texts = [
        f"Question {i}: what is {rng.randint(0, 999)} * {rng.randint(0, 999)}?" * rng.randint(1, 3)
        for i in range(args.batch)
    ]
    prompts = [fast.tokenizer.encode(t, add_special_tokens=False) for t in texts]
    groups = [p for p in prompts[:8] for _ in range(8)]
    workloads = {
        "same_length": (prompts, [args.new_tokens] * args.batch),
        "ragged": (prompts, [rng.randint(8, args.new_tokens) for _ in range(args.batch)]),
        "grpo_8x8_32": (groups, [32] * len(groups)),
    }
    paths = {
        "fast": lambda p, n, seed: bench_backend(fast, p, n, seed),
        "model_calls": lambda p, n, seed: bench_backend(plain, p, n, seed),
        "generate": lambda p, n, seed: bench_generate(fast, p, n, seed),
    }
    for run in paths.values():  # warm-up
        run(prompts, [4] * args.batch, 0)
    rows = []
    for name, (batch, limits) in workloads.items():
        rates: dict[str, list[float]] = {path: [] for path in paths}
        for seed in range(args.repeats):
            for path, run in paths.items():
                seconds, tokens = run(batch, limits, seed)
                rates[path].append(tokens / seconds)
        row = {"workload": name, **{f"{path}_tokens_per_s": round(max(r)) for path, r in rates.items()}}
        for path in ("model_calls", "generate"):
            pairs = zip(rates["fast"], rates[path], strict=True)
            row[f"fast_vs_{path}"] = round(statistics.median(f / o for f, o in pairs), 2)
        rows.append(row)
    print(json.dumps({"batch": args.batch, "max_new_tokens": args.new_tokens, "results": rows}, indent=2))
    header = (
        "workload | fast decoder tok/s | model calls tok/s | generate tok/s | fast / calls | fast / generate"
    )
    print(f"\n| {header} |\n|---|---|---|---|---|---|")
    for row in rows:
        rates_text = " | ".join(str(row[f"{path}_tokens_per_s"]) for path in paths)
        ratios = f"{row['fast_vs_model_calls']}x | {row['fast_vs_generate']}x"
        print(f"| {row['workload']} | {rates_text} | {ratios} |")
    print("\ntarget: fast / generate >= 1.0 (aim 1.5)")


if __name__ == "__main__":
    main()
