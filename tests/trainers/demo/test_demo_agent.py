"""The short demo with the calculator written as an agent program (trainers/demo/agents/calculator.py):
`python -m trainers train` serves the policy on the agent endpoint, the program's plain OpenAI-client tool
loop plays each episode in the sandbox, and GRPO from the same short SFT raises the rate at which the
policy calls the calculator, as the built-in recipe does."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainers.demo.recipe import DemoSettings, rl_config
from trainers.metrics import keys

REPO = Path(__file__).resolve().parents[3]
PROGRAM = REPO / "trainers" / "demo" / "agents" / "calculator.py"
ARTIST_PARAMS = {"mode": "numeric", "answer_weight": 1.0, "format_weight": 0.0, "tool_weight": 1.0}
ARTIST = {"components": [{"name": "artist", "params": ARTIST_PARAMS}]}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_calculator_agent_program_trains_from_the_command_line(tmp_path, demo_sft_policy):
    settings = DemoSettings(rl_steps=20, rl_lr=1e-3, kl_coef=0.0, eval_every=0, eval_samples=2)
    raw = rl_config(settings, tmp_path, demo_sft_policy["sft"], demo_sft_policy["data"], reward=ARTIST)
    config = raw.model_dump(mode="json")
    config["tools"] = []
    config["rollout"] = {
        **config["rollout"],
        "backend": "agent",
        "agent": {"program": str(PROGRAM), "wall_s": 60},
    }
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(config))
    command = [sys.executable, "-m", "trainers", "train", str(path), "--threads", "1"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=840)
    assert done.returncode == 0, done.stderr[-4000:]

    lines = (Path(config["output_dir"]) / "metrics.jsonl").read_text().splitlines()
    metrics = [json.loads(line) for line in lines]
    calls = [row.get(keys.tool_calls_key("calculator"), 0.0) for row in metrics]
    rewards = [row["reward/mean"] for row in metrics]
    assert len(metrics) == settings.rl_steps
    samples = settings.prompts_per_step * settings.samples_per_prompt
    assert all(row["agent/episodes"] == samples for row in metrics)
    assert sum(row.get("agent/failed", 0.0) for row in metrics) < 0.05 * samples * settings.rl_steps
    # the same bar as the built-in and MCP recipes: calls per trajectory rise past sampling noise
    assert sum(calls[-5:]) / 5 - sum(calls[:5]) / 5 > 0.2
    assert sum(rewards[-5:]) > sum(rewards[:5])
