"""Registering judges (WORKBENCH_JUDGES) and declaring a judge reward in a run config's YAML."""

import json

import pytest

from tests.support.judge_server import judge_server
from trainers.config import ConfigError, load_config
from trainers.metrics import compute_step_metrics, keys
from trainers.rewards import RewardContext, score_text
from trainers.rewards.judge_endpoints import JUDGES_ENV, JudgeEndpointError, judge_endpoint, parse_judges

GRADER = {"url": "https://judge.internal/v1", "model": "m", "api_key_env": "K", "timeout_s": 5}


def test_judges_are_read_from_json_or_a_json_file(tmp_path):
    judges = parse_judges(json.dumps({"grader": GRADER}))
    assert judges["grader"].chat_url == "https://judge.internal/v1/chat/completions"
    assert (judges["grader"].timeout_s, judges["grader"].max_concurrency) == (5, 8)
    path = tmp_path / "judges.json"
    path.write_text(json.dumps({"grader": GRADER}))
    assert parse_judges(str(path)) == judges
    assert parse_judges("  ") == {}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{", "WORKBENCH_JUDGES: not JSON"),
        ("[]", "WORKBENCH_JUDGES: must be a JSON object of judges by name"),
        ("/nonexistent/judges.json", "WORKBENCH_JUDGES: cannot read /nonexistent/judges.json"),
        ('{"a b": {}}', "'a b' is not a judge name"),
        ('{"g": {"url": "https://x/api", "model": "m"}}', "judge 'g': url: String should match pattern"),
        ('{"g": {"url": "https://x/v1"}}', "judge 'g': model: Field required"),
        ('{"g": {"url": "https://x/v1", "model": "m", "teams": []}}', "judge 'g': teams: Extra inputs"),
    ],
)
def test_a_malformed_list_is_refused_with_where(text, error):
    with pytest.raises(JudgeEndpointError, match=error):
        parse_judges(text)


def test_a_judge_is_looked_up_by_name_in_the_environment(monkeypatch):
    monkeypatch.setenv(JUDGES_ENV, json.dumps({"grader": GRADER, "backup": GRADER}))
    assert judge_endpoint("grader").model == "m"
    with pytest.raises(
        JudgeEndpointError, match="no judge named 'x' is registered; registered: backup, grader"
    ):
        judge_endpoint("x")
    monkeypatch.delenv(JUDGES_ENV)
    with pytest.raises(JudgeEndpointError, match="registered: none \\(WORKBENCH_JUDGES is empty\\)"):
        judge_endpoint("grader")


RUN_YAML = """\
reward:
  components:
    - name: correctness
    - name: judge
      label: quality
      weight: 0.5
      params:
        judge: local
        mode: pointwise
        error_score: 0.0
        rubric: |
          Question: {{ question }}
          Reference: {{ ground_truth }}
          Final answer: {{ answer }}
          {{ response }}
"""


def test_a_run_config_declares_a_judge_in_a_weighted_sum(tmp_path, monkeypatch, make_traj):
    with judge_server(lambda body: "SCORE: 8") as server:
        server.register(monkeypatch)
        path = tmp_path / "run.yaml"
        path.write_text(RUN_YAML)
        reward = load_config(path).reward
        right = make_traj("It is \\boxed{4}.", {"answer": "4"}, group_id="g")
        wrong = make_traj("It is \\boxed{5}.", {"answer": "4"}, group_id="g")
        right.metadata["question"] = wrong.metadata["question"] = "2+2?"
        reward.compute([right, wrong], RewardContext())
    assert right.rewards == {"correctness": 1.0, "quality": 0.8}
    assert (right.reward, wrong.reward) == (pytest.approx(1.4), pytest.approx(0.4))
    prompts = sorted(r["messages"][1]["content"] for r in server.requests)
    assert prompts[0] == "Question: 2+2?\nReference: 4\nFinal answer: 4\nIt is \\boxed{4}.\n"
    metrics = compute_step_metrics([right, wrong])
    assert metrics[keys.reward_component_key("quality")] == pytest.approx(0.8)
    assert (metrics[keys.JUDGE_CALLS], metrics[keys.JUDGE_ERRORS]) == (2.0, 0.0)


def test_a_run_config_naming_a_url_or_an_unknown_judge_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(JUDGES_ENV, json.dumps({"grader": GRADER}))
    path = tmp_path / "run.yaml"
    path.write_text(RUN_YAML.replace("judge: local", "judge: https://evil.example/v1"))
    with pytest.raises(
        ConfigError, match="params.judge: a run config names a judge registered in WORKBENCH_JUDGES"
    ):
        load_config(path)
    path.write_text(RUN_YAML)
    with pytest.raises(ConfigError, match="no judge named 'local' is registered; registered: grader"):
        load_config(path)


def test_score_text_runs_a_judge_on_one_pasted_output(monkeypatch):
    with judge_server(lambda body: "no verdict") as server:
        server.register(monkeypatch)
        definition = {"components": [{"name": "judge", "params": {"judge": "local", "error_score": 0.1}}]}
        out = score_text(definition, "\\boxed{4}", {"answer": "4", "question": "2+2?"}, "qwen_tool")
    assert out["components"] == {"judge": 0.1}
    assert out["notes"] == ["judge local: malformed answer: expected one SCORE: line, found 0; scored 0.1"]
    assert "2+2?" in server.requests[0]["messages"][1]["content"]  # the question from the ground truth
