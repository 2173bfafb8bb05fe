"""The fast decoder against the transformers forward: logits, greedy and seeded tokens, prefixes, fallback."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from tests.trainers.floats import assert_close_float32
from trainers.backends.base import GenerationRequest
from trainers.backends.fast_decoder import FastDecoder, FastWeights, unsupported_reason
from trainers.backends.hf import HFBackend, HFDecoder
from trainers.backends.prefill_plan import plan_prefill
from trainers.backends.prefix_cache import PrefixCache
from trainers.config.sampling import SamplingParams

GREEDY = SamplingParams(temperature=0.0)
SMALL = {
    "vocab_size": 160,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
}


def perturbed(model: nn.Module, seed: int = 0) -> nn.Module:
    """Random biases and norm scales (initialised to 0 and 1), so that fusing them is really tested."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 1:
                param.add_(0.3 * torch.randn(param.shape, generator=generator))
    return model.eval()


def small_models() -> dict[str, nn.Module]:
    torch.manual_seed(0)
    return {
        "qwen2": perturbed(Qwen2ForCausalLM(Qwen2Config(**SMALL, tie_word_embeddings=True))),
        # a head_dim other than hidden / heads, biases everywhere, an untied output layer
        "llama": perturbed(
            LlamaForCausalLM(
                LlamaConfig(
                    **SMALL, head_dim=24, attention_bias=True, mlp_bias=True, tie_word_embeddings=False
                )
            )
        ),
        "mistral": perturbed(MistralForCausalLM(MistralConfig(**SMALL, sliding_window=None))),
    }


MODELS = small_models()
PROMPTS = [[5, 17, 3, 99, 42, 7, 8], [11, 2], [60, 61, 62, 63, 64], [5, 17, 3, 99, 42, 7, 8]]


def last_logits(model: nn.Module, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1]


@pytest.mark.parametrize("kind", list(MODELS))
def test_prefill_and_step_logits_match_the_model_forward(kind):
    torch.set_num_threads(1)
    model = MODELS[kind]
    assert unsupported_reason(model) is None
    plan = plan_prefill(PROMPTS, PrefixCache(0), pad_id=0, device=torch.device("cpu"))
    decoder = FastDecoder(FastWeights.from_model(model), len(PROMPTS), plan.attention.shape[1] + 8)
    with torch.no_grad():
        logits = decoder.prefill(plan)
        seqs = [list(p) for p in PROMPTS]
        for row, seq in enumerate(seqs):
            assert_close_float32(logits[row], last_logits(model, seq))
        rows = list(range(len(seqs)))  # sequence of each decoder row
        for step in range(6):
            if step == 2:  # a row leaves the batch mid-way
                order = decoder.keep([0, 2, 3])
                rows = [rows[r] for r in order]
            fed = [(7 * step + 13 * r) % 160 for r in rows]
            logits = decoder.step(torch.tensor(fed))
            for row, (r, tok) in enumerate(zip(rows, fed, strict=True)):
                seqs[r].append(tok)
                assert_close_float32(logits[row], last_logits(model, seqs[r]))


@pytest.mark.parametrize("kind", list(MODELS))
def test_prefill_over_cached_prefixes_matches_the_model_forward(kind):
    torch.set_num_threads(1)
    model, cpu, weights = MODELS[kind], torch.device("cpu"), FastWeights.from_model(MODELS[kind])
    first = PROMPTS[:3]
    plan = plan_prefill(first, PrefixCache(0), pad_id=0, device=cpu)
    decoder = FastDecoder(weights, len(first), plan.attention.shape[1] + 3)
    cache = PrefixCache(10_000)
    with torch.no_grad():
        decoder.prefill(plan)
        fed = [[4, 9], [50, 51], [30, 31]]  # two tokens per row
        for step in range(2):
            decoder.step(torch.tensor([tokens[step] for tokens in fed]))
        for row, prompt in enumerate(first):  # what a finished turn leaves: its fed ids and their keys
            cache.store((*prompt, *fed[row]), decoder.prefix(row))
        # next turns (two of them), and a prompt with no cached prefix, in one batch
        second = [[*PROMPTS[0], 4, 9, 77, 78], [*PROMPTS[2], 30, 31, 5], [100, 101, 102]]
        plan = plan_prefill(second, cache, pad_id=0, device=cpu)
        assert plan.reused == len(PROMPTS[0]) + 2 + len(PROMPTS[2]) + 2
        logits = FastDecoder(weights, len(second), plan.attention.shape[1] + 1).prefill(plan)
    for row, prompt in enumerate(second):
        assert_close_float32(logits[row], last_logits(model, prompt))


