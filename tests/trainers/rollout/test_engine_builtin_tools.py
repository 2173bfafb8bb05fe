"""The engine with the built-in tools: ToRL with the sandboxed interpreter, Qwen with the calculator."""

from __future__ import annotations

from trainers.config.limits import RolloutLimits
from trainers.rollout.engine import RolloutEngine


def test_torl_runs_the_code_block_in_the_sandbox_and_shows_the_last_error_line(scripted):
    def respond(prompt: str) -> str:
        blocks = prompt.count("```output\n")
        if blocks == 0:
            return "First:\n```python\nprint(6 * 7)\n```\n"
        if blocks == 1:
            return "Now:\n```python\nprint(a)\n```\n"
        return "So \\boxed{42}<|im_end|>"

    engine = RolloutEngine(scripted(respond), "torl", ["python"], RolloutLimits())
    traj = engine.run([{"id": "q", "question": "6 * 7?", "answer": "42"}])[0]
    assert [t.role for t in traj.turns] == ["prompt", "assistant", "tool", "assistant", "tool", "assistant"]
    assert traj.turns[2].text == "```output\n42\n```\n"
    assert traj.tool_results[1].output == "NameError: name 'a' is not defined"
    assert traj.final_answer == "42" and traj.num_failed_calls == 1


def test_qwen_template_with_the_calculator(scripted):
    payload = '{"name": "calculator", "arguments": {"expression": "6*7"}}'
    call = f"<think>use it</think><tool_call>{payload}</tool_call>"
    respond = lambda p: call if "<tool_response>" not in p else "\\boxed{42}<|im_end|>"  # noqa: E731
    engine = RolloutEngine(scripted(respond), "qwen_tool", ["calculator"], RolloutLimits())
    traj = engine.run([{"id": "q", "question": "6 * 7?"}])[0]
    assert traj.tool_results[0].ok and traj.tool_results[0].output == "42"
    assert "<tool_response>\n42\n</tool_response>" in traj.turns[2].text
