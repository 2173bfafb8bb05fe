"""The RL loop: rollout, rewards, filters, advantages, PPO epochs, metrics, echo trap, checkpoint.

Each piece is a registered component (template, tools, reward components, estimator, filters); the
loop only composes them, so a new method never changes this file.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from trainers.advantages import AdvantageEstimator, advantage_batch_from_trajectories, write_advantages
from trainers.config.sampling import SamplingParams
from trainers.filters import FILTERS
from trainers.filters.base import GroupFilter, apply_filters, group_trajectories
from trainers.losses.objective import PolicyLossConfig
from trainers.metrics import keys
from trainers.metrics.echo_trap import EchoTrapDetector
from trainers.metrics.step_metrics import compute_step_metrics
from trainers.rewards import RewardContext, RewardDefinition
from trainers.rollout.protocol import Rollouts
from trainers.training.checkpoint import checkpoint_dir
from trainers.training.data import PromptSampler
from trainers.training.engines import TrainingEngine
from trainers.training.engines.collectives import any_rank
from trainers.training.eval_schedule import evaluation_due
from trainers.training.evaluate import Evaluator
from trainers.training.mismatch import mismatch_metrics, sampler_logprobs
from trainers.training.policy import PolicyOutput, ValueHead, collate, forward_policy, reference_logprobs
from trainers.training.sinks import Phase, Sink
from trainers.training.update import UpdateInputs, UpdateSettings
from trainers.trajectory import Trajectory


@dataclass
class LoopSettings:
    steps: int  # training steps (rollout + update)
    prompts_per_step: int = 8
    samples_per_prompt: int = 8  # G, one group per prompt
    seed: int = 0  # rollout seeds are derived from it and the step, so a resumed run samples the same
    max_refill_rounds: int = 0  # DAPO dynamic sampling: extra rollout rounds to refill filtered groups
    eval_every: int = 0  # 0 = evaluate only at the end
    eval_at_start: bool = False  # also evaluate the starting policy (step 0)
    checkpoint_every: int = 50
    keep_checkpoints: int = 3
    keep_best: str | None = None  # eval metric whose best value is kept in checkpoints/best
    on_alert: Literal["record", "stop", "starpo_s"] = "record"  # what an echo_trap alert does
    template_name: str | None = None  # for rewards that depend on the template


@dataclass
class TrainResult:
    steps_done: int
    stopped: bool = False  # cancelled through should_stop or by an echo-trap alert
    best: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


class Trainer:
    """Owns the policy, its optimiser and the run's components; `train()` runs the remaining steps."""

    def __init__(
        self,
        *,
        model: nn.Module,
        tokenizer: Any,
        rollouts: Rollouts,
        reward: RewardDefinition,
        estimator: AdvantageEstimator,
        loss_config: PolicyLossConfig,
        update: UpdateSettings,
        optimizer: torch.optim.Optimizer,
        scheduler: Any,
        sampler: PromptSampler,
        settings: LoopSettings,
        sink: Sink,
        run_dir: str | Path,
        filters: Sequence[GroupFilter] = (),
        evaluator: Evaluator | None = None,
        reference: nn.Module | None = None,
        value_head: ValueHead | None = None,
        detector: EchoTrapDetector | None = None,
        should_stop: Callable[[], bool] | None = None,
        training_engine: TrainingEngine | None = None,
    ) -> None:
        """`rollouts` samples; `training_engine` updates and checkpoints (this process alone by default)."""
        self.model, self.tokenizer, self.rollouts = model, tokenizer, rollouts
        self.training_engine = training_engine or TrainingEngine(model, optimizer, value_head)
        self.reward, self.estimator, self.loss_config, self.update = reward, estimator, loss_config, update
        self.optimizer, self.scheduler, self.sampler, self.settings = optimizer, scheduler, sampler, settings
        self.sink, self.run_dir, self.filters = sink, Path(run_dir), list(filters)
        self.evaluator, self.reference, self.value_head = evaluator, reference, value_head
        self.detector, self.should_stop = detector, should_stop
        self.step = 0
        self.phase: Phase | None = None  # what the sink was last told the run is doing
        self.best: dict[str, float] = {}
        self._checkpointed = -1
        # group id -> its row and rollout seed, so ReMax's greedy rollout plays the group's level
        self._rows: dict[str, tuple[dict, int]] = {}
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    # --- the loop --------------------------------------------------------------------------------
    def train(self) -> TrainResult:
        start, stopped = time.perf_counter(), False
        if self.settings.eval_at_start and self.step == 0:
            self.evaluate()
        self.enter(Phase.TRAINING)
        while self.step < self.settings.steps:
            # every rank stops at the same step (a data-parallel group's ranks may see the request apart)
            if any_rank(self.should_stop is not None and self.should_stop()):
                stopped = True
                break
            self.step += 1
            metrics = self.run_step(self.step)
            stopped = self.after_step(metrics)
            if stopped:
                break
        if self._checkpointed != self.step:
            self.checkpoint()
        # the last step reached is evaluated, unless the schedule already did after it
        if self.evaluator is not None and not evaluation_due(self.settings.eval_every, self.step, last=False):
            self.evaluate()
        self.sink.close()
        return TrainResult(self.step, stopped, dict(self.best), time.perf_counter() - start)

    def enter(self, phase: Phase) -> None:
        """Tell the sink what the run does from now on (once per change)."""
        if phase != self.phase:
            self.phase = phase
            self.sink.log_phase(phase)

    @contextmanager
    def during(self, phase: Phase) -> Iterator[None]:
        """`phase` (evaluating, saving) for the block, then back to training."""
        self.enter(phase)
        yield
        self.enter(Phase.TRAINING)

    def after_step(self, metrics: dict[str, float]) -> bool:
        """Log, detect collapse, evaluate and checkpoint on schedule; True when the run must stop."""
        metrics = self.training_engine.broadcast(metrics)  # rank 0's timings: every rank decides alike
        self.sink.log_metrics(self.step, metrics)
        stop = False
        if self.detector is not None:
            alerts = self.detector.update(self.step, metrics)
            self.sink.log_alerts(alerts)
            if any(a.rule == "echo_trap" for a in alerts):
                stop = self.on_echo_trap()
        if self.evaluator is not None and evaluation_due(self.settings.eval_every, self.step, last=False):
            self.evaluate()
        if self.step % self.settings.checkpoint_every == 0 or stop:
            self.checkpoint()
        return stop

    def on_echo_trap(self) -> bool:
        if self.settings.on_alert == "starpo_s":
            self.add_filter("starpo_s")  # RAGEN's remedy: keep high-variance groups
        return self.settings.on_alert == "stop"

    def add_filter(self, name: str) -> None:
        """Switch on the registered filter `name` (default parameters) unless the run already has it."""
        if all(f.name != name for f in self.filters):
            self.filters.append(FILTERS.get(name)())

    def run_step(self, step: int) -> dict[str, float]:
        """One rollout and update; returns the step's metrics."""
        t0 = time.perf_counter()
        kept, sampled, filtered_frac, timing = self.collect(step)
        self.prefetch(step + 1)
        metrics = compute_step_metrics(sampled, filtered_frac=filtered_frac if self.filters else None)
        t1 = time.perf_counter()
        if kept:
            metrics.update(self.learn(kept))
            self.policy_changed()
        self.scheduler.step()
        self.sink.log_trajectories(step, sampled)
        t2 = time.perf_counter()
        policy_tokens = sum(t.num_policy_tokens for t in sampled)
        metrics.update(timing)
        metrics[keys.TIME_UPDATE] = t2 - t1
        metrics[keys.TIME_STEP] = t2 - t0
        metrics[keys.TOKENS_PER_S] = policy_tokens / max(1e-9, t1 - t0)
        metrics[keys.COMPLETIONS_PER_S] = len(sampled) / max(1e-9, t2 - t0)
        metrics[keys.TRAIN_TRAJECTORIES] = float(len(kept))
        metrics[keys.TRAIN_LR] = float(self.scheduler.get_last_lr()[0])
        return metrics

    def policy_changed(self) -> None:
        """Tell whatever samples the policy that its weights changed; the version is the step."""
        samplers = [self.rollouts] + ([self.evaluator.rollouts] if self.evaluator is not None else [])
        for rollouts in {id(r): r for r in samplers}.values():  # evaluation may share the training rollouts
            rollouts.policy_changed(self.step)

    # --- rollout, rewards and filters ------------------------------------------------------------
    def step_rows(self, rows: list[dict], step: int, round_: int) -> tuple[list[dict], int]:
        """The rows with group ids unique within the step (also when a row comes back in a refill round),
        and the round's rollout seed."""
        rows = [{**row, "id": f"{step}.{round_}.{i}:{row.get('id', i)}"} for i, row in enumerate(rows)]
        return rows, self.settings.seed * 1_000_003 + step * 101 + round_

    def prefetch(self, step: int) -> None:
        """Bounded staleness: rollouts that run ahead (remote, max_staleness 1) start step `step`'s first
        round now, on the weights before this step's update; the sampler is left as it was, so the step
        draws the same prompts and takes the rollout already under way."""
        if step > self.settings.steps:
            return
        state = self.sampler.state_dict()
        rows, seed = self.step_rows(self.sampler.next(self.settings.prompts_per_step), step, 0)
        self.sampler.load_state_dict(state)
        self.rollouts.prefetch(self.training_engine.share(rows), self.settings.samples_per_prompt, seed)

    def rollout(self, rows: list[dict], step: int, round_: int) -> list[Trajectory]:
        rows, seed = self.step_rows(rows, step, round_)
        self._rows = {row["id"]: (row, seed) for row in rows} | (self._rows if round_ else {})
        # data parallel: each rank samples its share of the rows (per-row seeds: the same trajectories)
        with self.training_engine.full_weights(), self.rollouts.generating():
            trajectories = self.rollouts.run(
                self.training_engine.share(rows), self.settings.samples_per_prompt, seed=seed
            )
        self.reward.compute(trajectories, self.reward_context(step))
        return self.training_engine.gather(trajectories)

    def reward_context(self, step: int) -> RewardContext:
        """What rewards see of the run, the same for sampled and greedy (ReMax) rollouts."""
        return RewardContext(step=step, total_steps=self.settings.steps, template=self.settings.template_name)

    def collect(self, step: int) -> tuple[list[Trajectory], list[Trajectory], float, dict[str, float]]:
        """Kept trajectories, all sampled ones, the filtered fraction and the rollout time split."""
        generation = tools = 0.0
        start = time.perf_counter()
        sampled = self.rollout(self.sampler.next(self.settings.prompts_per_step), step, 0)
        generation += self.generation_s()
        result = apply_filters(self.filters, group_trajectories(sampled))
        kept, dropped = dict(result.kept), dict(result.dropped)
        target = len(kept) + result.needs_refill
        for round_ in range(1, self.settings.max_refill_rounds + 1):
            missing = target - len(kept)
            if missing <= 0:
                break
            more = self.rollout(self.sampler.next(missing), step, round_)
            generation += self.generation_s()
            sampled += more
            extra = apply_filters(self.filters, group_trajectories(more))
            kept.update(extra.kept)
            dropped.update(extra.dropped)
        kept_groups = list(kept.values())[: max(target, 1)] if self.filters else list(kept.values())
        filtered_frac = len(dropped) / max(1, len(kept) + len(dropped))
        tools = sum(r.latency_s for t in sampled for r in t.tool_results)
        timing = {
            keys.TIME_GENERATION: generation,
            keys.TIME_TOOLS: tools,
            keys.TIME_ROLLOUT: time.perf_counter() - start,
        }
        timing.update(self.rollouts.last_metrics)  # remote rollouts: jobs, workers, weight version
        return [t for g in kept_groups for t in g], sampled, filtered_frac, timing

    def generation_s(self) -> float:
        """The generation time of the last rollout."""
        stats = self.rollouts.last_stats
        return stats.generate_s if stats is not None else 0.0

    def greedy_rollout(self, trajectories: list[Trajectory], step: int) -> list[Trajectory]:
        """ReMax: one greedy response per group, scored. Each runs with its group's rollout seed, from
        which the rollouts derive the environment level of a row without `initial_state`."""
        by_seed: dict[int, dict[str, dict]] = {}
        for t in trajectories:
            row, seed = self._rows[t.group_id]
            by_seed.setdefault(seed, {})[t.group_id] = row
        saved = self.rollouts.sampling
        self.rollouts.sampling = SamplingParams(temperature=0.0)
        greedy: list[Trajectory] = []
        try:
            with self.training_engine.full_weights(), self.rollouts.generating():
                for seed, rows in by_seed.items():  # one seed per refill round
                    greedy += self.rollouts.run(list(rows.values()), 1, seed=seed)
        finally:
            self.rollouts.sampling = saved
        self.reward.compute(greedy, self.reward_context(step))
        return greedy

    def greedy_baselines(self, trajectories: list[Trajectory], step: int) -> dict[str, float]:
        """ReMax: the reward of one greedy response per prompt, keyed by group id."""
        return {t.group_id: t.reward for t in self.greedy_rollout(trajectories, step)}

    # --- advantages and update -------------------------------------------------------------------
    def learn(self, trajectories: list[Trajectory]) -> dict[str, float]:
        batch = collate(trajectories, self.pad_id)
        temperature = self.update.temperature
        sampled = sampler_logprobs(trajectories, batch.response_ids.shape[1])
        needs_old = (
            self.update.reuses_samples(batch.size)
            or self.value_head is not None
            or (sampled is not None and self.update.measure_mismatch)
        )
        old = ref_logprobs = None
        with torch.no_grad():
            if needs_old:
                old = forward_policy(
                    self.model, batch, temperature=temperature, with_entropy=False, value_head=self.value_head
                )
            if self.reference is not None:
                ref_logprobs = reference_logprobs(self.reference, batch, temperature)
            current = old  # the policy's log-probs; KL in the reward needs them also when the update does not
            if current is None and self.estimator.needs_kl:
                current = forward_policy(self.model, batch, temperature=temperature, with_entropy=False)
        kl = None
        if self.estimator.needs_kl:
            if ref_logprobs is None:
                raise ValueError("the estimator folds KL into rewards: it needs a reference model")
            # k1 per token, as in REINFORCE++; the estimators run on the CPU, where the batch was collated
            kl = (current.logprobs - ref_logprobs).cpu() * batch.response_mask
        baselines = (
            self.greedy_baselines(trajectories, self.step) if self.estimator.needs_greedy_baseline else None
        )
        values = old.values if (old is not None and self.estimator.needs_values) else None
        adv_batch = advantage_batch_from_trajectories(
            trajectories,
            pad_to=batch.response_ids.shape[1],
            values=values.cpu() if values is not None else None,
            kl=kl,
            baseline_rewards=baselines,
        )
        result = self.estimator.compute(adv_batch)
        write_advantages(trajectories, result)
        mismatch = {}  # measured before `old` may become the sampler's own log-probs
        if old is not None and sampled is not None:
            mismatch = mismatch_metrics(old.logprobs, sampled, batch.response_mask)
        if sampled is not None and self.update.old_logprobs == "sampler":
            old = PolicyOutput(sampled, None, old.values if old is not None else None)
        inputs = UpdateInputs(batch, result.advantages, old, ref_logprobs, result.returns, sampled)
        generator = torch.Generator().manual_seed(self.settings.seed * 7919 + self.step)
        stats = self.training_engine.update(
            inputs, loss_config=self.loss_config, settings=self.update, generator=generator
        )
        stats.update(mismatch)
        stats[keys.ADVANTAGE_MEAN_ABS] = float(
            (result.advantages.abs() * batch.response_mask).sum() / batch.response_mask.sum().clamp(min=1)
        )
        return stats

    # --- evaluation and checkpoints --------------------------------------------------------------
    def evaluate(self) -> dict[str, float]:
        assert self.evaluator is not None
        with self.during(Phase.EVALUATING):
            with self.training_engine.full_weights(), self.evaluator.rollouts.generating():
                results = self.evaluator.run(seed=self.settings.seed + self.step)
            self.sink.log_eval(self.step, results)
            key = self.settings.keep_best
            if key is not None and key in results and results[key] > self.best.get(key, float("-inf")):
                self.best = {"step": float(self.step), key: results[key]}
                self.save(self.run_dir / "checkpoints" / "best")
        return results

    def extra_state(self) -> dict[str, Any]:
        """The components' state as plain data (checkpoints are loaded with `weights_only=True`)."""
        return {
            "sampler": self.sampler.state_dict(),
            "estimator": self.estimator.state_dict(),
            "detector": self.detector.state_dict() if self.detector is not None else None,
            "filters": [f.name for f in self.filters],
            "best": dict(self.best),
        }

    def save(self, path: Path) -> Path:
        return self.training_engine.save(
            path, step=self.step, scheduler=self.scheduler, tokenizer=self.tokenizer, extra=self.extra_state()
        )

    def checkpoint(self) -> Path:
        with self.during(Phase.SAVING):
            path = self.save(checkpoint_dir(self.run_dir, self.step))
            self._checkpointed = self.step
            self.sink.log_checkpoint(self.step, path)
        if self.training_engine.is_logger:
            self.prune_checkpoints()
        return path

    def prune_checkpoints(self) -> None:
        done = sorted((self.run_dir / "checkpoints").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))
        for old in done[: -self.settings.keep_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)

    def resume(self, path: str | Path) -> None:
        """Continue from a checkpoint: weights, optimiser, scheduler, RNGs, sampler and detector state."""
        resumed = self.training_engine.load(Path(path), scheduler=self.scheduler)
        self.step = resumed.step
        extra = resumed.extra
        self.sampler.load_state_dict(extra["sampler"])
        self.estimator.load_state_dict(extra["estimator"])
        if self.detector is not None and extra.get("detector") is not None:
            self.detector.load_state_dict(extra["detector"])
        for name in extra.get("filters", []):  # e.g. StarPO-S, switched on by an echo-trap alert
            self.add_filter(name)
        self.best = {key: float(value) for key, value in extra.get("best", {}).items()}
        self.policy_changed()  # the checkpoint's weights
