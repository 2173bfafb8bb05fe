import json
import math
from dataclasses import dataclass
from pathlib import Path

from trainers.training.sinks import MultiSink, RunDirSink, Sink, read_jsonl
from trainers.trajectory import ToolCall, ToolResult, Trajectory


@dataclass
class Alert:
    step: int
    rule: str


def test_run_dir_sink_writes_one_jsonl_line_per_record(tmp_path):
    sink = RunDirSink(tmp_path)
    sink.log_metrics(1, {"reward/mean": 0.5, "loss/policy": math.nan})
    sink.log_trajectories(1, [Trajectory(uid="a", group_id="g"), Trajectory(uid="b", group_id="g")])
    sink.log_eval(2, {"eval/accuracy": 0.25})
    sink.log_checkpoint(2, tmp_path / "checkpoints" / "step_000002")
    sink.log_alerts([Alert(step=2, rule="entropy_drop")])
    sink.close()
    assert read_jsonl(tmp_path / "metrics.jsonl") == [{"step": 1, "reward/mean": 0.5, "loss/policy": None}]
    assert [t["uid"] for t in read_jsonl(tmp_path / "trajectories.jsonl")] == ["a", "b"]
    assert Trajectory.from_dict({k: v for k, v in read_jsonl(tmp_path / "trajectories.jsonl")[0].items()
                                 if k != "step"}).uid == "a"  # fmt: skip
    assert read_jsonl(tmp_path / "eval.jsonl") == [{"step": 2, "eval/accuracy": 0.25}]
    assert read_jsonl(tmp_path / "alerts.jsonl") == [{"alert": {"step": 2, "rule": "entropy_drop"}}]
    assert Path(read_jsonl(tmp_path / "checkpoints.jsonl")[0]["path"]).name == "step_000002"


def test_trajectories_every_n_steps(tmp_path):
    sink = RunDirSink(tmp_path, trajectories_every=2)
    for step in range(4):
        sink.log_trajectories(step, [Trajectory(uid=str(step), group_id="g")])
    sink.close()
    assert [t["step"] for t in read_jsonl(tmp_path / "trajectories.jsonl")] == [0, 2]


class Recorder(Sink):
    def __init__(self):
        self.calls = []

    def log_metrics(self, step, metrics):
        self.calls.append(("metrics", step))

    def log_trajectories(self, step, trajectories):
        self.calls.append(("trajectories", step))

    def log_eval(self, step, results):
        self.calls.append(("eval", step))

    def log_checkpoint(self, step, path):
        self.calls.append(("checkpoint", step))

    def log_alerts(self, alerts):
        self.calls.append(("alerts", len(alerts)))

    def log_sft(self, step, metrics):
        self.calls.append(("sft", step))

    def close(self):
        self.calls.append(("close", None))


def test_multi_sink_fans_out_in_order():
    first, second = Recorder(), Recorder()
    sink = MultiSink([first, second])
    sink.log_sft(7, {})
    sink.log_metrics(3, {})
    sink.log_alerts([1, 2])
    sink.close()
    assert first.calls == second.calls == [("sft", 7), ("metrics", 3), ("alerts", 2), ("close", None)]


def test_logged_trajectory_equals_its_to_dict(tmp_path, build_trajectory):
    traj = build_trajectory([1, 2], [("assistant", [3, 4]), ("tool", [5])])
    traj.turns[1].tool_calls = [ToolCall("calculator", {"expression": "1 + 2"})]
    traj.turns[1].tool_results = [ToolResult("calculator", True, "3")]
    sink = RunDirSink(tmp_path)
    sink.log_trajectories(0, [traj])
    sink.close()
    (line,) = read_jsonl(tmp_path / "trajectories.jsonl")
    assert {k: v for k, v in line.items() if k != "step"} == json.loads(traj.to_json())


def test_a_lone_surrogate_in_model_text_is_written_as_a_replacement_character(tmp_path):
    """Writing "\\ud800" as UTF-8 raised UnicodeEncodeError and ended the run."""
    call = ToolCall(name="calc\ud800", arguments={"x": "a\udfff"}, raw="\ud83d\ude00")
    traj = Trajectory(uid="a\ud800", group_id="g", metadata={"calls": [call.name]})
    sink = RunDirSink(tmp_path)
    sink.log_trajectories(1, [traj])
    sink.log_metrics(1, {"key\ud800": 1.0})
    sink.close()
    (line,) = read_jsonl(tmp_path / "trajectories.jsonl")
    assert (line["uid"], line["metadata"]["calls"]) == ("a\ufffd", ["calc\ufffd"])
    assert read_jsonl(tmp_path / "metrics.jsonl") == [{"step": 1, "key\ufffd": 1.0}]
