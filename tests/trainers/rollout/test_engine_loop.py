"""The rollout loop with scripted responses: turn structure, glue, masks, calls, answers and environments."""

from __future__ import annotations

import json

from trainers.config.limits import RolloutLimits
from trainers.rollout.engine import RolloutEngine
from trainers.trajectory import Trajectory

SLEEP = ["test_sleep"]


def call(text: str, seconds: float = 0.0) -> str:
    args = {"text": text, "seconds": seconds}
    payload = json.dumps({"name": "test_sleep", "arguments": args})
    return f"<think>need it</think><tool_call>{payload}</tool_call>"


def by_responses(*texts: str):
    """Respond with texts[n], n = how many tool responses or notices the context already holds."""
    return lambda prompt: texts[min(prompt.count("<|im_start|>user") - 1, len(texts) - 1)]


def run(backend, respond_limits=None, rows=None, template="qwen_tool", tools=SLEEP, **kw) -> Trajectory:
    engine = RolloutEngine(backend, template, tools, respond_limits or RolloutLimits(), **kw)
    return engine.run(rows or [{"id": "q1", "question": "echo hi", "answer": "hi"}])[0]


def test_call_then_answer_gives_prompt_assistant_tool_assistant(scripted):
    backend = scripted(by_responses(call("hi"), "<think>done</think> \\boxed{hi}<|im_end|>"))
    traj = run(backend)
    assert [t.role for t in traj.turns] == ["prompt", "assistant", "tool", "assistant"]
    assert traj.final_answer == "hi" and traj.finish_reason == "answer"
    assert traj.ground_truth == {"answer": "hi", "tool_calls": None}
    assert traj.group_id == "q1" and traj.sample_index == 0


def test_only_the_last_allowed_turn_says_no_request_will_continue_it(scripted):
    backend = scripted(by_responses(call("a"), call("b"), call("c")))
    seen = []
    generate = backend.generate
    backend.generate = lambda requests: seen.extend(r.may_continue for r in requests) or generate(requests)
    traj = run(backend, RolloutLimits(max_turns=3))
    assert seen == [True, True, False]
    assert traj.num_tool_calls == 3


def test_tool_turn_is_the_templates_glue_with_mask_zero(scripted):
    backend = scripted(by_responses(call("hi"), "\\boxed{hi}<|im_end|>"))
    tool_turn = run(backend).turns[2]
    expected = "<|im_end|>\n<|im_start|>user\n<tool_response>\necho hi\n</tool_response><|im_end|>\n"
    assert tool_turn.text == expected + "<|im_start|>assistant\n"
    assert tool_turn.loss_mask == [0] * len(tool_turn.token_ids)


def test_assistant_tokens_have_mask_one_and_logprobs(scripted):
    traj = run(scripted(by_responses(call("hi"), "\\boxed{hi}<|im_end|>")))
    for turn in traj.assistant_turns:
        assert turn.loss_mask == [1] * len(turn.token_ids)
        assert turn.logprobs is not None and len(turn.logprobs) == len(turn.token_ids)


def test_a_turn_runs_past_its_call_to_the_end_of_the_message(scripted):
    # the stop is the end of the message, not </tool_call>: one message may make several calls
    backend = scripted(
        by_responses(call("hi") + " trailing text<|im_end|>never sampled", "\\boxed{hi}<|im_end|>")
    )
    traj = run(backend)
    turn = traj.turns[1]
    assert turn.text.endswith("</tool_call> trailing text<|im_end|>") and turn.finish_reason == "eos"
    assert traj.turns[2].text.startswith("\n<|im_start|>user\n<tool_response>")


def test_json_list_of_calls_runs_every_call_and_keeps_their_order(scripted):
    calls = [
        {"name": "test_sleep", "arguments": {"text": t, "seconds": s}} for t, s in (("a", 0.2), ("b", 0.0))
    ]
    first = f"<think>two</think><tool_call>{json.dumps(calls)}</tool_call>"
    traj = run(scripted(by_responses(first, "\\boxed{ab}<|im_end|>")))
    assert [r.output for r in traj.tool_results] == ["echo a", "echo b"]
    assert traj.turns[2].text.index("echo a") < traj.turns[2].text.index("echo b")