@pytest.fixture(scope="module")
def backends(tiny_model_dir):
    torch.set_num_threads(1)
    fast = HFBackend(tiny_model_dir, device="cpu")
    slow = HFBackend(fast.model, fast.tokenizer, fast_decode=False)
    assert fast.fast_decode and not slow.fast_decode
    return fast, slow


def chat_prompts(tokenizer) -> list[list[int]]:
    texts = ["What is 12 + 30?", "Sort 3 1 2", "Hi", "What is 7 * 8?"]
    chats = [[{"role": "user", "content": t}] for t in texts]
    rendered = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
    return [tokenizer.encode(text, add_special_tokens=False) for text in rendered]


def assert_same(fast_out, slow_out):
    assert [(o.token_ids, o.finish_reason, o.stop_string) for o in fast_out] == [
        (o.token_ids, o.finish_reason, o.stop_string) for o in slow_out
    ]
    for a, b in zip(fast_out, slow_out, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


def test_multi_turn_greedy_with_the_prefix_cache_matches_the_model_path(backends):
    fast, slow = backends
    glue = fast.tokenizer.encode("<|im_end|>\n<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\n")
    prompts = chat_prompts(fast.tokenizer)
    for backend in backends:
        backend.begin_rollout()
        backend.reused_tokens = 0
    requests = [GenerationRequest(p, n, [], GREEDY) for p, n in zip(prompts, (6, 9, 4, 12), strict=True)]
    for _ in range(3):  # three turns, each continuing the last
        outs = fast.generate(requests), slow.generate(requests)
        assert_same(*outs)
        requests = [
            GenerationRequest(r.prompt_ids + o.token_ids + glue, 5, [], GREEDY)
            for r, o in zip(requests, outs[0], strict=True)
        ]
    assert fast.reused_tokens == slow.reused_tokens > 0


def test_prefixes_kept_by_one_path_serve_the_other(backends):
    fast, slow = backends
    glue = fast.tokenizer.encode("<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n")
    first = [GenerationRequest(p, 7, [], GREEDY) for p in chat_prompts(fast.tokenizer)]
    for keeper, user in ((slow, fast), (fast, slow)):
        keeper.begin_rollout()
        outs = keeper.generate(first)
        second = [
            GenerationRequest(r.prompt_ids + o.token_ids + glue, 6, [], GREEDY)
            for r, o in zip(first, outs, strict=True)
        ]
        user.prefix_cache = keeper.prefix_cache  # the next turn runs on the other path, reusing these keys
        before = user.reused_tokens
        reused = user.generate(second)
        assert user.reused_tokens > before
        user.prefix_cache = PrefixCache(keeper.prefix_cache.max_tokens)
        assert_same(reused, keeper.generate(second))


def test_seeded_sampling_with_stops_and_eos_is_the_same_on_both_paths(backends):
    fast, slow = backends
    prompts = chat_prompts(fast.tokenizer)
    params = [SamplingParams(temperature=1.0), SamplingParams(temperature=0.7, top_k=20, top_p=0.9)]
    for setting in params:
        requests = [
            GenerationRequest(p, 4 + 5 * (i % 4), [], setting.model_copy(update={"seed": i}))
            for i, p in enumerate(prompts * 4)
        ]
        free = slow.generate(requests)
        for request, out in list(zip(requests, free, strict=True))[::3]:  # a character these rows will sample
            request.stop_strings = [fast.tokenizer.decode(out.token_ids[1:2])[-1:] or "\n"]
        saved = fast.eos_ids, slow.eos_ids
        # tokens some rows sample early become end-of-sequence, so rows finish at different steps
        fast.eos_ids = slow.eos_ids = {o.token_ids[2] for o in free[1::5] if len(o.token_ids) > 2}
        try:
            outs = fast.generate(requests), slow.generate(requests)
        finally:
            fast.eos_ids, slow.eos_ids = saved
        assert {o.finish_reason for o in outs[0]} == {"eos", "length", "stop"}
        assert_same(*outs)


def test_in_place_weight_updates_are_seen_by_the_next_generate(tiny_model_dir, backends):
    _, slow = backends
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).eval()
    fast = HFBackend(model, slow.tokenizer, prefix_cache_tokens=0)
    reference = HFBackend(model, slow.tokenizer, prefix_cache_tokens=0, fast_decode=False)
    requests = [GenerationRequest(p, 8, [], GREEDY) for p in chat_prompts(slow.tokenizer)]
    before = fast.generate(requests)
    with torch.no_grad():  # what an optimizer step does: fused q/k/v and gate/up must follow
        for layer in model.model.layers:
            layer.self_attn.k_proj.weight.mul_(-3.0)
            layer.mlp.up_proj.weight.add_(0.5)
    after = fast.generate(requests)
    assert [o.token_ids for o in after] != [o.token_ids for o in before]
    assert_same(after, reference.generate(requests))


