"""An evaluation plays its samples with the run's agent program (`python -m trainers eval` and the
workbench's evaluation task share `evaluate_config`)."""

from __future__ import annotations

import json

import pytest

from tests.trainers.agent.conftest import PROGRAMS
from trainers.config.loader import ConfigError
from trainers.training.eval_run import eval_config_from_run, evaluate_config, validate_eval_config

AGENT = {"program": str(PROGRAMS / "tool_loop.py"), "wall_s": 30}


@pytest.mark.slow
def test_an_evaluation_plays_each_sample_with_the_agent_program(tmp_path, tiny_model_dir):
    data = tmp_path / "eval.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": str(i), "question": f"{i}+1?", "answer": str(i + 1)}) + "\n" for i in range(2)
        )
    )
    run = {"model": {"path": str(tiny_model_dir)}, "template": {"name": "qwen_tool"},
           "limits": {"max_new_tokens_per_turn": 8, "max_total_new_tokens": 16},
           "rollout": {"backend": "agent", "agent": AGENT}}  # fmt: skip
    config = eval_config_from_run(run, data_path=str(data), samples=2)
    assert config.agent is not None and config.agent.program == AGENT["program"]
    metrics, trajectories = evaluate_config(config)
    assert metrics["trajectories"] == 4 and len(trajectories) == 4
    assert all(t.metadata["agent"]["log"]["status"] == "ok" for t in trajectories)
    assert all(t.metadata["agent"]["requests"] >= 1 for t in trajectories)


def test_an_agent_evaluation_with_tools_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="brings its tools"):
        validate_eval_config({"data_path": "x.jsonl", "agent": AGENT, "tools": [{"name": "calculator"}]})
