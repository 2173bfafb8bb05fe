"""`rollout.backend: agent` is checked before a run starts: the program, the template and the tools."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.trainers.agent.conftest import PROGRAMS
from trainers.agent.program import AgentProgram
from trainers.config.agent import AgentConfig, ProgramError
from trainers.config.loader import validate_config

BASE = {
    "model": {"path": "tiny"},
    "template": {"name": "qwen_tool"},
    "data": {"train_path": "train.jsonl"},
    "reward": {"components": [{"name": "posted"}]},
    "rollout": {"backend": "agent", "agent": {"program": str(PROGRAMS / "tool_loop.py")}},
}


def config(**changes) -> dict:
    return {**BASE, **changes}


def test_an_agent_run_validates():
    assert validate_config(config()).rollout.agent.program.endswith("tool_loop.py")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"rollout": {"backend": "agent"}}, "needs rollout.agent"),
        ({"template": {"name": "torl"}}, "template.name among qwen_tool, hf_native"),
        ({"tools": [{"name": "calculator"}]}, "brings its tools"),
    ],
)
def test_an_agent_run_without_what_it_needs_is_refused(changes, message):
    with pytest.raises((ValidationError, ValueError), match=message):
        validate_config(config(**changes))


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def run(task, client:\n", "line 1"),
        ("def main(task, client):\n    return None\n", "no top-level function run"),
        ("def run(task):\n    return None\n", r"must take \(task, client\)"),
        ("def run(task, client):\n    return None\n" + "#" * 200_000, "at most 200000"),
    ],
)
def test_a_program_that_cannot_run_is_refused_with_the_reason(source, message):
    with pytest.raises(ValidationError, match=message):
        AgentConfig(source=source)


def test_a_program_file_is_read_where_the_run_is_built_not_when_a_config_is_validated(tmp_path):
    config = AgentConfig(program=str(tmp_path / "absent.py"))  # a web process validating never reads it
    with pytest.raises(ProgramError, match="cannot read"):
        AgentProgram.from_config(config)
    (tmp_path / "broken.py").write_text("def run(task):\n    return None\n")
    with pytest.raises(ProgramError, match=r"must take \(task, client\)"):
        AgentProgram.from_config(AgentConfig(program=str(tmp_path / "broken.py")))


def test_exactly_one_of_program_and_source():
    with pytest.raises(ValidationError, match="exactly one"):
        AgentConfig()
