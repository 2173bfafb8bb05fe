"""Honest resume state: the trainer's state is plain data loaded with `weights_only=True`; the echo-trap
detector resumes exactly, tolerates state saved before a new attribute existed, and a checkpoint
holding a pickled object is refused."""

import math
import random

import pytest
import torch

from trainers.config.loader import validate_config
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.filters import FILTERS
from trainers.metrics import EchoTrapDetector, keys
from trainers.metrics.echo_trap import Alert
from trainers.models.tiny import build_tiny_model
from trainers.training.build import build_trainer
from trainers.training.checkpoint import STATE_FILE, check_plain, load_trainer_state, save_checkpoint


def collapse(steps=60, seed=0):
    """Per-step metrics: healthy for 30 steps, then group std and entropy fall while reward stalls,
    with a grad-norm spike; the detector fires std_collapse, entropy_drop, grad_spike and echo_trap."""
    rng = random.Random(seed)
    out = []
    for s in range(steps):
        late = max(0, s - 30)
        out.append({
            keys.REWARD_MEAN: 0.4 + rng.gauss(0, 0.02),
            keys.REWARD_GROUP_STD_MEAN: 0.4 * math.exp(-late / 4) + abs(rng.gauss(0, 0.01)),
            keys.LOSS_ENTROPY: max(0.1, 1.5 - 0.1 * late) + rng.gauss(0, 0.02),
            keys.LOSS_GRAD_NORM: 15.0 if s == 38 else math.exp(rng.gauss(0, 0.2)),
        })  # fmt: skip
    return out


def feed(detector, metrics, start=0):
    return [a.to_dict() for step, m in enumerate(metrics[start:], start) for a in detector.update(step, m)]


def reload(state, tmp_path):
    """Through a file, as a checkpoint does."""
    torch.save(state, tmp_path / "state.pt")
    return torch.load(tmp_path / "state.pt", weights_only=True)


@pytest.mark.parametrize("cut", [10, 30, 37, 39])  # alerts at 36, 38 (two) and 39
def test_resumed_detector_alerts_exactly_like_an_uninterrupted_one(cut, tmp_path):
    metrics = collapse()
    expected = feed(EchoTrapDetector(), metrics)
    assert {a["rule"] for a in expected} == {"std_collapse", "entropy_drop", "grad_spike", "echo_trap"}
    first = EchoTrapDetector()
    before = feed(first, metrics[:cut])
    state = first.state_dict()
    check_plain(state)
    resumed = EchoTrapDetector()
    resumed.load_state_dict(reload(state, tmp_path))
    assert resumed.state_dict() == state
    after = feed(resumed, metrics, start=cut)
    assert after and before + after == expected


def test_state_saved_before_a_new_attribute_existed_loads_with_its_default(tmp_path):
    metrics = collapse()
    detector = EchoTrapDetector()
    feed(detector, metrics[:45])
    state = detector.state_dict()
    assert state["spike"] is not None and state["last_fired"]

    class NewerDetector(EchoTrapDetector):  # the class gained an attribute since the state was saved
        def __init__(self, config=None):
            super().__init__(config)
            self.cooldown: dict[str, int] = {"echo_trap": 3}

    old = reload(state, tmp_path)
    del old["spike"]  # and an older version of the detector did not save these yet
    for alert in old["latest"].values():
        del alert["start_step"]
    newer = NewerDetector()
    feed(newer, metrics)  # loading replaces everything, also what this instance saw itself
    newer.load_state_dict(old)
    assert newer.cooldown == {"echo_trap": 3} and newer.spike is None
    assert all(alert.start_step is None for alert in newer.latest.values())
    assert newer.series.keys() == detector.series.keys()
    # A key only a newer version writes is ignored by this one.
    assert Alert.from_dict({"step": 1, "rule": "r", "severity": "info", "message": "", "new": 1}).step == 1


def test_a_checkpoint_holding_a_pickled_object_is_refused(tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):  # unpickling would call open(marker, "w")
            return (open, (str(marker), "w"))

    path = tmp_path / "ckpt"
    path.mkdir()
    torch.save(
        {"step": 1, "optimizer": None, "scheduler": None, "extra": {"x": Payload()}}, path / STATE_FILE
    )
    with pytest.raises(ValueError, match="plain data"):
        load_trainer_state(path)
    assert not marker.exists()


def test_saving_refuses_state_that_is_not_plain_data(model, tmp_path):
    with pytest.raises(TypeError, match=r"state\['extra'\]\['detector'\] is a EchoTrapDetector"):
        save_checkpoint(tmp_path / "c", step=1, model=model, extra={"detector": EchoTrapDetector()})
    import numpy as np

    with pytest.raises(TypeError, match="float64"):
        check_plain({"best": np.float64(0.5)})


@pytest.fixture(scope="module")
def run_config(tmp_path_factory):
    root = tmp_path_factory.mktemp("state")
    model = build_tiny_model(root / "tiny", hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1)
    train, _ = make_splits(8, 0, seed=0)

    def make(out):
        return validate_config({
            "output_dir": str(out),
            "model": {"path": str(model)},
            "rollout": {"prompts_per_step": 2, "samples_per_prompt": 2},
            "echo_trap": {"on_alert": "starpo_s"},
            "data": {"train_path": str(write_rows(train, root / "train.jsonl"))},
        })  # fmt: skip

    return make


def test_trainer_resume_restores_detector_filters_sampler_and_best(run_config, tmp_path):
    metrics = collapse()
    trainer = build_trainer(run_config(tmp_path))
    assert trainer.filters == []
    for step, m in enumerate(metrics[:40]):
        if any(a.rule == "echo_trap" for a in trainer.detector.update(step, m)):
            trainer.on_echo_trap()  # switches StarPO-S on, by its registered name
    assert [f.name for f in trainer.filters] == ["starpo_s"]
    trainer.on_echo_trap()
    assert len(trainer.filters) == 1  # once
    trainer.sampler.next(3)
    trainer.step, trainer.best = 40, {"step": 30.0, "sampled/accuracy": 0.5}
    path = trainer.checkpoint()

    state = load_trainer_state(path)  # weights_only=True
    assert state["extra"]["filters"] == ["starpo_s"]
    resumed = build_trainer(run_config(tmp_path))
    resumed.resume(path)
    assert resumed.step == 40 and resumed.best == trainer.best
    assert [type(f) for f in resumed.filters] == [FILTERS.get("starpo_s")]
    assert resumed.detector.state_dict() == trainer.detector.state_dict()
    assert resumed.sampler.next(5) == trainer.sampler.next(5)
    assert feed(resumed.detector, metrics, 40) == feed(trainer.detector, metrics, 40)
