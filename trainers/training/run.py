"""One way to train a `RunConfig`: load the policy and its tokenizer, SFT when configured, build the
trainer, resume, train.

`python -m trainers train`, the workbench's Celery task and the demos all call `run_config`, so what a
config means cannot differ between them. torch and transformers are imported inside the functions:
importing this module stays cheap (the workbench's web process imports it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainers.config.schema import RunConfig
    from trainers.rollout.remote.dispatch import Dispatcher
    from trainers.training.loop import TrainResult
    from trainers.training.sft import SFTResult
    from trainers.training.sinks import Sink


@dataclass
class RunResult:
    """The RL loop's result, and the SFT stage's when this call ran one; reads like a `TrainResult`."""

    train: TrainResult
    run_dir: Path
    sft: SFTResult | None = None

    @property
    def steps_done(self) -> int:
        return self.train.steps_done

    @property
    def stopped(self) -> bool:
        """Cancelled through `should_stop` or stopped by an echo-trap alert."""
        return self.train.stopped

    @property
    def best(self) -> dict[str, float]:
        return self.train.best

    @property
    def seconds(self) -> float:
        return self.train.seconds

    def summary(self) -> dict[str, Any]:
        """JSON-ready: what the command line prints when the run ends."""
        out: dict[str, Any] = {}
        if self.sft is not None:
            out["sft"] = {"steps": self.sft.steps, "seconds": round(self.sft.seconds, 1),
                          "loss": self.sft.final_loss}  # fmt: skip
        out.update(steps=self.steps_done, stopped=self.stopped, seconds=round(self.seconds, 1),
                   run_dir=str(self.run_dir), best=self.best)  # fmt: skip
        return out


def run_config(
    config: RunConfig,
    *,
    sink: Sink | None = None,
    should_stop: Callable[[], bool] | None = None,
    resume_from: str | Path | None = None,
    model: Any = None,
    tokenizer: Any = None,
    dispatcher: Dispatcher | None = None,
) -> RunResult:
    """Train the config into `config.output_dir` (metrics to `sink`, the run directory's files by default).

    The policy is `model.path` with the tokenizer of `model.tokenizer_path` when set, unless a live
    `model` and `tokenizer` are passed (a demo that trained them itself). The SFT stage runs when the
    config has one and the run starts fresh: a checkpoint (`resume_from`) already holds its weights.
    `should_stop` is polled between steps (SFT steps too); the loop then writes a checkpoint and returns
    `stopped`. The SFT stage streams its progress to the same sink (`log_sft`), and `log_phase` tells it
    what runs between steps (loading, SFT, starting RL, evaluating, saving, training). `dispatcher`: the
    rollout workers a `rollout.backend: remote` config sends its rollouts to (the workbench's rollout queue).
    """
    from trainers.training.build import build_trainer, load_config_policy
    from trainers.training.engines.collectives import group_should_stop
    from trainers.training.engines.launch import rank_zero_first
    from trainers.training.sft import sft_stage
    from trainers.training.sinks import NullSink, Phase, RunDirSink

    run_dir = Path(config.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if sink is not None:
        sink.log_phase(Phase.LOADING)
    with rank_zero_first(config):  # the DeepSpeed engine joins its group; rank 0 builds the tiny model
        if model is None:
            model, tokenizer = load_config_policy(config)
        elif tokenizer is None:
            raise ValueError("a live model needs its tokenizer")
    if config.training.engine == "deepspeed" and not _rank_zero():
        sink = NullSink()  # rank 0 logs the whole batch
    sink = sink or RunDirSink(run_dir)
    if not isinstance(sink, NullSink):
        from trainers.training.mirror_sink import with_mirrors

        sink = with_mirrors(config, sink, resume=resume_from is not None)
    sft = None
    if config.sft is not None and resume_from is None:
        # every rank ends SFT after the same step, so none waits in the loop's first collective
        sink.log_phase(Phase.SFT)
        sft = sft_stage(config, model, tokenizer, sink=sink, should_stop=group_should_stop(should_stop))
    sink.log_phase(Phase.STARTING_RL)
    trainer = build_trainer(
        config, model=model, tokenizer=tokenizer, sink=sink, should_stop=should_stop, dispatcher=dispatcher
    )
    if resume_from is not None:
        trainer.resume(resume_from)
    result = trainer.train()
    trainer.training_engine.close()  # a failed collective raised above: no barrier to hang in
    return RunResult(result, run_dir, sft)


def _rank_zero() -> bool:
    import torch.distributed as dist

    return not dist.is_initialized() or dist.get_rank() == 0


def run_sft_only(config: RunConfig) -> tuple[SFTResult, Path]:
    """The config's SFT stage alone, on the policy `run_config` would load; saved to `<output_dir>/sft`."""
    from trainers.training.build import load_config_policy
    from trainers.training.sft import sft_stage
    from trainers.training.sinks import RunDirSink

    if config.sft is None:
        raise ValueError("the config has no sft section")
    run_dir = Path(config.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_config_policy(config)
    sink = RunDirSink(run_dir)
    result = sft_stage(config, model, tokenizer, sink=sink)
    sink.close()
    model.save_pretrained(run_dir / "sft")
    tokenizer.save_pretrained(run_dir / "sft")
    return result, run_dir / "sft"
