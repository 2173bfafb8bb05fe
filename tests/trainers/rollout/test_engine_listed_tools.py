"""Rows listing their own candidate tools (Tool-N1): the prompt shows them; split samples roll out, score."""

from __future__ import annotations

import json

from trainers.config.limits import RolloutLimits
from trainers.data_prep.tool_n1 import prepare_tool_n1
from trainers.rewards import RewardContext, RewardDefinition
from trainers.rollout.engine import RolloutEngine

TOOLS = [
    {"name": "search_flights", "description": "find flights", "parameters": {"type": "object"}},
    {"name": "book_flight", "description": "book one", "parameters": {"type": "object"}},
]
SEARCH = {"name": "search_flights", "arguments": {"to": "Oslo"}}
BOOK = {"name": "book_flight", "arguments": {"flight": "SK1"}}
CONVERSATION = {
    "id": "c1",
    "tools": TOOLS,
    "messages": [
        {"role": "user", "content": "Book the cheapest flight to Oslo."},
        {"role": "assistant", "content": "<think>search</think>", "tool_calls": [SEARCH]},
        {"role": "tool", "name": "search_flights", "content": "SK1 90 EUR"},
        {"role": "assistant", "content": "<think>book</think>", "tool_calls": [BOOK]},
        {"role": "tool", "name": "book_flight", "content": "confirmed"},
        {"role": "assistant", "content": "<think>done</think><answer>SK1 booked</answer>"},
    ],
}
TARGETS = [  # what a perfect policy writes at each step
    f"<think>s</think><tool_call>{json.dumps([SEARCH])}</tool_call><|im_end|>",
    f"<think>b</think><tool_call>{json.dumps([BOOK])}</tool_call><|im_end|>",
    "<think>d</think><answer>SK1 booked</answer><|im_end|>",
]


def step_of(prompt: str) -> int:
    """0, 1, 2: how many assistant turns the prompt's context already holds."""
    return prompt.count("<|im_start|>assistant\n") - 1


def test_the_prompt_lists_the_rows_candidate_tools_after_the_bound_ones(scripted):
    prompts = []
    backend = scripted(lambda p: prompts.append(p) or TARGETS[0])
    engine = RolloutEngine(backend, "tool_n1", ["calculator"], RolloutLimits(max_turns=1))
    engine.run([{"id": "q", "question": "Fly me to Oslo", "tools": TOOLS}])
    engine.run([{"id": "q", "question": "Fly me to Oslo", "metadata": {"tools": TOOLS}}])  # workbench rows
    for prompt in prompts:
        names = [json.loads(line)["name"] for line in prompt.split("\n") if line.startswith('{"name"')]
        assert names == ["search_flights", "book_flight"]
        assert '"calculator"' in prompt  # the bound tool stays, first
        assert prompt.index('"calculator"') < prompt.index('"search_flights"')


def test_split_samples_roll_out_from_their_context_and_the_target_turn_is_scored(scripted):
    samples = prepare_tool_n1([CONVERSATION]).rows
    seen = []

    def respond(prompt: str) -> str:
        seen.append(prompt)
        return TARGETS[step_of(prompt)]

    engine = RolloutEngine(scripted(respond), "tool_n1", [], RolloutLimits(max_turns=1))
    trajectories = engine.run(samples, 2)
    assert sorted(step_of(p) for p in seen) == [0, 0, 1, 1, 2, 2]
    assert "<tool_response>\nSK1 90 EUR\n</tool_response>" in trajectories[2].prompt_text
    assert all(len(t.assistant_turns) == 1 for t in trajectories)
    reward = RewardDefinition(components=[{"name": "tool_n1"}])
    reward.compute(trajectories, RewardContext())
    assert [t.reward for t in trajectories] == [1.0] * 6

    # a policy that repeats the first step's calls everywhere is right only at step 1
    engine = RolloutEngine(scripted(lambda p: TARGETS[0]), "tool_n1", [], RolloutLimits(max_turns=1))
    trajectories = engine.run(samples)
    reward.compute(trajectories, RewardContext())
    assert [t.reward for t in trajectories] == [1.0, 0.0, 0.0]
