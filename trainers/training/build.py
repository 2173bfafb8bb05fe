"""Build a `Trainer` from a validated `RunConfig`: every name is looked up in its registry."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainers.agent.program import AgentProgram
from trainers.agent.rollouts import AgentRollouts
from trainers.backends.base import GenerationBackend
from trainers.backends.hf import HFBackend
from trainers.backends.vllm import VLLMBackend, VLLMOptions, build_llm
from trainers.config.algorithm import filter_kwargs
from trainers.config.schema import RunConfig
from trainers.filters import FILTERS
from trainers.losses.objective import PolicyLossConfig
from trainers.metrics.echo_trap import EchoTrapDetector
from trainers.models.device import model_device, resolve_device
from trainers.models.lora import apply_lora, is_peft
from trainers.models.model_io import load_policy
from trainers.rollout.engine import RolloutEngine
from trainers.rollout.protocol import Rollouts
from trainers.rollout.remote.client import RemoteRollouts
from trainers.rollout.remote.dispatch import Dispatcher
from trainers.rollout.remote.wire import rollout_spec
from trainers.training.data import PromptSampler, read_rows, split_rows
from trainers.training.engines.factory import make_engine
from trainers.training.eval_schedule import checkpoint_period
from trainers.training.evaluate import Evaluator, correctness_judge
from trainers.training.loop import LoopSettings, Trainer
from trainers.training.optim import adamw
from trainers.training.policy import ValueHead, frozen_copy
from trainers.training.sinks import RunDirSink, Sink
from trainers.training.update import UpdateSettings

logger = logging.getLogger(__name__)


def resolve_model_path(config: RunConfig) -> Path:
    """`model.path`, a local directory; "tiny" builds the bundled tiny model (as `model.tiny` describes)
    inside the run directory once."""
    if config.model.path != "tiny":
        return Path(config.model.path)
    from trainers.training.tiny_policy import build_config_tiny_model

    target = Path(config.output_dir) / "base_model"
    return target if (target / "config.json").exists() else build_config_tiny_model(config, target)


def load_config_policy(config: RunConfig) -> tuple[Any, Any]:
    """The config's (model, tokenizer): `model.path` (or the bundled tiny model), and the tokenizer of
    `model.tokenizer_path` when set, else the model directory's; with `model.lora`, the model wrapped
    with fresh adapters. Every entry point loads through here."""
    model, tokenizer = load_policy(resolve_model_path(config), tokenizer_path=config.model.tokenizer_path)
    return with_lora(config, model), tokenizer


def with_lora(config: RunConfig, model: Any) -> Any:
    """The policy wrapped with the config's LoRA adapters (unless it has them already, or none are asked).
    Its checkpoints name `model.path` as the base: a live model must hold that directory's weights."""
    if config.model.lora is None or is_peft(model):
        return model
    return apply_lora(model, config.model.lora, base_path=resolve_model_path(config))


def lr_lambda(schedule: str, warmup: int, total: int, min_ratio: float) -> Callable[[int], float]:
    """Linear warm-up from 0, then constant, linear or cosine decay to `min_ratio` of the peak."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        if schedule == "linear":
            return 1.0 - (1.0 - min_ratio) * progress
        if schedule == "cosine":
            return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
        return 1.0

    return factor


def _rows(config: RunConfig) -> tuple[list[dict], list[dict]]:
    if config.data.train_path is None:
        raise ValueError("data.train_path: a JSONL file of training rows is required")
    train = read_rows(config.data.train_path, config.data.prompt_key)
    if config.data.eval_path is not None:
        return train, read_rows(config.data.eval_path, config.data.prompt_key)
    return split_rows(train, config.data.eval_fraction, config.seed)


def _evaluator(config: RunConfig, rollouts: Rollouts, rows: list[dict]) -> Evaluator | None:
    if not rows:
        return None
    rows = rows[: config.evaluation.max_problems] if config.evaluation.max_problems else rows
    mode = "math"
    for spec in config.reward.components:  # judge answers the way the run's correctness reward does
        if spec.name == "correctness":
            mode = spec.params.get("mode", "math")
    return Evaluator(
        rollouts, rows, correctness_judge(mode), samples=config.evaluation.pass_k,
        temperature=config.sampling.temperature or 1.0, greedy=config.evaluation.greedy,
    )  # fmt: skip


def _rollouts(
    config: RunConfig, engine: RolloutEngine, model: Any, tokenizer: Any, dispatcher: Dispatcher | None
) -> Rollouts:
    """The training rollouts: the in-process engine, an agent program's episodes (in-process too), or
    jobs on the dispatcher's rollout workers (which sample the same trajectories)."""
    if config.rollout.backend == "local":
        return engine
    if config.rollout.backend == "agent":
        agent = config.rollout.agent
        program = AgentProgram.from_config(agent)
        return AgentRollouts(engine.backend, engine.template, program, agent, config.limits, config.sampling)
    if dispatcher is None:
        logger.info("rollout.backend is remote but no rollout workers were given: rolling out in-process")
        return engine
    spec = rollout_spec(
        config.template.name, config.template.source, engine.tool_bindings, config.limits, config.sampling,
        config.model.device, config.generation.model_dump(),
    )  # fmt: skip
    rollout = config.rollout
    return RemoteRollouts(
        model, tokenizer, dispatcher, spec, prompts_per_job=rollout.prompts_per_job,
        jobs_per_worker=rollout.jobs_per_worker, job_timeout_s=rollout.job_timeout_s,
        keep_versions=rollout.keep_weight_versions, max_staleness=rollout.max_staleness,
    )  # fmt: skip