def test_two_tags_then_end_of_turn_skips_the_repeated_turn_end(scripted):
    first = call("a") + call("b") + "<|im_end|>"
    backend = scripted(by_responses(first, "\\boxed{ab}<|im_end|>"))
    engine = RolloutEngine(backend, "qwen_tool", SLEEP, RolloutLimits())
    traj = engine.run([{"id": "q", "question": "x"}])[0]
    assert traj.num_tool_calls == 2 and traj.turns[1].finish_reason == "eos"
    assert traj.turns[2].text.startswith("\n<|im_start|>user\n<tool_response>")


def test_malformed_call_becomes_an_error_observation_and_a_failed_call(scripted):
    bad = '<think>x</think><tool_call>{"name": "test_sleep", "arguments": {oops}}</tool_call>'
    traj = run(scripted(by_responses(bad, "\\boxed{1}<|im_end|>")))
    assert traj.num_failed_calls == 1 and traj.finish_reason == "answer"
    assert "invalid JSON" in traj.tool_results[0].output
    assert "invalid JSON" in traj.turns[2].text


def test_end_of_sequence_without_answer_finishes_eos(scripted):
    traj = run(scripted(lambda prompt: "<think>no idea</think><|im_end|>"))
    assert traj.finish_reason == "eos" and traj.final_answer is None


def test_samples_per_prompt_share_the_group_and_order_by_row(scripted):
    engine = RolloutEngine(scripted(lambda p: "\\boxed{1}<|im_end|>"), "qwen_tool", SLEEP, RolloutLimits())
    trajs = engine.run([{"id": "a", "question": "1"}, {"id": "b", "question": "2"}], samples_per_prompt=2)
    assert [(t.group_id, t.sample_index) for t in trajs] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]


def test_trajectory_round_trips_through_json(scripted):
    traj = run(scripted(by_responses(call("hi"), "\\boxed{hi}<|im_end|>")))
    again = Trajectory.from_json(traj.to_json())
    assert again.token_ids == traj.token_ids and again.tool_results == traj.tool_results


def test_environment_turns_record_state_hash_state_and_reward_until_done(scripted):
    def move(action: str) -> str:
        return f'<tool_call>{{"name": "frozenlake", "arguments": {{"action": "{action}"}}}}</tool_call>'

    rows = [{"id": "lake", "question": "reach G", "initial_state": {"grid": ["P_", "_G"]}}]
    respond = by_responses(move("right"), move("down"))
    traj = run(scripted(respond), RolloutLimits(max_turns=5), rows, tools=["frozenlake"])
    turns = traj.assistant_turns
    assert traj.finish_reason == "env_done" and len(turns) == 2
    assert "P_\n_G" in traj.prompt_text
    assert turns[0].state_hash != turns[1].state_hash
    assert turns[0].state == "_P\n_G" and turns[1].state.endswith("W")
    assert turns[1].env_reward is not None and turns[1].env_reward > 0


def lake_move(action: str) -> str:
    return f'<tool_call>{{"name": "frozenlake", "arguments": {{"action": "{action}"}}}}</tool_call>'


LAKE = [{"id": "lake", "question": "reach G", "initial_state": {"grid": ["P_", "_G"]}}]


def test_a_turn_that_took_no_action_earns_the_environments_invalid_action_penalty(scripted):
    broken = '<tool_call>{"name": "frozenlake", "arguments": {oops}}</tool_call>'
    respond = by_responses(broken, lake_move("jump"), lake_move("right"), "I give up<|im_end|>")
    lake = {"name": "frozenlake", "config": {"invalid_action_penalty": -0.5}}
    traj = run(scripted(respond), RolloutLimits(max_turns=5), LAKE, tools=[lake])
    turns = traj.assistant_turns
    # a malformed call and an unknown action took no step; a move did (FrozenLake pays 0 for it); a
    # turn without any call ends the play and took no action either
    assert [t.env_reward for t in turns] == [-0.5, -0.5, 0.0, -0.5]
    assert [t.state for t in turns] == ["P_\n_G", "P_\n_G", "_P\n_G", "_P\n_G"]
    assert traj.finish_reason == "eos"


def test_without_a_penalty_a_turn_without_action_earns_nothing_and_a_callless_turn_no_env_reward(scripted):
    broken = '<tool_call>{"name": "frozenlake", "arguments": {oops}}</tool_call>'
    traj = run(scripted(by_responses(broken, "done<|im_end|>")), RolloutLimits(max_turns=5), LAKE,
               tools=["frozenlake"])  # fmt: skip
    assert [t.env_reward for t in traj.assistant_turns] == [0.0, None]
