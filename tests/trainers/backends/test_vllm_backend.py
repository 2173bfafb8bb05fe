"""The vLLM adapter against a double of vLLM's API (tests/trainers/backends/vllm_double.py): requests in
vLLM's terms, outputs back in ours, and the colocated cycle of waking, loading weights and sleeping.

vLLM itself never runs here (no CUDA); the double mirrors its names and shapes, and its sampling loop
is independent of `HFBackend`'s, so greedy outputs agreeing checks the translation both ways."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tests.trainers.backends.vllm_double import Api, CompletionOutput, Logprob
from trainers.backends.base import GenerationRequest
from trainers.backends.hf import HFBackend
from trainers.backends.vllm import (
    LOAD_WEIGHTS,
    WORKER_EXTENSION,
    VLLMBackend,
    VLLMOptions,
    build_llm,
    sampling_params,
    to_output,
)
from trainers.config.sampling import SamplingParams
from trainers.models.model_io import load_policy

GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture()
def policy(tiny_model_dir):
    torch.set_num_threads(1)
    model, tokenizer = load_policy(tiny_model_dir)
    return model.eval(), tokenizer


def engine(tiny_model_dir, **options):
    opts = VLLMOptions(**options)
    return build_llm(tiny_model_dir, opts, seed=3, api=Api), opts


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def test_build_llm_sets_up_rollouts(tiny_model_dir):
    llm, _ = engine(tiny_model_dir, gpu_memory_utilization=0.3, tensor_parallel_size=2, max_model_len=256)
    kwargs = llm.kwargs
    assert kwargs["logprobs_mode"] == "processed_logprobs"  # the sampled distribution's log-probs
    assert kwargs["enable_prefix_caching"] and kwargs["enable_sleep_mode"]
    assert kwargs["gpu_memory_utilization"] == 0.3 and kwargs["tensor_parallel_size"] == 2
    assert kwargs["max_model_len"] == 256 and kwargs["seed"] == 3
    assert kwargs["worker_extension_cls"] == WORKER_EXTENSION
    assert all(hasattr(worker, LOAD_WEIGHTS) for worker in llm.workers)  # the extension resolves


def test_sampling_params_translate_a_request():
    request = GenerationRequest(
        [1, 2], 7, ["</tool>", ""], SamplingParams(temperature=0.7, top_p=0.9, top_k=0, seed=11)
    )
    params = sampling_params(Api, request)
    assert (params.n, params.temperature, params.top_p, params.max_tokens, params.seed) == (
        1,
        0.7,
        0.9,
        7,
        11,
    )
    assert params.top_k == -1  # our 0 (off) is vLLM's -1
    assert params.logprobs == 0  # the sampled token's log-prob only
    assert params.stop == ["</tool>", ""] and params.include_stop_str_in_output
    assert not params.skip_special_tokens
    assert sampling_params(Api, GenerationRequest([1], 3)).stop is None
    assert sampling_params(Api, GenerationRequest([1], 3, sampling=SamplingParams(top_k=5))).top_k == 5


def test_unseeded_requests_draw_their_seed_from_torch():
    request = GenerationRequest([1], 3)
    torch.manual_seed(0)
    first = [sampling_params(Api, request).seed for _ in range(3)]
    torch.manual_seed(0)
    assert [sampling_params(Api, request).seed for _ in range(3)] == first
    assert len(set(first)) == 3


def completion(ids, reason, stop=None, logprobs=True):
    entries = [{t: Logprob(-0.5 * (i + 1), rank=1)} for i, t in enumerate(ids)] if logprobs else None
    return CompletionOutput(0, "", ids, None, entries, reason, stop)


def test_finish_reasons_map_to_ours():
    out = to_output(completion([5, 6], "stop", "</tool>"))
    assert (out.token_ids, out.logprobs, out.finish_reason, out.stop_string) == (
        [5, 6], [-0.5, -1.0], "stop", "</tool>"
    )  # fmt: skip
    assert to_output(completion([5], "stop", None)).finish_reason == "eos"  # the end-of-sequence token
    assert to_output(completion([5], "stop", 151643)).finish_reason == "eos"  # a stop token id
    length = to_output(completion([5, 6, 7], "length"))
    assert length.finish_reason == "length" and length.stop_string is None
    with pytest.raises(RuntimeError, match="abort"):
        to_output(completion([5], "abort"))
    with pytest.raises(RuntimeError, match="logprobs=0"):
        to_output(completion([5], "length", logprobs=False))


def test_greedy_outputs_match_the_hf_backend(tiny_model_dir, policy):
    model, tokenizer = policy
    hf = HFBackend(model, tokenizer)
    llm, opts = engine(tiny_model_dir)
    backend = VLLMBackend(llm, tokenizer, options=opts, api=Api)
    prompts = [encode(tokenizer, t) for t in ("What is 12 + 30?", "Hi", "Sort 3 1 2")]
    free = hf.generate([GenerationRequest(prompts[0], 12, [], GREEDY)])[0]
    stop = tokenizer.decode([free.token_ids[3]])[-1]  # a character the fourth sampled token produces
    requests = [
        GenerationRequest(prompts[0], 12, [stop], GREEDY),
        GenerationRequest(prompts[1], 5, [], GREEDY),
        GenerationRequest(prompts[2], 9, ["\x00never"], GREEDY),
    ]
    with backend.generating():
        ours, theirs = hf.generate(requests), backend.generate(requests)
        assert backend.generate([]) == []
    assert ours[0].finish_reason == "stop" and ours[0].stop_string == stop
    for a, b in zip(ours, theirs, strict=True):
        assert b.token_ids == a.token_ids
        assert (b.finish_reason, b.stop_string) == (a.finish_reason, a.stop_string)
        assert b.logprobs == pytest.approx(a.logprobs, rel=1e-4, abs=1e-4)


def test_seeded_sampling_repeats_and_multi_turn_continuations_hit_the_prefix_cache(tiny_model_dir, policy):
    _, tokenizer = policy
    llm, opts = engine(tiny_model_dir)
    backend = VLLMBackend(llm, tokenizer, options=opts, api=Api)
    prompt = encode(tokenizer, "What is 12 + 30?")
    seeded = GenerationRequest(prompt, 6, [], SamplingParams(temperature=1.0, seed=5))
    with backend.generating():
        first, again = backend.generate([seeded])[0], backend.generate([seeded])[0]
        assert first.token_ids == again.token_ids and first.logprobs == again.logprobs
        cached = llm.calls.cached_prompt_tokens
        follow_up = prompt + first.token_ids + encode(tokenizer, " and 7?")  # the next turn re-sends it
        backend.generate([GenerationRequest(follow_up, 3, [], GREEDY)])
    assert llm.calls.cached_prompt_tokens - cached >= len(prompt) + len(first.token_ids) - 1


def rpc_log(llm):
    return [call for call in llm.calls.log if call[0] != "generate"]


def test_colocated_cycle_loads_new_weights_without_a_restart(tiny_model_dir, policy):
    model, tokenizer = policy
    llm, opts = engine(tiny_model_dir, tensor_parallel_size=2)
    backend = VLLMBackend(llm, tokenizer, policy=model, options=opts, api=Api)
    request = GenerationRequest(encode(tokenizer, "What is 12 + 30?"), 8, [], GREEDY)

    with backend.generating():  # the live policy may differ from model.path: loaded before generating
        assert rpc_log(llm) == [("collective_rpc", LOAD_WEIGHTS), ("reset_prefix_cache",)]
        backend.generate([request])
    assert rpc_log(llm)[2:] == [("sleep", 1)]  # leaving frees the GPU for training
    with backend.generating():  # weights unchanged: woken, nothing loaded
        backend.generate([request])
    assert backend.weight_loads == 1

    # the update: training forwards leave the sleeping engine alone; the trainer says the policy changed
    llm.calls.log.clear()
    batch = torch.tensor([request.prompt_ids])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model(input_ids=batch).logits.float().pow(2).mean().backward()
    optimizer.step()
    model(input_ids=batch)
    assert rpc_log(llm) == [] and backend.asleep
    backend.policy_changed()

    with backend.generating():
        assert rpc_log(llm) == [
            ("wake_up", ("weights",)),
            ("collective_rpc", LOAD_WEIGHTS),
            ("reset_prefix_cache",),
            ("wake_up", ("kv_cache",)),
        ]
        for worker in llm.workers:  # every tensor-parallel worker holds the updated weights
            engine_params = dict(worker.model_runner.model.hf.named_parameters())
            for name, p in model.named_parameters():
                assert torch.equal(engine_params[name], p.detach()), name
        after = backend.generate([request])[0]
    assert after.token_ids == HFBackend(model, tokenizer).generate([request])[0].token_ids


def test_generating_happens_only_inside_generating(tiny_model_dir, policy):
    model, tokenizer = policy
    llm, opts = engine(tiny_model_dir)
    backend = VLLMBackend(llm, tokenizer, policy=model, options=opts, api=Api)
    request = GenerationRequest(encode(tokenizer, "Hi"), 4, [], GREEDY)
    with pytest.raises(RuntimeError, match="generating"):
        backend.generate([request])  # stale weights, never woken
    with backend.generating(), backend.generating():  # nested: one wake, one sleep at the outermost exit
        backend.generate([request])
    assert [call[0] for call in rpc_log(llm)] == ["collective_rpc", "reset_prefix_cache", "sleep"]
    with pytest.raises(RuntimeError, match="generating"):
        backend.generate([request])  # asleep


def test_sleep_level_2_reloads_weights_even_without_an_update(tiny_model_dir, policy):
    model, tokenizer = policy
    llm, opts = engine(tiny_model_dir, sleep_level=2)
    backend = VLLMBackend(llm, tokenizer, policy=model, options=opts, api=Api)
    request = GenerationRequest(encode(tokenizer, "Hi"), 6, [], GREEDY)
    with backend.generating():
        before = backend.generate([request])[0]
    assert llm.calls.log[-1] == ("sleep", 2)  # sleep(level=2) discards the engine's weights
    with backend.generating():
        assert backend.weight_loads == 2
        assert backend.generate([request])[0].token_ids == before.token_ids


def test_sleep_off_keeps_the_engine_resident(tiny_model_dir, policy):
    model, tokenizer = policy
    llm, opts = engine(tiny_model_dir, sleep=False)
    backend = VLLMBackend(llm, tokenizer, policy=model, options=opts, api=Api)
    with backend.generating():
        backend.generate([GenerationRequest([1, 2, 3], 2, [], GREEDY)])
    assert not any(call[0] == "sleep" for call in llm.calls.log) and not backend.asleep


def test_worker_extension_loads_hf_names_through_load_weights():
    from trainers.backends.vllm import PolicyWeightsExtension

    received = []
    worker = PolicyWeightsExtension()
    model = SimpleNamespace(
        parameters=lambda: iter([torch.zeros(1)]), load_weights=lambda weights: received.extend(weights)
    )
    worker.model_runner = SimpleNamespace(model=model)
    assert worker.load_policy_weights([("model.embed_tokens.weight", torch.ones(2))]) == 1
    assert [name for name, _ in received] == ["model.embed_tokens.weight"]
