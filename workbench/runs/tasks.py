"""Celery tasks of the runs app: thin, they load by id and call the execution service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery import shared_task

from .execution import LEASE_S, RunBusy, run_execute


def train_with_trainers(config, *, sink, should_stop, resume_from: str | None = None) -> Any:
    """SFT warm start (when configured, on a first delivery) then the RL loop, as `python -m trainers
    train` does; torch is imported on the worker only here."""
    from trainers.models.loading import load_tokenizer
    from trainers.training.build import build_trainer, resolve_model_path
    from trainers.training.model_io import load_policy
    from trainers.training.sft import sft_stage

    model, tokenizer = load_policy(resolve_model_path(config.model.path, Path(config.output_dir)))
    if config.model.tokenizer_path is not None:
        tokenizer = load_tokenizer(config.model.tokenizer_path)
    if config.sft is not None and resume_from is None:  # a checkpoint already holds the SFT weights
        sft_stage(config, model, tokenizer)
    trainer = build_trainer(config, model=model, tokenizer=tokenizer, sink=sink, should_stop=should_stop)
    if resume_from is not None:
        trainer.resume(resume_from)
    return trainer.train()


# acks_late + reject_on_worker_lost: a worker killed mid-run gives the message back, and the next
# delivery resumes from the run's last checkpoint.
@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, name="workbench.runs.tasks.train_run")
def train_run(self, run_id: int) -> str | None:
    try:
        return run_execute(run_id=run_id, worker=self.request.hostname or "", train=train_with_trainers)
    except RunBusy as exc:  # a duplicate delivery while the holder is alive: look again after the lease
        raise self.retry(exc=exc, countdown=LEASE_S, max_retries=None) from exc
