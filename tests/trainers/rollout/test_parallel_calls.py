"""Several calls in one assistant message (Qwen's format: one `<tool_call>` block per call).

The ChatML templates stop at the end of the message, not at `</tool_call>`, so every block of a turn is
parsed, the calls run concurrently, and the tool turn answers each with its own `<tool_response>`, in
call order. The budget C counts executed calls; malformed blocks get their own error response.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.support.trained_cache import trained
from trainers.backends.hf import HFBackend
from trainers.config.limits import TOOL_LIMIT_NOTICE, RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.rewards import REWARDS, RewardContext
from trainers.rollout.engine import RolloutEngine
from trainers.tools.base import TOOLS, Tool, ToolOutput
from trainers.trajectory import Trajectory

END = "<|im_end|>"


def block(text: str, tool: str = "test_sleep") -> str:
    args = {"text": text, "seconds": 0} if tool == "test_sleep" else {"text": text}
    return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': args})}\n</tool_call>"


def message(*blocks: str) -> str:
    return "<think>several calls</think>\n" + "\n".join(blocks) + END


def by_turn(*texts: str):
    """Respond with texts[n], n = how many user turns (tool responses, notices) the context holds."""
    return lambda prompt: texts[min(prompt.count("<|im_start|>user") - 1, len(texts) - 1)]


def rollout(
    backend, tools=("test_sleep",), limits: RolloutLimits | None = None, row=None, **kw
) -> Trajectory:
    engine = RolloutEngine(backend, "qwen_tool", list(tools), limits or RolloutLimits(), **kw)
    return engine.run([row or {"id": "q", "question": "go"}])[0]


def responses(text: str) -> list[str]:
    """The bodies of the `<tool_response>` blocks of a tool turn, in order."""
    return [part.split("\n</tool_response>")[0] for part in text.split("<tool_response>\n")[1:]]


class BarrierTool(Tool):
    """Waits until `parties` calls are inside it at once: it only succeeds when the calls overlap.

    Run one after another, the first call waits alone and times out, so its result is an error.
    """

    name = "test_barrier"
    description = "meet the other calls of this turn, then echo the text"
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    default_timeout_s = 5.0  # a failure, not a measurement: sequential calls never pass the barrier
    barrier: asyncio.Barrier | None = None

    async def run(self, arguments: dict[str, Any]) -> ToolOutput:
        assert self.barrier is not None
        await self.barrier.wait()
        return ToolOutput(True, f"met {arguments['text']}")


@pytest.fixture
def barrier_tool(monkeypatch):
    monkeypatch.setitem(TOOLS._items, BarrierTool.name, BarrierTool)
    monkeypatch.setattr(BarrierTool, "barrier", asyncio.Barrier(2))
    return BarrierTool.name


def test_two_blocks_in_one_message_run_concurrently_and_are_answered_in_order(scripted, barrier_tool):
    first = message(block("a", barrier_tool), block("b", barrier_tool))
    backend = scripted(by_turn(first, "<think>done</think> \\boxed{ab}" + END))
    traj = rollout(backend, tools=[barrier_tool])
    assert [t.role for t in traj.turns] == ["prompt", "assistant", "tool", "assistant"]
    turn, tool_turn = traj.turns[1], traj.turns[2]
    assert [c.arguments["text"] for c in turn.tool_calls] == ["a", "b"]
    assert turn.text.endswith(END) and turn.finish_reason == "eos"  # cut at the end, not at </tool_call>
    # both calls sat in the barrier at once, so both succeeded: they ran concurrently
    assert [(r.ok, r.executed, r.output) for r in turn.tool_results] == [
        (True, True, "met a"),
        (True, True, "met b"),
    ]
    assert responses(tool_turn.text) == ["met a", "met b"]
    assert tool_turn.text.startswith("\n<|im_start|>user\n<tool_response>")  # the sampled end is not repeated
    assert traj.final_answer == "ab" and traj.finish_reason == "answer"


def test_responses_keep_call_order_when_the_first_call_finishes_last(scripted):
    slow = block("a").replace('"seconds": 0', '"seconds": 0.2')
    traj = rollout(scripted(by_turn(message(slow, block("b")), "\\boxed{ab}" + END)))
    assert responses(traj.turns[2].text) == ["echo a", "echo b"]


def test_the_request_stops_at_the_end_of_the_message(scripted):
    backend = scripted(by_turn(message(block("a"), block("b")), "\\boxed{ab}" + END))
    seen: list[list[str]] = []
    generate = backend.generate
    backend.generate = lambda requests: seen.extend(r.stop_strings for r in requests) or generate(requests)
    rollout(backend)
    assert seen == [[END], [END]]


def test_call_limit_one_with_two_calls_executes_one_and_gives_the_other_the_notice(scripted):
    backend = scripted(by_turn(message(block("a"), block("b")), message(block("c")), "\\boxed{a}" + END))
    traj = rollout(backend, limits=RolloutLimits(max_tool_calls=1, max_turns=3))
    first = traj.turns[1].tool_results
    assert [(r.executed, r.output) for r in first] == [(True, "echo a"), (False, TOOL_LIMIT_NOTICE)]
    assert responses(traj.turns[2].text) == ["echo a", TOOL_LIMIT_NOTICE]
    # the next turn's call is past the limit too: the notice alone, as for a single call today
    assert [t.role for t in traj.turns[3:]] == ["assistant", "glue", "assistant"]
    assert [r.executed for r in traj.turns[3].tool_results] == [False]
    assert TOOL_LIMIT_NOTICE in traj.turns[4].text
    assert sum(r.executed for r in traj.tool_results) == 1


def test_continue_text_past_the_limit_hides_the_skipped_call_and_keeps_the_end_stop(scripted):
    backend = scripted(by_turn(message(block("a"), block("b")), "\\boxed{a}" + END))
    limits = RolloutLimits(max_tool_calls=1, on_tool_limit="continue_text")
    engine = RolloutEngine(backend, "qwen_tool", ["test_sleep"], limits)
    seen: list[list[str]] = []
    generate = backend.generate
    backend.generate = lambda requests: seen.extend(r.stop_strings for r in requests) or generate(requests)
    traj = engine.run([{"id": "q", "question": "go"}])[0]
    assert responses(traj.turns[2].text) == ["echo a"]
    assert [r.executed for r in traj.turns[1].tool_results] == [True, False]
    assert seen == [[END], [END]]  # spent: the end of the message still ends the turn


def test_a_malformed_block_gets_its_own_error_and_the_valid_ones_still_run(scripted):
    bad = '<tool_call>\n{"name": "test_sleep", "arguments": {oops}}\n</tool_call>'
    first = message(block("a"), bad, block("b"))
    traj = rollout(scripted(by_turn(first, "\\boxed{ab}" + END)), limits=RolloutLimits(max_tool_calls=2))
    results = traj.turns[1].tool_results
    assert [(r.ok, r.executed) for r in results] == [(True, True), (False, False), (True, True)]
    shown = responses(traj.turns[2].text)
    assert shown[0] == "echo a" and shown[2] == "echo b"
    assert shown[1].startswith("malformed tool call: invalid JSON")
    assert traj.num_failed_calls == 1 and traj.finish_reason == "answer"


def test_a_malformed_blocks_response_names_the_tool_it_could_read_else_unknown_tool(scripted):
    named = '<tool_call>\n{"name": "test_sleep", "arguments": {oops}}\n</tool_call>'
    nameless = "<tool_call>\nnot json\n</tool_call>"
    past_budget = '<tool_call>\n{"name": "calculator", "arguments": [}\n</tool_call>'
    first = message(named, nameless, block("a"), past_budget)
    traj = rollout(scripted(by_turn(first, "\\boxed{a}" + END)), limits=RolloutLimits(max_tool_calls=1))
    results = traj.turns[1].tool_results
    assert [(r.name, r.executed) for r in results] == [
        ("test_sleep", False),
        ("unknown tool", False),
        ("test_sleep", True),
        ("calculator", False),  # over the budget C: the limit result, named too
    ]
    assert traj.tool_calls[0].name == ""  # the call itself stays unparsed: nothing ran under that name


def test_a_malformed_block_does_not_use_up_the_call_budget(scripted):
    bad = "<tool_call>\nnot json\n</tool_call>"
    traj = rollout(
        scripted(by_turn(message(bad, block("b")), "\\boxed{b}" + END)),
        limits=RolloutLimits(max_tool_calls=1),
    )
    assert [(r.executed, r.output.split(":")[0]) for r in traj.turns[1].tool_results] == [
        (False, "malformed tool call"),
        (True, "echo b"),
    ]


def test_a_block_cut_off_by_the_token_limit_is_malformed_and_the_complete_one_runs(scripted):
    cut = message(block("a"), block("b"))[:-30]  # the second block loses its closing tag
    limits = RolloutLimits(max_turns=2)
    traj = rollout(scripted(by_turn(cut, "\\boxed{a}" + END)), limits=limits)
    results = traj.turns[1].tool_results
    assert traj.turns[1].finish_reason == "length"
    assert [r.output for r in results][0] == "echo a"
    assert results[1].output == "malformed tool call: missing closing </tool_call> tag"
    assert traj.turns[2].text.startswith(END)  # the glue closes the turn the policy did not close


# --- environments: several actions in one turn (RAGEN) --------------------------------------------


def lake_call(arguments: dict) -> str:
    return f"<tool_call>{json.dumps({'name': 'frozenlake', 'arguments': arguments})}</tool_call>"


LAKE = {"id": "lake", "question": "reach G", "initial_state": {"grid": ["P__", "__G"]}}


@pytest.mark.parametrize(
    "text",
    [
        lake_call({"action": "right"}) + lake_call({"action": "right"}) + lake_call({"action": "down"}),
        lake_call({"action": "Right || Right || Down"}),  # RAGEN's action text
        lake_call({"actions": ["right", "right", "down"]}),
    ],
    ids=["three-blocks", "separator", "list"],
)
def test_several_actions_in_one_turn_are_taken_in_order(scripted, text):
    traj = rollout(scripted(lambda p: text + END), tools=["frozenlake"], row=LAKE)
    (turn,) = traj.assistant_turns
    assert traj.finish_reason == "env_done" and turn.state == "___\n__W"
    assert turn.env_reward == 1.0


def test_actions_past_the_per_turn_cap_are_not_taken(scripted):
    tools = [{"name": "frozenlake", "config": {"max_actions_per_turn": 2}}]
    text = lake_call({"action": "right"}) + lake_call({"action": "right || down"}) + END
    traj = rollout(scripted(by_turn(text, lake_call({"action": "down"}) + END)), tools=tools, row=LAKE)
    first, second = traj.assistant_turns
    assert first.state == "__P\n__G" and first.env_reward == 0.0
    assert first.tool_results[1].output.endswith("not taken (at most 2 actions per turn): down")
    assert second.state == "___\n__W" and second.env_reward == 1.0  # the cap counts per turn


def test_sokoban_turn_reward_sums_the_rewards_of_its_actions(scripted):
    row = {"id": "box", "question": "push", "initial_state": {"grid": ["######", "#PX_O#", "######"]}}

    def push() -> str:
        return (
            "<tool_call>" + json.dumps({"name": "sokoban", "arguments": {"action": "right"}}) + "</tool_call>"
        )

    traj = rollout(scripted(lambda p: push() + push() + END), tools=["sokoban"], row=row)
    (turn,) = traj.assistant_turns
    assert turn.env_reward == pytest.approx(-0.1 + 10.9) and traj.finish_reason == "env_done"


# --- rewards see every call of the turn ---------------------------------------------------------------


def test_tool_n1_and_toolrl_score_every_call_of_the_message(scripted):
    first = "<think>both</think>\n" + block("a") + "\n" + block("b") + END
    truth = [{"name": "test_sleep", "arguments": {"text": t, "seconds": 0}} for t in "ab"]
    row = {"id": "q", "question": "go", "tool_calls": truth}
    traj = rollout(scripted(by_turn(first, "\\boxed{ab}" + END)), row=row)
    assert len(traj.assistant_turns[0].tool_calls) == 2
    ctx = RewardContext()
    assert REWARDS.get("tool_n1")().score(traj, ctx) == 1.0
    assert REWARDS.get("toolrl")().score(traj, ctx) == pytest.approx(1.0 + 3.0)


# --- a real tiny model --------------------------------------------------------------------------------

EXPERT = {
    "messages": [
        {"role": "user", "content": "Echo a and b."},
        {
            "role": "assistant",
            "content": "<think>two echoes</think>",
            "tool_calls": [
                {"name": "test_sleep", "arguments": {"text": "a", "seconds": 0}},
                {"name": "test_sleep", "arguments": {"text": "b", "seconds": 0}},
            ],
        },
        {"role": "tool", "name": "test_sleep", "content": "echo a"},
        {"role": "tool", "name": "test_sleep", "content": "echo b"},
        {"role": "assistant", "content": "<think>done</think> \\boxed{ab}"},
    ]
}


def build_parallel_policy(out: Path, settings: dict) -> None:
    """SFT on the one expert (on the one torch thread the fixture set) until it makes both calls: sft/."""
    from trainers.demo.model import build_demo_model
    from trainers.models.model_io import load_policy
    from trainers.templates import TEMPLATES
    from trainers.training.sft import render_experts, sft_train

    template, tools = TEMPLATES.get("qwen_tool")(), settings["tools"]
    base = build_demo_model(out / "base", [settings["expert"]], template=template, tools=tools,
                            **settings["model"])  # fmt: skip
    model, tokenizer = load_policy(base)
    examples = render_experts([settings["expert"]], template=template, tokenizer=tokenizer, tools=tools)
    result = sft_train(model, examples, pad_token_id=tokenizer.pad_token_id, **settings["sft"])
    assert result.final_loss < 0.05
    model.save_pretrained(out / "sft")
    tokenizer.save_pretrained(out / "sft")


@pytest.fixture(scope="module")
def parallel_policy(request, tmp_path_factory, module_test_tools):
    """A tiny model that learned (SFT on one expert) to make two calls in one message, trained once per
    settings and trainers code (tests/support/trained_cache.py)."""
    from trainers.models.model_io import load_policy
    from trainers.tools.toolset import Toolset

    torch.set_num_threads(1)
    settings = {
        "expert": EXPERT,
        "tools": Toolset.build(["test_sleep"]).specs(),  # the test tool's spec is not trainers code
        "model": {"hidden_size": 64, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1},
        "sft": {"steps": 120, "batch_size": 1, "lr": 3e-3},
    }
    return load_policy(
        trained(request, tmp_path_factory, "parallel_policy", settings, build_parallel_policy) / "sft"
    )


def test_a_real_tiny_model_makes_two_calls_in_one_message_end_to_end(parallel_policy):
    model, tokenizer = parallel_policy
    backend = HFBackend(model, tokenizer, device="cpu")
    engine = RolloutEngine(
        backend, "qwen_tool", ["test_sleep"], RolloutLimits(), SamplingParams(temperature=0)
    )
    traj = engine.run([{"id": "q", "question": "Echo a and b."}])[0]
    assert [t.role for t in traj.turns] == ["prompt", "assistant", "tool", "assistant"]
    first = traj.turns[1]
    assert [c.arguments["text"] for c in first.tool_calls] == ["a", "b"] and first.finish_reason == "eos"
    assert responses(traj.turns[2].text) == ["echo a", "echo b"]
    assert traj.final_answer == "ab" and traj.finish_reason == "answer"
    # masks: 1 exactly on sampled tokens; the recorded logprobs are what a forward pass gives
    for turn in traj.response_turns:
        assert turn.loss_mask == [int(turn.role == "assistant")] * len(turn.token_ids)
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([traj.token_ids])).logits.float(), dim=-1)[0]
    start = 0
    for turn in traj.turns:
        if turn.role == "assistant":
            positions = torch.arange(start - 1, start - 1 + len(turn.token_ids))
            recomputed = logprobs[positions, torch.tensor(turn.token_ids)]
            assert torch.allclose(recomputed, torch.tensor(turn.logprobs), atol=1e-4)
        start += len(turn.token_ids)
