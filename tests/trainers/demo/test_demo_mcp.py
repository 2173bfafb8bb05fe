"""The short demo through MCP: the calculator is a tool of a real MCP server (`python -m trainers
mcp-serve calculator`, a separate process over streamable HTTP) listed by the operator, not the built-in
binding; GRPO from the same short SFT raises the rate at which the policy calls it, with every call
answered by the server."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.support.mcp_processes import REPO, free_port, listening, servers_setting
from tests.support.polling import wait_for
from trainers.config.loader import validate_config
from trainers.demo.recipe import DemoSettings, rl_config
from trainers.mcp.servers import SERVERS_ENV
from trainers.metrics import keys
from trainers.models.model_io import load_policy
from trainers.tools import TOOLS
from trainers.training.build import build_trainer

ARTIST_PARAMS = {"mode": "numeric", "answer_weight": 1.0, "format_weight": 0.0, "tool_weight": 1.0}
ARTIST = {"components": [{"name": "artist", "params": ARTIST_PARAMS}]}


@pytest.fixture
def calculator_server(monkeypatch: pytest.MonkeyPatch):
    port = free_port()
    command = [sys.executable, "-m", "trainers", "mcp-serve", "calculator", "--port", str(port)]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: listening(port), 30, "the MCP calculator server")
        monkeypatch.setenv(SERVERS_ENV, servers_setting(tools={"url": f"http://127.0.0.1:{port}/mcp"}))
        yield "tools"
    finally:
        process.kill()
        process.wait(10)


def mcp_calculator(server: str) -> dict:
    """The binding an import from the server pins: the server's name for the tool, and its schema."""
    spec = TOOLS.get("calculator").spec()["function"]
    config = {"server": server, "tool": "calculator", "name": "calculator", "parameters": spec["parameters"],
              "description": spec["description"], "timeout_s": 5.0}  # fmt: skip
    return {"name": "mcp", "config": config}


@pytest.mark.slow
def test_grpo_raises_the_rate_of_calls_to_an_mcp_tool(tmp_path, demo_sft_policy, calculator_server):
    torch.set_num_threads(1)
    model, tokenizer = load_policy(demo_sft_policy["sft"])
    settings = DemoSettings(rl_steps=20, rl_lr=1e-3, kl_coef=0.0, eval_every=0, eval_samples=2)
    raw = rl_config(settings, tmp_path, demo_sft_policy["base"], demo_sft_policy["data"], reward=ARTIST)
    config = validate_config({**raw.model_dump(mode="json"), "tools": [mcp_calculator(calculator_server)]})
    build_trainer(config, model=model, tokenizer=tokenizer).train()

    lines = (Path(config.output_dir) / "metrics.jsonl").read_text().splitlines()
    metrics = [json.loads(line) for line in lines]
    calls = [row.get(keys.tool_calls_key("calculator"), 0.0) for row in metrics]
    rewards = [row["reward/mean"] for row in metrics]
    served = [row.get(keys.server_errors_key(calculator_server)) for row in metrics]
    assert len(metrics) == settings.rl_steps
    # every step with calls reached the server (its series is there); the errors it answered are the
    # calculator's own (isError: an expression it cannot evaluate), a small share of the calls
    samples = settings.prompts_per_step * settings.samples_per_prompt
    assert all(errors is not None for errors, n in zip(served, calls, strict=True) if n)
    assert sum(n > 0 for n in calls) >= settings.rl_steps - 2
    assert sum(served_errors or 0.0 for served_errors in served) < 0.3 * sum(calls) * samples
    # 64 samples a step: the mean calls per trajectory rise well past sampling noise, and reward with them
    assert sum(calls[-5:]) / 5 - sum(calls[:5]) / 5 > 0.2
    assert sum(rewards[-5:]) > sum(rewards[:5])
