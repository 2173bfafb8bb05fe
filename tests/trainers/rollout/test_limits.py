"""Each rollout limit: call budget C (ZeroTIR notice, ToRL plain text), turns, tokens, responses, errors."""

from __future__ import annotations

import json

from trainers.config.limits import TOOL_LIMIT_NOTICE, RolloutLimits
from trainers.rollout.engine import RolloutEngine
from trainers.rollout.observations import last_error_line, truncate_middle


def call(text: str) -> str:
    payload = json.dumps({"name": "test_sleep", "arguments": {"text": text, "seconds": 0}})
    return f"<think>t</think><tool_call>{payload}</tool_call>"


def rollout(backend, limits: RolloutLimits, template: str = "qwen_tool", tools=("test_sleep",)):
    engine = RolloutEngine(backend, template, list(tools), limits)
    return engine.run([{"id": "q", "question": "go"}])[0]


def test_notice_behaviour_answers_calls_past_the_limit_with_the_notice(scripted):
    traj = rollout(scripted(lambda p: call("x")), RolloutLimits(max_tool_calls=1, max_turns=3))
    executed = [r.executed for r in traj.tool_results]
    assert executed == [True, False, False]
    assert [t.role for t in traj.turns[1:]] == ["assistant", "tool", "assistant", "glue", "assistant", "glue"]
    assert TOOL_LIMIT_NOTICE in traj.turns[4].text and TOOL_LIMIT_NOTICE not in traj.turns[2].text


def test_continue_text_behaviour_stops_executing_and_drops_the_call_stops(scripted):
    def respond(prompt: str) -> str:
        if "```output\n" not in prompt:
            return "Let me compute.\n```python\nprint(1)\n```\n"
        return "Again:\n```python\nprint(2)\n```\nSo \\boxed{2}<|im_end|>"

    limits = RolloutLimits(max_tool_calls=1, on_tool_limit="continue_text")
    traj = rollout(scripted(respond), limits, template="torl", tools=["test_code"])
    assert [t.role for t in traj.turns[1:]] == ["assistant", "tool", "assistant"]
    assert traj.turns[2].text == "```output\nran print(1)\n```\n"
    last = traj.turns[3]
    assert last.finish_reason == "eos" and "print(2)" in last.text
    assert [r.executed for r in last.tool_results] == [False]
    assert traj.final_answer == "2" and traj.finish_reason == "answer"


def test_max_turns_ends_a_trajectory_that_keeps_calling(scripted):
    traj = rollout(scripted(lambda p: call("x")), RolloutLimits(max_turns=2, max_tool_calls=9))
    assert len(traj.assistant_turns) == 2 and traj.finish_reason == "max_turns"


def test_max_new_tokens_per_turn_cuts_a_turn(scripted):
    traj = rollout(scripted(lambda p: "word " * 50), RolloutLimits(max_new_tokens_per_turn=7))
    assert len(traj.turns[1].token_ids) == 7 and traj.finish_reason == "length"


def test_total_token_budget_bounds_the_policy_tokens(scripted):
    limits = RolloutLimits(max_turns=10, max_tool_calls=10, max_total_new_tokens=60)
    traj = rollout(scripted(lambda p: call("x")), limits)
    assert traj.num_policy_tokens <= 60 and traj.finish_reason == "token_budget"


def test_long_tool_responses_are_middle_truncated_with_a_marker(scripted):
    respond = lambda p: call("a" * 100 + "END") if "<tool_response>" not in p else "\\boxed{1}<|im_end|>"  # noqa: E731
    limits = RolloutLimits(max_tool_response_chars=60, max_new_tokens_per_turn=400, max_total_new_tokens=800)
    traj = rollout(scripted(respond), limits)
    shown = traj.tool_results[0].output
    assert len(shown) <= 60 and shown.startswith("echo aaa") and shown.endswith("END")
    assert "characters truncated" in shown


def test_tool_errors_show_the_last_traceback_line_by_default(scripted):
    respond = lambda p: call("fail") if "<tool_response>" not in p else "\\boxed{1}<|im_end|>"  # noqa: E731
    traj = rollout(scripted(respond), RolloutLimits())
    assert traj.tool_results[0].output == "ValueError: bad input"
    assert traj.num_failed_calls == 1


def test_tool_errors_in_full_when_configured(scripted):
    respond = lambda p: call("fail") if "<tool_response>" not in p else "\\boxed{1}<|im_end|>"  # noqa: E731
    traj = rollout(scripted(respond), RolloutLimits(tool_error_style="full"))
    assert traj.tool_results[0].output.startswith("Traceback (most recent call last):")


def test_truncate_middle_keeps_head_and_tail_within_the_limit():
    text = "".join(str(i % 10) for i in range(1000))
    out = truncate_middle(text, 100)
    assert len(out) == 100 and out.startswith("0123") and out.endswith("789")
    cut = int(out.split("...[")[1].split(" ")[0])
    assert len(out) - len(f"\n...[{cut} characters truncated]...\n") == 1000 - cut


def test_short_text_is_not_truncated():
    assert truncate_middle("short", 100) == "short"


def test_last_error_line_skips_trailing_blank_lines():
    assert last_error_line("Traceback:\n  x\nNameError: name 'a' is not defined\n\n") == (
        "NameError: name 'a' is not defined"
    )
