"""The SFT curriculum of the run config (`sft.phases`), as the calculator demo trains: a phase on the
tool-using conversations alone, then one on all of them, numbered as one stream of SFT steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainers.sft_configs import tiny_sft_config
from trainers.config.loader import ConfigError, validate_config
from trainers.demo.catalog import expert_conversations
from trainers.metrics import keys
from trainers.training import sft as sft_module
from trainers.training.run import run_config
from trainers.training.sinks import RunDirSink, read_jsonl

PHASES = [{"only_tool_calls": True, "steps": 3}, {"steps": 2}]


def curriculum_config(tmp_path: Path, records: list[dict], phases: list[dict]) -> dict:
    return tiny_sft_config(tmp_path, records, sft={"batch_size": 4, "phases": phases})


def calls_the_calculator(record: dict) -> bool:
    return any(m.get("tool_calls") for m in record["messages"] if m["role"] == "assistant")


@pytest.fixture
def seen_pools(monkeypatch) -> list[list]:
    """The examples each `sft_train` call of the curriculum trains on (the real training still runs)."""
    pools: list[list] = []
    real = sft_module.sft_train

    def recording(model, examples, **kwargs):
        pools.append(list(examples))
        return real(model, examples, **kwargs)

    monkeypatch.setattr(sft_module, "sft_train", recording)
    return pools


def test_the_tool_only_phase_sees_only_conversations_that_call_the_calculator(tmp_path, seen_pools):
    records = expert_conversations(12, tool_fraction=0.5)
    tool_uids = {f"expert-{i}" for i, r in enumerate(records) if calls_the_calculator(r)}
    assert 0 < len(tool_uids) < len(records)  # both kinds present, counted from the raw messages
    config = validate_config(curriculum_config(tmp_path, records, PHASES))
    result = run_config(config)
    first, second = seen_pools
    assert {e.uid for e in first} == tool_uids
    assert len(second) == len(records)
    assert result.sft.steps == 5


def test_phases_stream_as_one_numbered_sft_series(tmp_path):
    config = validate_config(curriculum_config(tmp_path, expert_conversations(12), PHASES))
    run_config(config, sink=RunDirSink(config.output_dir))
    rows = read_jsonl(Path(config.output_dir) / "sft.jsonl")
    assert [row["step"] for row in rows] == [1, 2, 3, 4, 5]
    assert [row[keys.SFT_PROGRESS] for row in rows] == pytest.approx([s / 5 for s in range(1, 6)], rel=1e-9)
    # each phase has a constant lr after its own warm-up: the second starts from its warm-up again
    lrs = [row[keys.SFT_LR] for row in rows]
    assert lrs[3] < lrs[2]


def test_a_stop_during_the_first_phase_skips_the_second(tmp_path, seen_pools):
    config = validate_config(curriculum_config(tmp_path, expert_conversations(12), PHASES))
    steps: list[int] = []

    class Counting(RunDirSink):
        def log_sft(self, step, metrics):
            steps.append(step)
            super().log_sft(step, metrics)

    result = run_config(config, sink=Counting(config.output_dir), should_stop=lambda: len(steps) >= 2)
    assert result.sft.steps == 2 and result.stopped and len(seen_pools) == 1


def test_a_tool_only_phase_without_tool_conversations_is_refused(tmp_path):
    records = [r for r in expert_conversations(12) if not calls_the_calculator(r)]
    config = validate_config(curriculum_config(tmp_path, records, PHASES))
    with pytest.raises(ValueError, match="tool-only phase"):
        run_config(config)


@pytest.mark.parametrize("phases", [[], [{"steps": 0}], [{"steps": 5, "only_tool": True}]])
def test_malformed_phases_are_config_errors(tmp_path, phases):
    with pytest.raises(ConfigError):
        validate_config(curriculum_config(tmp_path, expert_conversations(4), phases))
