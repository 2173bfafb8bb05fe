"""The HF sampling loop: batching with left padding, stop strings, eos, limits, seeds and logprobs."""

from __future__ import annotations

import math

import pytest
import torch

from trainers.backends.base import GenerationRequest
from trainers.backends.hf import HFBackend
from trainers.backends.sampler import processed_logprobs, sample_step
from trainers.config.sampling import SamplingParams

GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    torch.set_num_threads(1)
    return HFBackend(tiny_model_dir, device="cpu")


def prompts(backend) -> list[list[int]]:
    texts = ["What is 12 + 30?", "Hi", "<|im_start|>user\nSort 3 1 2<|im_end|>\n<|im_start|>assistant\n"]
    return [backend.tokenizer.encode(t, add_special_tokens=False) for t in texts]


def test_batched_rows_match_rows_generated_alone(backend):
    rows = [*prompts(backend), prompts(backend)[0]]  # a repeated prompt shares its prefill
    requests = [GenerationRequest(p, n, [], GREEDY) for p, n in zip(rows, (9, 4, 13, 6), strict=True)]
    batched = backend.generate(requests)
    alone = [backend.generate([r])[0] for r in requests]
    assert [o.token_ids for o in batched] == [o.token_ids for o in alone]
    assert [len(o.token_ids) for o in batched] == [9, 4, 13, 6]
    for a, b in zip(batched, alone, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_length_finish_at_max_new_tokens(backend):
    out = backend.generate([GenerationRequest(prompts(backend)[0], 5, [], GREEDY)])[0]
    assert out.finish_reason == "length" and len(out.token_ids) == 5 and out.stop_string is None


def test_stop_string_keeps_the_completing_token_and_nothing_after(backend):
    prompt = prompts(backend)[0]
    free = backend.generate([GenerationRequest(prompt, 12, [], GREEDY)])[0]
    pieces = [backend.tokenizer.decode([t]) for t in free.token_ids]
    stop = pieces[3][-1]  # a character first produced by the fourth token (or earlier)
    first = next(i for i, piece in enumerate(pieces) if stop in piece)
    out = backend.generate([GenerationRequest(prompt, 12, [stop], GREEDY)])[0]
    assert out.finish_reason == "stop" and out.stop_string == stop
    assert out.token_ids == free.token_ids[: first + 1]


def test_end_of_sequence_finishes_a_row(backend):
    prompt = prompts(backend)[1]
    free = backend.generate([GenerationRequest(prompt, 6, [], GREEDY)])[0]
    saved = backend.eos_ids
    backend.eos_ids = {free.token_ids[2]}
    try:
        out = backend.generate([GenerationRequest(prompt, 6, [], GREEDY)])[0]
    finally:
        backend.eos_ids = saved
    assert (
        out.finish_reason == "eos"
        and out.token_ids == free.token_ids[: free.token_ids.index(free.token_ids[2]) + 1]
    )


def test_same_seed_same_samples_and_another_seed_differs(backend):
    def sample(seed: int) -> list[list[int]]:
        params = SamplingParams(temperature=1.0, seed=seed)
        return [
            o.token_ids
            for o in backend.generate([GenerationRequest(p, 16, [], params) for p in prompts(backend)])
        ]

    assert sample(3) == sample(3)
    assert sample(3) != sample(4)


def test_logprobs_are_those_of_the_processed_distribution(backend):
    params = SamplingParams(temperature=0.7, top_k=5, seed=1)
    prompt = prompts(backend)[0]
    out = backend.generate([GenerationRequest(prompt, 8, [], params)])[0]
    with torch.no_grad():
        logits = backend.model(torch.tensor([prompt + out.token_ids])).logits[0]
    expected = processed_logprobs(logits[len(prompt) - 1 : -1], params)
    picked = expected[torch.arange(len(out.token_ids)), torch.tensor(out.token_ids)]
    assert torch.allclose(picked, torch.tensor(out.logprobs), atol=1e-4)
    assert torch.isfinite(picked).all()  # every sampled token was inside the top 5


def test_entropies_are_those_of_the_processed_distribution(backend):
    """Each token's entropy is its sampling distribution's (top-k masked tokens add nothing, not nan)."""
    params = SamplingParams(temperature=0.7, top_k=5, seed=1)
    prompt = prompts(backend)[0]
    out = backend.generate([GenerationRequest(prompt, 8, [], params)])[0]
    with torch.no_grad():
        logits = backend.model(torch.tensor([prompt + out.token_ids])).logits[0]
    probs = processed_logprobs(logits[len(prompt) - 1 : -1], params).exp()
    expected = -(probs * probs.clamp(min=1e-30).log()).sum(-1)
    assert out.entropies is not None and len(out.entropies) == len(out.token_ids)
    assert torch.allclose(torch.tensor(out.entropies), expected, rtol=1e-4, atol=1e-5)
    assert all(0.0 <= e <= math.log(5) + 1e-5 for e in out.entropies)  # at most uniform over the top 5


def test_top_p_keeps_the_smallest_set_reaching_p():
    # softmax([2, 1, 0, -1]) = [0.644, 0.237, 0.087, 0.032]; mass before the third token is 0.881 >= 0.7
    logprobs = processed_logprobs(torch.tensor([[2.0, 1.0, 0.0, -1.0]]), SamplingParams(top_p=0.7))
    probs = logprobs.exp()[0]
    assert probs[2] == 0 and probs[3] == 0
    assert probs[0].item() == pytest.approx(math.e / (math.e + 1), abs=1e-6)


def test_a_shared_live_model_is_seen_with_its_current_weights(tiny_model_dir, backend):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).eval()
    live = HFBackend(model, backend.tokenizer)
    prompt = prompts(backend)[0]
    with torch.no_grad():
        model.model.norm.weight.zero_()  # an in-place update: every logit becomes 0, the distribution uniform
    out = live.generate([GenerationRequest(prompt, 3, [], SamplingParams(seed=0))])[0]
    assert out.logprobs == pytest.approx([-math.log(model.config.vocab_size)] * 3, abs=1e-5)