def _backend(config: RunConfig, model: Any, tokenizer: Any) -> GenerationBackend:
    """The rollouts' sampler: the HF backend over the live model, or a vLLM engine on the GPU that takes
    the live model's weights after every update (`generation.backend`)."""
    if config.generation.backend == "hf":
        return HFBackend(model, tokenizer)
    if not config.model.device.startswith(("cuda", "auto")):
        raise ValueError("generation.backend 'vllm' runs on CUDA GPUs: set model.device to cuda or auto")
    options = VLLMOptions(**config.generation.vllm.model_dump())
    path, tokenizer_path = resolve_model_path(config), config.model.tokenizer_path
    llm = build_llm(path, options, tokenizer_path=tokenizer_path, seed=config.seed)
    return VLLMBackend(llm, tokenizer, policy=model, options=options)


def _measures_mismatch(config: RunConfig) -> bool:
    """Whether the trainer recomputes its log-probs before the update to report the sampler's mismatch:
    asked for, needed by truncated IS, or sampling with vLLM (whose kernels differ from the trainer's)."""
    mismatch = config.mismatch
    return mismatch.measure or mismatch.tis_cap is not None or config.generation.backend == "vllm"


def build_trainer(
    config: RunConfig,
    *,
    model: Any = None,
    tokenizer: Any = None,
    sink: Sink | None = None,
    should_stop: Callable[[], bool] | None = None,
    dispatcher: Dispatcher | None = None,
) -> Trainer:
    """The whole run from its config; pass a live `model`/`tokenizer` (e.g. after SFT) to skip loading.
    With `rollout.backend: remote` the training rollouts run as jobs on `dispatcher`'s workers."""
    torch.manual_seed(config.seed)
    run_dir = Path(config.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if model is None:
        model, tokenizer = load_config_policy(config)
    model = with_lora(config, model)  # a live model (a demo's SFT policy) gets the config's adapters too
    model.to(resolve_device(config.model.device))
    model.eval()  # rollouts and log-prob passes run without dropout (LoRA's too); the update switches it on
    backend = _backend(config, model, tokenizer)
    bindings = [binding.model_dump() for binding in config.tools]
    engine = RolloutEngine(
        backend, config.template.name, bindings, config.limits, config.sampling,
        prompt_source=config.template.source,
    )  # fmt: skip
    rollouts = _rollouts(config, engine, model, tokenizer, dispatcher)
    evaluated = rollouts if config.rollout.backend == "agent" else engine  # evaluation runs in-process
    train_rows, eval_rows = _rows(config)
    estimator = config.algorithm.build()
    # the critic reads the policy's hidden states: on the policy's device
    value_head = (
        ValueHead(model.config.hidden_size).to(model_device(model)) if estimator.needs_values else None
    )
    trainable = [p for p in model.parameters() if p.requires_grad]  # LoRA: the adapters alone
    params = trainable + (list(value_head.parameters()) if value_head is not None else [])
    opt = config.optimizer
    optimizer = adamw(params, lr=opt.lr, betas=opt.betas, weight_decay=opt.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_lambda(opt.schedule, opt.warmup_steps, config.training.steps, opt.min_lr_ratio)
    )
    needs_reference = config.loss.kl != "none" or estimator.needs_kl
    training = config.training
    settings = LoopSettings(
        steps=training.steps,
        prompts_per_step=config.rollout.prompts_per_step,
        samples_per_prompt=config.rollout.samples_per_prompt,
        seed=config.seed,
        max_refill_rounds=max((getattr(f, "max_refill_rounds", 0) for f in config.filters), default=0),
        eval_every=config.evaluation.every_steps,
        eval_at_start=config.evaluation.at_start,
        checkpoint_every=checkpoint_period(config.checkpoint.every_steps, config.evaluation),
        keep_checkpoints=config.checkpoint.keep,
        keep_best=config.checkpoint.keep_best,
        on_alert=config.echo_trap.on_alert,
        template_name=config.template.name,
    )
    return Trainer(
        model=model,
        tokenizer=tokenizer,
        rollouts=rollouts,
        reward=config.reward,
        estimator=estimator,
        loss_config=PolicyLossConfig(
            **config.loss.policy_loss_kwargs(config.limits.max_total_new_tokens),
            tis_cap=config.mismatch.tis_cap,
        ),
        update=UpdateSettings(
            ppo_epochs=training.ppo_epochs,
            minibatch_size=training.minibatch_size,
            grad_accumulation=training.grad_accumulation,
            grad_clip=opt.grad_clip,
            value_coef=config.loss.value_coef,
            value_clip=config.loss.value_clip,
            temperature=config.sampling.temperature or 1.0,
            old_logprobs=config.mismatch.old_logprobs,
            measure_mismatch=_measures_mismatch(config),
        ),
        optimizer=optimizer,
        scheduler=scheduler,
        sampler=PromptSampler(train_rows, seed=config.seed),
        settings=settings,
        sink=sink or RunDirSink(run_dir),
        run_dir=run_dir,
        filters=[FILTERS.get(f.name)(**filter_kwargs(f)) for f in config.filters],
        evaluator=None if config.evaluation.runner == "jobs" else _evaluator(config, evaluated, eval_rows),
        # LoRA: the policy itself, its adapters disabled for the reference pass (no copy of the weights)
        reference=(model if is_peft(model) else frozen_copy(model)) if needs_reference else None,
        value_head=value_head,
        detector=EchoTrapDetector(config.echo_trap.detector) if config.echo_trap.enabled else None,
        should_stop=should_stop,
        # last: ZeRO-3 partitions the model, so the reference above is copied before
        training_engine=make_engine(config, model, optimizer, value_head),
    )
