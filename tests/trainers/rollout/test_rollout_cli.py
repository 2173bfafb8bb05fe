"""`python -m trainers rollout CONFIG` writes trajectories that load back."""

from __future__ import annotations

import json

import torch

from trainers.cli import main
from trainers.trajectory import Trajectory


def test_rollout_cli_writes_one_loadable_trajectory_per_sample(tiny_model_dir, tmp_path, capsys):
    torch.set_num_threads(1)
    data = tmp_path / "rows.jsonl"
    rows = [{"id": "a", "question": "What is 2 * 21?", "answer": "42"}, {"id": "b", "prompt": "7 + 5?"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = {
        "model": {"path": str(tiny_model_dir)},
        "template": {"name": "qwen_tool"},
        "tools": [{"name": "calculator"}],
        "limits": {"max_turns": 2, "max_new_tokens_per_turn": 8},
        "dataset": str(data),
        "samples_per_prompt": 2,
        "output": str(tmp_path / "out" / "trajectories.jsonl"),
    }
    (tmp_path / "rollout.json").write_text(json.dumps(config))
    assert main(["rollout", str(tmp_path / "rollout.json")]) == 0
    summary = json.loads(capsys.readouterr().out)
    lines = (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()
    trajs = [Trajectory.from_json(line) for line in lines]
    assert summary["trajectories"] == 4 == len(trajs)
    assert [(t.group_id, t.sample_index) for t in trajs] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert trajs[0].ground_truth["answer"] == "42" and "7 + 5?" in trajs[2].prompt_text
    assert all(0 < t.num_policy_tokens <= 16 for t in trajs)


def test_rollout_cli_reads_yaml(tiny_model_dir, tmp_path, capsys):
    data = tmp_path / "rows.jsonl"
    data.write_text('{"question": "hi"}\n')
    (tmp_path / "r.yaml").write_text(
        f"model: {{path: {tiny_model_dir}}}\ntemplate: {{name: torl}}\n"
        f"limits: {{max_new_tokens_per_turn: 4}}\ndataset: {data}\noutput: {tmp_path / 'o.jsonl'}\n"
    )
    assert main(["rollout", str(tmp_path / "r.yaml")]) == 0
    assert json.loads(capsys.readouterr().out)["trajectories"] == 1