def test_a_next_turn_reuses_the_cached_prefix_and_samples_the_same(tiny_model_dir, backend):
    fresh = HFBackend(tiny_model_dir, device="cpu", prefix_cache_tokens=0)
    first = GenerationRequest(prompts(backend)[2], 6, [], GREEDY)
    turn = backend.generate([first])[0]
    glue = backend.tokenizer.encode("<|im_end|>\n<|im_start|>user\nok<|im_end|>\n", add_special_tokens=False)
    second = GenerationRequest(first.prompt_ids + turn.token_ids + glue, 8, [], GREEDY)
    before = backend.reused_tokens
    reused = backend.generate([second, GenerationRequest(prompts(backend)[1], 8, [], GREEDY)])
    assert backend.reused_tokens - before == len(first.prompt_ids) + len(turn.token_ids) - 1
    plain = fresh.generate([second, GenerationRequest(prompts(backend)[1], 8, [], GREEDY)])
    assert [o.token_ids for o in reused] == [o.token_ids for o in plain]
    for a, b in zip(reused, plain, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_a_last_turn_leaves_nothing_in_the_prefix_cache(tiny_model_dir):
    backend = HFBackend(tiny_model_dir, device="cpu")
    last = [GenerationRequest(p, 6, [], GREEDY, may_continue=False) for p in prompts(backend)]
    backend.generate(last)
    assert len(backend.prefix_cache) == 0
    backend.generate([GenerationRequest(p, 6, [], GREEDY) for p in prompts(backend)])
    assert len(backend.prefix_cache) == len(prompts(backend))


def test_a_seeded_row_samples_the_same_alone_and_in_any_batch(backend):
    params = SamplingParams(temperature=1.0, seed=11)
    target = GenerationRequest(prompts(backend)[0], 12, [], params)
    others = [GenerationRequest(p, 5, [], SamplingParams(seed=i)) for i, p in enumerate(prompts(backend))]
    alone = backend.generate([target])[0]
    batched = backend.generate([*others, target])[-1]
    assert batched.token_ids == alone.token_ids
    assert batched.logprobs == pytest.approx(alone.logprobs, abs=1e-4)


def test_gumbel_max_samples_follow_the_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(4000, 1)
    tokens = sample_step(logits, SamplingParams(), torch.arange(4000), step=0).tokens
    freq = torch.bincount(tokens, minlength=4).float() / 4000
    # softmax([2, 1, 0, -1]) = [0.644, 0.237, 0.087, 0.032]
    assert torch.allclose(freq, torch.softmax(logits[0], dim=-1), atol=0.025)


def test_eager_and_sdpa_attention_sample_alike(tiny_model_dir, backend):
    from transformers import AutoModelForCausalLM

    eager = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), attn_implementation="eager").eval()
    requests = [GenerationRequest(p, 6, [], GREEDY) for p in prompts(backend)]
    plain = {"prefix_cache_tokens": 0, "fast_decode": False}  # the model's own attention runs only here
    ours = HFBackend(eager, backend.tokenizer, **plain).generate(requests)
    reference = HFBackend(backend.model, backend.tokenizer, **plain).generate(requests)
    assert [o.token_ids for o in ours] == [o.token_ids for o in reference]
    for a, b in zip(ours, reference, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
