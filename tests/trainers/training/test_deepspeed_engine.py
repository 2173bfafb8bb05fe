"""The DeepSpeed engine on CPU (gloo) against the single-process engine: the same GRPO run, 3 steps.

Tolerances. Both engines sample the same trajectories (per-row seeds), so token ids, rewards and
advantages are equal exactly. The update's gradient is the same sum of the same per-token terms, added
in another order (two ranks' shards, reduced by DeepSpeed, against one process's micro-batches): losses
and grad norms agree to float32 rounding, checked at rel 1e-4. Weights: AdamW divides each element's
step by the root of its own second moment, so an element whose gradient is at rounding level can take
a different step of up to the learning rate; weights are compared per tensor to 1% of how far the
tensor moved over the run (2e-3 relative was the largest seen), which a real difference in the update
(a wrong loss scale, a rank's shard counted twice or missed) exceeds many times over.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from trainers.config.loader import validate_config
from trainers.demo.arithmetic import make_splits, write_rows
from trainers.models.tiny import build_tiny_model
from trainers.training import run
from trainers.training.build import build_trainer
from trainers.training.checkpoint import checkpoint_dir, latest_checkpoint, load_trainer_state
from trainers.training.sinks import read_jsonl

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
MAIN = Path(__file__).with_name("deepspeed_main.py")  # python -m trainers, with the test reward
# compared exactly up to float rounding; entropy and clip fractions are means over micro-batches,
# which the engines cut differently
COMPARED = ("reward/mean", "reward/std", "advantage/mean_abs", "loss/policy", "loss/total",
            "loss/grad_norm", "train/lr", "train/trajectories")  # fmt: skip
STEPS = 3


def _register_reward() -> str:
    import importlib.util

    spec = importlib.util.spec_from_file_location("deepspeed_main", MAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.REWARD


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("ds")
    model = build_tiny_model(root / "model", hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1)
    train, _ = make_splits(16, 2, seed=0)
    return {"model": model, "train": write_rows(train, root / "train.jsonl"), "reward": _register_reward()}


def write_config(setup, out: Path, *, engine: str = "local", **deepspeed) -> Path:
    config = {
        "seed": 3,
        "output_dir": str(out),
        "model": {"path": str(setup["model"])},
        "tools": [{"name": "calculator"}],
        "limits": {"max_turns": 1, "max_new_tokens_per_turn": 8, "max_total_new_tokens": 8},
        "rollout": {"prompts_per_step": 4, "samples_per_prompt": 4},
        "reward": {"components": [{"name": setup["reward"]}]},
        "optimizer": {"lr": 1e-3},
        # two minibatches of 8 per step, two micro-batches each: shards, accumulation and two steps
        "training": {
            "steps": STEPS,
            "minibatch_size": 8,
            "grad_accumulation": 2,
            "engine": engine,
            "deepspeed": {"ranks": 2, "timeout_s": 60, **deepspeed},
        },  # fmt: skip
        "checkpoint": {"every_steps": 1, "keep": STEPS},
        "data": {"train_path": str(setup["train"])},
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out.parent / f"{out.name}.json"
    path.write_text(json.dumps(config))
    return path


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **extra}


def torchrun(launcher: list[str], config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *launcher, str(MAIN), "train", str(config),
            "--threads", "1", *extra]  # fmt: skip


def check(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-6000:]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def reference(setup, tmp_path_factory):
    """The single-process engine's run, in this process."""
    out = tmp_path_factory.mktemp("reference") / "run"
    config = validate_config(json.loads(write_config(setup, out).read_text()))
    torch.set_num_threads(1)
    assert run.run_config(config).steps_done == STEPS
    return out


@pytest.fixture(scope="module")
def zero2(setup, tmp_path_factory):
    """The same config on 2 ranks with ZeRO-2."""
    out = tmp_path_factory.mktemp("zero2") / "run"
    config = write_config(setup, out, engine="deepspeed", stage=2)
    check(subprocess.run(torchrun(["--standalone", "--nproc_per_node", "2"], config), env=env(),
                         capture_output=True, text=True, timeout=300))  # fmt: skip
    return out


