"""The key property: stored trajectories are exactly what the policy sampled, and a forward pass over
them reproduces the sampling logprobs (no decode/re-encode mismatch), with masks 0 on tool and glue."""

from __future__ import annotations

import pytest
import torch

from trainers.backends.base import GenerationOutput, GenerationRequest
from trainers.backends.hf import HFBackend
from trainers.config.limits import RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.parsing.response import ParsedResponse
from trainers.rollout.engine import RolloutEngine
from trainers.templates.qwen_tool import QwenToolTemplate
from trainers.trajectory import ToolCall, Trajectory


class RecordingBackend(HFBackend):
    """The real HF backend, keeping every request and output so the test can compare."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.log: list[tuple[GenerationRequest, GenerationOutput]] = []

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationOutput]:
        outputs = super().generate(requests)
        self.log.extend(zip(requests, outputs, strict=True))
        return outputs


class AlwaysCallsTemplate(QwenToolTemplate):
    """The Qwen template, except that a random policy's turn counts as a call, so turns go multi-turn."""

    def parse(self, text: str, *, tools: list[dict] | None = None) -> ParsedResponse:
        parsed = super().parse(text, tools=tools)
        parsed.final_answer = None
        parsed.tool_calls = [ToolCall("test_sleep", {"text": "hi", "seconds": 0.0})]
        return parsed


@pytest.fixture(scope="module")
def rollout(tiny_model_dir, module_test_tools):
    torch.set_num_threads(1)
    backend = RecordingBackend(tiny_model_dir, device="cpu")
    limits = RolloutLimits(max_tool_calls=2, max_turns=3, max_new_tokens_per_turn=12, max_total_new_tokens=64)
    engine = RolloutEngine(
        backend, AlwaysCallsTemplate(), ["test_sleep"], limits, SamplingParams(temperature=1.0)
    )
    rows = [{"id": "a", "question": "What is 3 + 4?"}, {"id": "b", "question": "Echo hi, twice please."}]
    return backend, engine.run(rows, samples_per_prompt=2, seed=7)


def test_rollout_is_multi_turn_with_tool_and_notice_turns(rollout):
    _, trajs = rollout
    for traj in trajs:
        roles = [t.role for t in traj.turns]
        assert roles == ["prompt", "assistant", "tool", "assistant", "tool", "assistant", "glue"]


def test_forward_pass_reproduces_sampling_logprobs(rollout):
    backend, trajs = rollout
    assert backend.reused_tokens > 0  # later turns continued from cached prefixes
    model = backend.model
    for traj in trajs:
        ids = torch.tensor([traj.token_ids])
        with torch.no_grad():
            logprobs = torch.log_softmax(model(ids).logits.float(), dim=-1)[0]
        start = 0
        for turn in traj.turns:
            if turn.role == "assistant":
                positions = torch.arange(start - 1, start - 1 + len(turn.token_ids))
                recomputed = logprobs[positions, torch.tensor(turn.token_ids)]
                assert torch.allclose(recomputed, torch.tensor(turn.logprobs), atol=1e-4)
            start += len(turn.token_ids)


def test_each_policy_token_keeps_the_entropy_of_the_distribution_it_was_sampled_from(rollout):
    """T = 1 and no top-k / top-p: the sampled distribution is the model's own softmax, so a forward pass
    over the stored ids gives each token's entropy back; a Trajectory round trip keeps it."""
    backend, trajs = rollout
    for traj in trajs:
        ids = torch.tensor([traj.token_ids])
        with torch.no_grad():
            logprobs = torch.log_softmax(backend.model(ids).logits.float(), dim=-1)[0]
        entropies = -(logprobs.exp() * logprobs).sum(-1)
        start = 0
        for turn in traj.turns:
            if turn.role == "assistant":
                assert turn.entropies is not None and len(turn.entropies) == len(turn.token_ids)
                positions = torch.arange(start - 1, start - 1 + len(turn.token_ids))
                stored = torch.tensor(turn.entropies)
                assert torch.allclose(entropies[positions], stored, rtol=1e-4, atol=1e-5)
            else:
                assert turn.entropies is None
            start += len(turn.token_ids)
        assert Trajectory.from_json(traj.to_json()).turns[1].entropies == traj.turns[1].entropies


def test_stored_ids_are_the_sampled_ids_and_each_turn_resumes_from_the_stored_context(rollout):
    backend, trajs = rollout
    by_prompt: dict[tuple[int, ...], list[tuple[list[int], list[float]]]] = {}
    for req, out in backend.log:  # samples of one row share their first prompt
        by_prompt.setdefault(tuple(req.prompt_ids), []).append((out.token_ids, out.logprobs))
    for traj in trajs:
        context: list[int] = []
        for turn in traj.turns:
            if turn.role == "assistant":
                assert (turn.token_ids, turn.logprobs) in by_prompt[tuple(context)]
            context += turn.token_ids


def test_masks_are_zero_exactly_on_tool_and_glue_tokens(rollout):
    backend, trajs = rollout
    for traj in trajs:
        for turn in traj.response_turns:
            expected = 1 if turn.role == "assistant" else 0
            assert turn.loss_mask == [expected] * len(turn.token_ids)
            if turn.role != "assistant":
                assert turn.token_ids == backend.tokenizer.encode(turn.text, add_special_tokens=False)
        assert traj.num_policy_tokens == sum(len(t.token_ids) for t in traj.assistant_turns)


def test_the_same_seed_gives_the_same_trajectories(rollout):
    backend, trajs = rollout
    limits = RolloutLimits(max_tool_calls=2, max_turns=3, max_new_tokens_per_turn=12, max_total_new_tokens=64)
    engine = RolloutEngine(backend, AlwaysCallsTemplate(), ["test_sleep"], limits, SamplingParams())
    rows = [{"id": "a", "question": "What is 3 + 4?"}, {"id": "b", "question": "Echo hi, twice please."}]
    again = engine.run(rows, samples_per_prompt=2, seed=7)
    assert [t.token_ids for t in again] == [t.token_ids for t in trajs]
    assert trajs[0].response_token_ids != trajs[1].response_token_ids  # samples of a group differ


def test_seeded_trajectories_do_not_depend_on_how_batches_formed(rollout):
    backend, trajs = rollout
    limits = RolloutLimits(max_tool_calls=2, max_turns=3, max_new_tokens_per_turn=12, max_total_new_tokens=64)
    engine = RolloutEngine(backend, AlwaysCallsTemplate(), ["test_sleep"], limits, max_concurrent=1)
    rows = [{"id": "a", "question": "What is 3 + 4?"}, {"id": "b", "question": "Echo hi, twice please."}]
    one_at_a_time = engine.run(rows, samples_per_prompt=2, seed=7)
    assert engine.last_stats.requests == engine.last_stats.batches  # one row per batch
    assert [t.token_ids for t in one_at_a_time] == [t.token_ids for t in trajs]
