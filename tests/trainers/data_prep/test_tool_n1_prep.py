"""Tool-N1 data preparation: invalid calls dropped, conversations split into single steps, each scored."""

from __future__ import annotations

import copy
import json

import pytest

from trainers.data_prep import PREPARERS
from trainers.data_prep.tool_n1 import prepare_tool_n1
from trainers.rewards import REWARDS, RewardContext
from trainers.templates import TEMPLATES
from trainers.trajectory import Trajectory, Turn

TOOLS = [
    {"type": "function", "function": {"name": "search_flights", "parameters": {"type": "object"}}},
    {"name": "book_flight", "parameters": {"type": "object"}},
]
SEARCH = {"name": "search_flights", "arguments": {"to": "Oslo", "date": "2025-06-01"}}
BOOK = {"name": "book_flight", "arguments": {"flight": "SK1", "seats": 2}}
THINK_1 = "<think>find flights first</think>"
THINK_2 = "<think>SK1 is the cheapest</think>"
THINK_3 = "<think>booked</think>"
CONVERSATION = {
    "id": "c1",
    "tools": TOOLS,
    "metadata": {"source": "hand-made"},
    "messages": [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": "Book 2 seats to Oslo on June 1st, cheapest flight."},
        {
            "role": "assistant",
            "content": THINK_1,
            # OpenAI style: wrapped, arguments as a JSON string
            "tool_calls": [
                {"type": "function", "function": {**SEARCH, "arguments": json.dumps(SEARCH["arguments"])}}
            ],
        },
        {"role": "tool", "name": "search_flights", "content": '[{"flight": "SK1", "price": 90}]'},
        {"role": "assistant", "content": THINK_2, "tool_calls": [BOOK]},
        {"role": "tool", "name": "book_flight", "content": "confirmed"},
        {"role": "assistant", "content": f"{THINK_3}<answer>Booked SK1, 2 seats.</answer>"},
    ],
}
N1 = REWARDS.get("tool_n1")()
CTX = RewardContext()


def with_message(index: int, **changes) -> dict:
    row = copy.deepcopy(CONVERSATION)
    row["messages"][index].update(changes)
    return row


def test_a_call_to_a_tool_missing_from_the_candidates_drops_the_conversation():
    row = with_message(4, tool_calls=[{"name": "cancel_flight", "arguments": {}}])
    result = prepare_tool_n1([row])
    assert result.rows == [] and result.kept == 0
    assert result.dropped == {"unknown_tool": 1}


@pytest.mark.parametrize(
    "changes",
    [
        {"tool_calls": [{"name": "book_flight", "arguments": '{"flight": "SK1", "seats": 2'}]},  # cut off
        {"tool_calls": '[{"name": "book_flight", "arguments": {}}'},  # the list itself
        {"tool_calls": None, "content": THINK_2 + '<tool_call>{"name": "book_flight", </tool_call>'},
        {"tool_calls": [{"arguments": {"flight": "SK1"}}]},  # no name
    ],
)
def test_calls_that_fail_json_parsing_drop_the_conversation(changes):
    result = prepare_tool_n1([with_message(4, **changes)])
    assert result.rows == [] and result.dropped == {"bad_json": 1}


def test_three_assistant_turns_make_three_single_step_samples():
    samples = prepare_tool_n1([CONVERSATION]).rows
    assert [s["id"] for s in samples] == ["c1#1", "c1#2", "c1#3"]
    # contexts: everything before the target (the system message is the template's job)
    assert [[m["role"] for m in s["context"]] for s in samples] == [
        ["user"],
        ["user", "assistant", "tool"],
        ["user", "assistant", "tool", "assistant", "tool"],
    ]
    assert samples[1]["context"][1]["tool_calls"] == [SEARCH]  # the earlier call, parsed
    # targets: the next assistant turn's calls are the ground truth; the last turn answers
    assert samples[0]["tool_calls"] == [SEARCH] and "answer" not in samples[0]
    assert samples[1]["tool_calls"] == [BOOK]
    assert "tool_calls" not in samples[2] and samples[2]["answer"] == "Booked SK1, 2 seats."
    assert all(s["tools"] == TOOLS for s in samples)
    assert [s["metadata"] for s in samples] == [
        {"source": "hand-made", "source_id": "c1", "step": k, "steps": 3} for k in (1, 2, 3)
    ]