def weights(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(checkpoint_dir(run_dir, step) / "model.safetensors")


def assert_same_run(run_dir: Path, reference: Path, base: Path, first: int = 1) -> None:
    """Steps `first`..STEPS of `run_dir` are the reference's: metrics, sampled tokens, final weights."""
    ours = read_jsonl(run_dir / "metrics.jsonl")
    theirs = [m for m in read_jsonl(reference / "metrics.jsonl") if m["step"] >= first]
    assert [m["step"] for m in ours] == [m["step"] for m in theirs] == list(range(first, STEPS + 1))
    assert sum(m["loss/grad_norm"] > 0 for m in theirs) >= 2  # the reward gives the update work
    for a, b in zip(ours, theirs, strict=True):
        for key in COMPARED:
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-7), (a["step"], key)

    def tokens(path: Path) -> list[list[list[int]]]:
        rows = read_jsonl(path / "trajectories.jsonl")
        return [[t["token_ids"] for t in row["turns"]] for row in rows if row["step"] >= first]

    assert tokens(run_dir) == tokens(reference)
    start = load_file(base / "model.safetensors")
    ours_w, theirs_w = weights(run_dir, STEPS), weights(reference, STEPS)
    assert ours_w.keys() == theirs_w.keys()
    for key, value in theirs_w.items():
        moved = float((value - start[key]).abs().max())
        assert moved > 0, key
        assert float((ours_w[key] - value).abs().max()) <= 0.01 * moved, key


def test_zero2_on_two_ranks_trains_like_one_process(setup, reference, zero2):
    assert_same_run(zero2, reference, setup["model"])
    # rank 0 alone writes: one line per step, 16 trajectories per step
    assert len(read_jsonl(zero2 / "trajectories.jsonl")) == STEPS * 16


def test_zero3_on_two_ranks_trains_like_one_process_and_its_checkpoint_resumes_exactly(
    setup, reference, tmp_path
):
    """ZeRO-3 shards the parameters too: rollouts gather them once, checkpoints consolidate them and
    resuming scatters them back."""
    out = tmp_path / "zero3"
    config = write_config(setup, out, engine="deepspeed", stage=3)
    check(subprocess.run(torchrun(["--standalone", "--nproc_per_node", "2"], config), env=env(),
                         capture_output=True, text=True, timeout=300))  # fmt: skip
    assert_same_run(out, reference, setup["model"])
    assert_single_process_resumes(setup, reference, checkpoint_dir(out, 2), tmp_path / "resumed")
    # and ZeRO-3 itself continues its step-1 checkpoint: weights and AdamW state back into the partitions
    assert_deepspeed_resumes(setup, reference, checkpoint_dir(out, 1), tmp_path / "zero3_resumed", stage=3)