class LoraLikeLinear(nn.Linear):
    """Stands for an adapter-wrapped projection: the plain weight alone no longer gives its output."""


def test_unsupported_models_fall_back_to_the_model_calls(backends):
    fast, _ = backends
    scaled = Qwen2ForCausalLM(
        Qwen2Config(**SMALL, rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0})
    ).eval()
    adapted = Qwen2ForCausalLM(Qwen2Config(**SMALL)).eval()
    adapted.model.layers[0].self_attn.q_proj.__class__ = LoraLikeLinear
    for model, reason in ((scaled, "RoPE"), (adapted, "nn.Linear")):
        assert reason in unsupported_reason(model)
        backend = HFBackend(model, fast.tokenizer)
        assert not backend.fast_decode
        out = backend.generate([GenerationRequest([5, 6, 7], 4, [], GREEDY)])[0]
        assert len(out.token_ids) == 4
    assert "model type" in unsupported_reason(AutoModelForCausalLM.from_config(_gpt2_config()))


def _gpt2_config():
    from transformers import GPT2Config

    return GPT2Config(vocab_size=160, n_embd=32, n_layer=1, n_head=2, n_positions=64)


def test_a_batch_longer_than_the_sliding_window_uses_the_model_calls(backends):
    fast, _ = backends
    torch.manual_seed(1)
    model = perturbed(MistralForCausalLM(MistralConfig(**SMALL, sliding_window=12)))
    windowed = HFBackend(model, fast.tokenizer, prefix_cache_tokens=0)
    plain = HFBackend(model, fast.tokenizer, prefix_cache_tokens=0, fast_decode=False)
    assert windowed.fast_decode
    short, long = (
        [GenerationRequest([5, 6, 7], 4, [], GREEDY)],
        [GenerationRequest([5, 6, 7], 12, [], GREEDY)],
    )
    for requests, decoder in ((short, FastDecoder), (long, HFDecoder)):
        plan = plan_prefill([r.prompt_ids for r in requests], PrefixCache(0), 0, torch.device("cpu"))
        weights = FastWeights.from_model(model)
        assert isinstance(windowed._decoder(plan, requests[0].max_new_tokens, weights), decoder)
        assert_same(windowed.generate(requests), plain.generate(requests))