def test_the_question_renders_the_context_as_the_turns_a_rollout_would_have_made():
    first, second, third = prepare_tool_n1([CONVERSATION]).rows
    user = "Book 2 seats to Oslo on June 1st, cheapest flight."
    assert first["question"] == user
    step_1 = (
        f"<|im_end|>\n<|im_start|>assistant\n{THINK_1}\n<tool_call>{json.dumps([SEARCH])}</tool_call>"
        '<|im_end|>\n<|im_start|>user\n<tool_response>\n[{"flight": "SK1", "price": 90}]\n</tool_response>'
    )
    assert second["question"] == user + step_1
    step_2 = (
        f"<|im_end|>\n<|im_start|>assistant\n{THINK_2}\n<tool_call>{json.dumps([BOOK])}</tool_call>"
        "<|im_end|>\n<|im_start|>user\n<tool_response>\nconfirmed\n</tool_response>"
    )
    assert third["question"] == user + step_1 + step_2
    # in the template's prompt the context reads as a ChatML conversation ending in an assistant opener
    prompt = TEMPLATES.get("tool_n1")().render_prompt(question=third["question"], tools=TOOLS)
    assert prompt.count("<|im_start|>assistant\n") == 3 and prompt.endswith("<|im_start|>assistant\n")
    assert prompt.count("<|im_start|>user\n") == 3


def test_counts_of_kept_and_dropped_rows_by_reason():
    rows = [
        CONVERSATION,
        with_message(2, tool_calls=[{"name": "weather", "arguments": {}}]),
        with_message(4, tool_calls=[{"name": "book_flight", "arguments": "{oops"}]),
        {"id": "s1", "question": "Find flights to Rome", "tools": TOOLS, "tool_calls": [SEARCH]},
        {"id": "x", "messages": [{"role": "assistant", "content": "hi"}]},
    ]
    result = PREPARERS.get("tool_n1")(rows)
    assert result.kept == 2
    assert result.dropped == {"unknown_tool": 1, "bad_json": 1, "no_user_turn": 1}
    assert [r["id"] for r in result.rows] == ["c1#1", "c1#2", "c1#3", "s1#1"]
    assert result.rows[-1]["question"] == "Find flights to Rome" and result.rows[-1]["tool_calls"] == [SEARCH]


def rollout_of(sample: dict, response: str, *, replayed_context: bool = False) -> Trajectory:
    """The trajectory a rollout of `sample` gives when the policy writes `response` (calls parsed by
    the tool_n1 template, as the engine does); `replayed_context` adds the context as masked turns."""
    template = TEMPLATES.get("tool_n1")()
    turns = [Turn("prompt", sample["question"], [1], [0])]
    if replayed_context:
        turns += [Turn("assistant", "<think>earlier</think>", [2, 3], [0, 0]), Turn("tool", "r", [4], [0])]
    parsed = template.parse(response)
    turns.append(Turn("assistant", response, [5, 6], [1, 1], tool_calls=parsed.tool_calls))
    truth = {"answer": sample.get("answer"), "tool_calls": sample.get("tool_calls")}
    return Trajectory(uid="u", group_id=sample["id"], turns=turns, ground_truth=truth)


def gold(sample: dict) -> str:
    """The target turn written as Tool-N1's policy should: reasoning, then the calls as one JSON list."""
    if "tool_calls" in sample:
        return f"<think>go</think><tool_call>{json.dumps(sample['tool_calls'])}</tool_call><|im_end|>"
    return f"<think>done</think><answer>{sample['answer']}</answer><|im_end|>"


def test_the_reward_scores_the_target_turn_of_each_sample():
    samples = prepare_tool_n1([CONVERSATION]).rows
    assert [N1.score(rollout_of(s, gold(s)), CTX) for s in samples] == [1.0, 1.0, 1.0]
    # each sample's ground truth is its own target: step 1's calls do not pass step 2
    assert N1.score(rollout_of(samples[1], gold(samples[0])), CTX) == 0.0
    assert N1.score(rollout_of(samples[0], gold(samples[1])), CTX) == 0.0
    assert N1.score(rollout_of(samples[2], gold(samples[1])), CTX) == 0.0  # calling instead of answering
    # argument order does not matter, argument values do
    swapped = (
        '<think>go</think><tool_call>[{"name": "book_flight", "arguments": {"seats": 2, "flight": "SK1"}}]'
    )
    assert N1.score(rollout_of(samples[1], swapped + "</tool_call>"), CTX) == 1.0
    assert N1.score(rollout_of(samples[1], swapped.replace("2", "3") + "</tool_call>"), CTX) == 0.0


def test_context_replayed_as_masked_turns_is_skipped_and_the_sampled_turn_scored():
    samples = prepare_tool_n1([CONVERSATION]).rows
    for sample in samples:
        assert N1.score(rollout_of(sample, gold(sample), replayed_context=True), CTX) == 1.0
    wrong = rollout_of(samples[1], gold(samples[0]), replayed_context=True)
    assert N1.score(wrong, CTX) == 0.0


def test_the_prepare_command_writes_the_steps_and_prints_the_counts(tmp_path, capsys):
    from trainers.cli import main

    rows = [CONVERSATION, with_message(2, tool_calls=[{"name": "weather", "arguments": {}}])]
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["prepare", "tool_n1", str(source), str(target)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary == {
        "preparer": "tool_n1",
        "kept": 1,
        "dropped": {"unknown_tool": 1},
        "rows_out": 3,
        "output": str(target),
    }
    written = [json.loads(line) for line in target.read_text().splitlines()]
    assert written == prepare_tool_n1([CONVERSATION]).rows