def test_two_torchrun_agents_with_c10d_rendezvous_train_like_one_process(setup, reference, tmp_path):
    """Two "nodes" of one rank each on this machine, meeting at a c10d rendezvous as on two machines;
    micro_batch_size 1 splits each rank's shard into 4 micro-batches: the gradient is the same."""
    out = tmp_path / "run"
    config = write_config(setup, out, engine="deepspeed", stage=2, micro_batch_size=1)
    launcher = ["--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
                "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--rdzv_id", "ds-test"]  # fmt: skip
    agents = [subprocess.Popen(torchrun(launcher, config), env=env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
    for agent in agents:
        stdout, stderr = agent.communicate(timeout=300)
        check(subprocess.CompletedProcess(agent.args, agent.returncode, stdout, stderr))
    assert_same_run(out, reference, setup["model"])


def test_zero_checkpoint_is_plain_and_the_single_process_engine_resumes_it_exactly(
    setup, reference, zero2, tmp_path
):
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(checkpoint_dir(zero2, STEPS))
    for key, value in weights(zero2, STEPS).items():
        assert torch.equal(loaded.state_dict()[key], value), key
    state = load_trainer_state(checkpoint_dir(zero2, 2))
    assert {"exp_avg", "exp_avg_sq", "step"} <= set(state["optimizer"]["state"][0])
    # the single-process engine continues the ZeRO-2 run from its step-2 checkpoint
    assert_single_process_resumes(setup, reference, checkpoint_dir(zero2, 2), tmp_path / "run")


def assert_single_process_resumes(setup, reference: Path, checkpoint: Path, out: Path) -> None:
    """The single-process engine continues `checkpoint` (step 2) into the reference's step 3."""
    config = validate_config(json.loads(write_config(setup, out).read_text()))
    torch.set_num_threads(1)
    trainer = build_trainer(config)
    trainer.resume(checkpoint)
    assert trainer.step == 2
    trainer.train()
    step3 = read_jsonl(out / "metrics.jsonl")[-1]
    expected = read_jsonl(reference / "metrics.jsonl")[-1]
    for key in COMPARED:
        assert step3[key] == pytest.approx(expected[key], rel=1e-4, abs=1e-7), key
    start = load_file(setup["model"] / "model.safetensors")
    ours, theirs = weights(out, 3), weights(reference, 3)
    for key, value in theirs.items():
        moved = float((value - start[key]).abs().max())
        assert float((ours[key] - value).abs().max()) <= 0.01 * moved, key


def assert_deepspeed_resumes(
    setup, reference: Path, checkpoint: Path, out: Path, *, stage: int, **deepspeed
) -> None:
    """2 ranks with ZeRO `stage` continue `checkpoint` (step n) into the reference's steps n+1..STEPS."""
    import shutil

    config = write_config(setup, out, engine="deepspeed", stage=stage, **deepspeed)
    step = load_trainer_state(checkpoint)["step"]
    shutil.copytree(checkpoint, checkpoint_dir(out, step))
    launcher = ["--standalone", "--nproc_per_node", "2"]
    check(subprocess.run(torchrun(launcher, config, "--resume"), env=env(), capture_output=True, text=True,
                         timeout=300))  # fmt: skip
    assert_same_run(out, reference, setup["model"], first=step + 1)


@pytest.mark.parametrize("stage", [2, 3])
def test_zero_resumes_a_single_process_checkpoint_exactly(setup, reference, tmp_path, stage):
    """The other direction: the step-1 checkpoint of the single-process run, continued on 2 ranks."""
    assert_deepspeed_resumes(setup, reference, checkpoint_dir(reference, 1), tmp_path / "run", stage=stage)


def test_bf16_zero2_checkpoint_holds_the_fp32_masters_and_resumes_exactly(setup, tmp_path):
    """bf16: the checkpoint's weights are the fp32 masters, not the bf16 parameters, and resuming sets the
    masters from them: the step-1 checkpoint continues into the same run's steps 2 and 3."""
    out = tmp_path / "bf16"
    config = write_config(setup, out, engine="deepspeed", stage=2, bf16=True)
    check(subprocess.run(torchrun(["--standalone", "--nproc_per_node", "2"], config), env=env(),
                         capture_output=True, text=True, timeout=300))  # fmt: skip
    assert {w.dtype for w in weights(out, 1).values()} == {torch.float32}
    assert_deepspeed_resumes(setup, out, checkpoint_dir(out, 1), tmp_path / "resumed", stage=2, bf16=True)


def test_zero3_resumes_a_checkpoint_from_before_the_first_optimizer_step_exactly(setup, reference, tmp_path):
    """A step-0 checkpoint (no AdamW state yet): ZeRO-3 continues it into the whole reference run."""
    config = validate_config(json.loads(write_config(setup, tmp_path / "fresh").read_text()))
    torch.set_num_threads(1)
    checkpoint = build_trainer(config).save(checkpoint_dir(tmp_path / "fresh", 0))
    assert load_trainer_state(checkpoint)["optimizer"]["state"] == {}
    assert_deepspeed_resumes(setup, reference, checkpoint, tmp_path / "run", stage=3)


def _rank_process(launcher: subprocess.Popen, rank: int):
    import psutil

    for child in psutil.Process(launcher.pid).children(recursive=True):
        try:
            if child.environ().get("RANK") == str(rank) and "torch.distributed.run" not in child.cmdline():
                return child
        except psutil.Error:
            continue
    return None


def test_a_killed_rank_fails_the_run_in_bounded_time_and_it_resumes_with_every_step_once(setup, tmp_path):
    """python -m trainers train launches torchrun itself; SIGKILL rank 1 after the step-1 checkpoint:
    the group exits non-zero (no hang), and --resume finishes from the last checkpoint."""
    out, steps = tmp_path / "run", 8  # steps enough that rank 1 is killed well before the end
    config = write_config(setup, out, engine="deepspeed", stage=2, timeout_s=30)
    data = json.loads(config.read_text())
    data["reward"] = {"components": [{"name": "overlong", "params": {"max_length": 8, "cache_length": 8}}]}
    data["training"]["steps"], data["checkpoint"]["keep"] = steps, 2
    config.write_text(json.dumps(data))
    command = [sys.executable, "-m", "trainers", "train", str(config), "--threads", "1"]
    log = (tmp_path / "first.log").open("w")  # a file: a full pipe would stall the ranks
    launcher = subprocess.Popen(
        command, env=env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 240
        while latest_checkpoint(out) is None and launcher.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        rank1 = _rank_process(launcher, 1)
        assert rank1 is not None, (tmp_path / "first.log").read_text()[-4000:]
        rank1.send_signal(signal.SIGKILL)
        # the survivor's next collective fails at once (the peer's socket closes) or after timeout_s
        code = launcher.wait(timeout=30 + 60)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
        log.close()
    assert code != 0
    done = int(latest_checkpoint(out).name.split("_")[1])
    assert 1 <= done < steps
    resumed = subprocess.run([*command, "--resume"], env=env(), capture_output=True, text=True, timeout=300)
    check(resumed)
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["steps"] == steps
    logged = [m["step"] for m in read_jsonl(out / "metrics.jsonl")]
    assert logged[-(steps - done) :] == list(range(done + 1, steps + 1))
    assert load_trainer_state(latest_checkpoint(out))["step"] == steps
