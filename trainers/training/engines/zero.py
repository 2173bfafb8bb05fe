"""The DeepSpeed engine: the update on a data-parallel group with ZeRO stage 2 or 3.

Every rank holds the whole batch's trajectories (gathered after each rank rolled out its share of the
prompts), computes the same advantages and shuffles with the same generator; each trains its shard of
every minibatch, with loss normalisers counted over the whole minibatch. DeepSpeed averages gradients
over ranks, so each micro-batch loss is scaled by the world size: the reduced gradient is the single
process's (up to the order of float additions).

Checkpoints are the single-process format: weights with `save_pretrained` (ZeRO-3 gathers them first),
and the AdamW state consolidated from the ranks' partitions into a plain `torch.optim.AdamW`
state_dict, so either engine resumes the other's checkpoint exactly, under stage 2 or 3: loading writes
the weights into the (ZeRO-3: re-partitioned) parameters and the fp32 masters, and scatters the AdamW
state, step count included, into each rank's partitions. Under bf16 the weights saved are the fp32
masters gathered from the ranks, and loading sets the masters from them (not from the bf16 parameters),
so a bf16 run resumes exactly. Only this module imports deepspeed.
"""

from __future__ import annotations

import contextlib
import os
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.distributed as dist
from torch import nn

from trainers.losses.objective import PolicyLossConfig
from trainers.training.checkpoint import (
    Resumed,
    load_model_weights,
    load_trainer_state,
    read_weights,
    save_checkpoint,
    set_rng_state,
)
from trainers.training.engines import TrainingEngine
from trainers.training.update import Shard, UpdateInputs, UpdateSettings, ppo_update

if TYPE_CHECKING:
    from trainers.config.sections import DeepSpeedConfig
    from trainers.training.policy import ValueHead

T = TypeVar("T")

ADAM_STATE = ("exp_avg", "exp_avg_sq")


def init_distributed(config: DeepSpeedConfig) -> None:
    """Join the launcher's process group once (gloo on CPU, NCCL on CUDA) with the config's timeout."""
    if dist.is_available() and dist.is_initialized():
        return
    if "RANK" not in os.environ:
        raise RuntimeError(
            "training.engine deepspeed runs under a launcher: python -m trainers train starts torchrun"
            " itself, or run torchrun --nproc_per_node N -m trainers train CONFIG"
        )
    os.environ.setdefault("DS_BUILD_OPS", "0")
    import importlib

    import deepspeed

    # DeepSpeed JIT-compiles a shared-memory all-reduce for inference on CPU at its first init (a minute
    # of C++ build per machine); training reduces through gloo or NCCL, so it is not built.
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    deepspeed.init_distributed(
        dist_backend="nccl" if cuda else "gloo", timeout=timedelta(seconds=config.timeout_s)
    )


class _WithValueHead(nn.Module):
    """PPO: the policy and its value head as one module, so ZeRO shards and steps both."""

    def __init__(self, policy: nn.Module, value_head: nn.Module) -> None:
        super().__init__()
        self.policy, self.value_head = policy, value_head


class _Fp32Weights:
    """What `save_checkpoint` saves of a module: its state_dict with the parameters' fp32 masters."""

    def __init__(self, module: nn.Module, masters: dict[int, torch.Tensor]) -> None:
        self.module = module
        self.state = {
            key: masters.get(id(value), value) for key, value in module.state_dict(keep_vars=True).items()
        }  # tied names map to one tensor, which save_pretrained saves once

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {key: value.detach() for key, value in self.state.items()}

    def save_pretrained(self, path: Path) -> None:
        self.module.save_pretrained(path, state_dict=self.state_dict())


class _Stepper:
    """ppo_update's optimiser step through the DeepSpeed engine (gradient reduction, clipping, step)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def backward(self, loss: torch.Tensor, *, last: bool) -> None:
        # What DeepSpeedEngine.forward does first; the policy's forward calls the decoder and the LM head
        # itself. Without it ZeRO-3 counts every micro-batch as the first and keeps only the last gradient.
        self.engine.optimizer.clear_backward_seen_flag()
        self.engine.set_gradient_accumulation_boundary(last)
        self.engine.backward(loss, scale_wrt_gas=False)

    def step(self) -> float:
        self.engine.step()
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else 0.0


class DeepSpeedEngine(TrainingEngine):
    """ZeRO stage 2 or 3 over the launcher's process group; the client AdamW steps the flat partitions."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        value_head: ValueHead | None,
        config: DeepSpeedConfig,
        *,
        grad_clip: float | None,
    ) -> None:
        super().__init__(model, optimizer, value_head)
        init_distributed(config)
        import deepspeed

        self.config = config
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        if config.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        module = model if value_head is None else _WithValueHead(model, value_head)
        # the optimiser's parameters in its own order: the plain state_dict's indices
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self.group_sizes = [len(group["params"]) for group in optimizer.param_groups]  # ZeRO flattens them
        zero: dict[str, Any] = {"stage": config.stage}
        if config.offload_optimizer:
            zero["offload_optimizer"] = {"device": "cpu"}
        ds_config = {
            "train_micro_batch_size_per_gpu": 1,  # the update splits batches itself (Shard)
            "gradient_accumulation_steps": 1,
            "gradient_clipping": grad_clip or 0.0,
            "zero_optimization": zero,
            "bf16": {"enabled": config.bf16},
            "zero_allow_untested_optimizer": True,  # the run's fused torch AdamW, not DeepSpeed's Adam
            "zero_force_ds_cpu_optimizer": False,
            "steps_per_print": 2**62,
        }
        self.ds, *_ = deepspeed.initialize(model=module, optimizer=optimizer, config=ds_config)
        self.zero = self.ds.optimizer
        self.stepper = _Stepper(self.ds)

    # --- data parallel ---------------------------------------------------------------------------
    def gather(self, items: list[T]) -> list[T]:
        out: list[list[T] | None] = [None] * self.world
        dist.all_gather_object(out, items)
        return [item for part in out for item in (part or [])]

    def broadcast(self, value: T) -> T:
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def full_weights(self) -> contextlib.AbstractContextManager[None]:
        if self.config.stage != 3:
            return contextlib.nullcontext()  # ZeRO-2 keeps every parameter whole on every rank
        # ZeRO-3: gather every parameter once and lift the fetch hooks, so ranks generating different
        # numbers of tokens run no collectives (the hooks would all-gather in every forward)
        from deepspeed.runtime.zero.stage3 import unwrap_model_for_generation

        return unwrap_model_for_generation(self.ds)

    def _whole_parameters(self, modifier_rank: int | None = None) -> contextlib.AbstractContextManager[Any]:
        """ZeRO-3: the module's parameters gathered, read-only or, with `modifier_rank`, written by that rank
        and re-partitioned from its values on exit; a no-op below stage 3."""
        if self.config.stage != 3:
            return contextlib.nullcontext()
        import deepspeed

        return deepspeed.zero.GatheredParameters(
            list(self.ds.module.parameters()), modifier_rank=modifier_rank
        )

    def _device(self) -> torch.device:
        return (
            torch.device("cuda", torch.cuda.current_device())
            if torch.cuda.is_available()
            else torch.device("cpu")
        )

    def _sum_ranks(self, totals: dict[str, float]) -> dict[str, float]:
        summed: dict[str, float] = {}
        for part in self.gather([totals]):
            for key, value in part.items():
                summed[key] = summed.get(key, 0.0) + value
        return summed

    # --- update ----------------------------------------------------------------------------------
    def update(
        self,
        inputs: UpdateInputs,
        *,
        loss_config: PolicyLossConfig,
        settings: UpdateSettings,
        generator: torch.Generator,
    ) -> dict[str, float]:
        # With the common prefix encoded once, ZeRO-2's update drifted 0.2% from the single process's
        # while each rank's logprobs matched exactly (tests/trainers/training/test_deepspeed_engine.py)
        shard = Shard(
            self.rank, self.world, self.config.micro_batch_size, share_prompts=self.config.stage != 3,
            share_prefix=False,
        )  # fmt: skip
        return ppo_update(
            self.model, None, inputs, loss_config=loss_config, settings=settings, value_head=self.value_head,
            generator=generator, stepper=self.stepper, shard=shard, sum_ranks=self._sum_ranks,
        )  # fmt: skip

    # --- the optimiser state as a plain AdamW state_dict ---------------------------------------
    def _groups(self) -> list[tuple[list[nn.Parameter], torch.Tensor]]:
        """ZeRO-1/2: each group's parameters in flattening order and this rank's fp32 partition."""
        return list(
            zip(self.zero.round_robin_bit16_groups, self.zero.single_partition_of_fp32_groups, strict=True)
        )

    def _full(self, part: torch.Tensor) -> torch.Tensor:
        parts = [torch.empty_like(part) for _ in range(self.world)]
        dist.all_gather(parts, part.contiguous())
        return torch.cat(parts)

    def _zero3_state(self) -> dict[int, dict[str, torch.Tensor]]:
        """ZeRO-3: each parameter's AdamW state gathered from its partitions (collective)."""
        from deepspeed.utils import safe_get_full_optimizer_state

        state: dict[int, dict[str, torch.Tensor]] = {}
        held = [s for s in self.zero.optimizer.state.values() if "step" in s]
        if not held:
            return state  # before the first step
        for i, p in enumerate(self.params):
            entry = {key: safe_get_full_optimizer_state(p, key) for key in ADAM_STATE}
            state[i] = {k: v.detach().cpu().clone().view(p.ds_shape) for k, v in entry.items()}
            state[i]["step"] = held[0]["step"].detach().cpu().clone()
        return state

    def optimizer_state(self) -> dict[str, Any]:
        """The AdamW state the single process would hold (collective: every rank calls it)."""
        index = {id(p): i for i, p in enumerate(self.params)}
        inner = self.zero.optimizer
        state: dict[int, dict[str, torch.Tensor]] = {}
        for params, partition in [] if self.config.stage == 3 else self._groups():
            held = inner.state.get(partition, {})
            for key in ADAM_STATE:
                if key not in held:
                    continue
                full, offset = self._full(held[key]).cpu(), 0
                for p in params:
                    state.setdefault(index[id(p)], {})[key] = (
                        full[offset : offset + p.numel()].view_as(p).clone()
                    )
                    offset += p.numel()
            if "step" in held:
                for p in params:
                    state[index[id(p)]]["step"] = held["step"].detach().cpu().clone()
        if self.config.stage == 3:
            state = self._zero3_state()
        groups, start = [], 0
        for group, count in zip(self.optimizer.param_groups, self.group_sizes, strict=True):
            groups.append(
                {
                    **{k: v for k, v in group.items() if k != "params"},
                    "params": list(range(start, start + count)),
                }
            )
            start += count
        return {"state": state, "param_groups": groups}

    def load_optimizer_state(self, saved: dict[str, Any]) -> None:
        """Scatter a plain AdamW state_dict (either engine's) into this rank's partitions."""
        for group, plain in zip(self.optimizer.param_groups, saved["param_groups"], strict=True):
            group.update({k: v for k, v in plain.items() if k != "params"})
        if self.config.stage == 3:
            self._load_zero3_state(saved["state"])
            return
        index = {id(p): i for i, p in enumerate(self.params)}
        for params, partition in self._groups():
            entries = [saved["state"].get(index[id(p)]) for p in params]
            if not all(entries):
                continue  # saved before the first step: nothing to restore
            held = {
                key: self._rank_slice(torch.cat([e[key].reshape(-1) for e in entries]), partition.numel())
                .to(partition)
                .clone()
                for key in ADAM_STATE
            }
            held["step"] = entries[0]["step"].to(partition.device)
            self.zero.optimizer.state[partition] = held

    def _load_zero3_state(self, saved: dict[int, dict[str, torch.Tensor]]) -> None:
        """ZeRO-3: AdamW state on each sub-group's fp32 partition (the optimiser creates it lazily at its
        first step), filled parameter by parameter with this rank's slices."""
        from deepspeed.utils import safe_set_local_optimizer_state

        index = {id(p): i for i, p in enumerate(self.params)}
        zero = self.zero
        for params, flat in zip(zero.fp16_groups, zero.fp32_partitioned_groups_flat, strict=True):
            entries = [saved.get(index[id(p)]) for p in params]
            if not all(entries):
                continue  # saved before the first step: nothing to restore
            state = {key: torch.zeros_like(flat) for key in ADAM_STATE}
            zero.optimizer.state[flat] = {**state, "step": entries[0]["step"].to(flat.device)}
            for p, entry in zip(params, entries, strict=True):
                for key in ADAM_STATE:
                    safe_set_local_optimizer_state(p, self._rank_slice(entry[key], p.ds_tensor.numel()), key)

    def _rank_slice(self, full: torch.Tensor, size: int) -> torch.Tensor:
        """This rank's `size` elements of `full`, flattened and zero-padded to `size * world`."""
        flat = torch.nn.functional.pad(full.reshape(-1), (0, size * self.world - full.numel()))
        return flat[self.rank * size : (self.rank + 1) * size]

    # --- checkpoints -----------------------------------------------------------------------------
    def _masters(self) -> dict[int, torch.Tensor]:
        """bf16: every parameter's fp32 master by id, gathered from the ranks' partitions (collective: every
        rank gathers the parameters in the same order); empty without bf16."""
        from deepspeed.utils import safe_get_full_fp32_param

        if not self.config.bf16:
            return {}
        return {id(p): safe_get_full_fp32_param(p).cpu() for p in self.ds.module.parameters()}

    def _saved(self, module: nn.Module | None, masters: dict[int, torch.Tensor]) -> Any:
        """`module` as `save_checkpoint` is to save it: itself, or under bf16 its fp32 masters."""
        return module if module is None or not masters else _Fp32Weights(module, masters)

    def save(self, path: Path, *, step: int, scheduler: Any, tokenizer: Any, extra: dict[str, Any]) -> Path:
        optimizer, masters = self.optimizer_state(), self._masters()
        with self._whole_parameters():
            if self.rank == 0:
                save_checkpoint(
                    path, step=step, model=self._saved(self.model, masters), optimizer_state=optimizer,
                    scheduler=scheduler, tokenizer=tokenizer, extra=extra,
                    value_head=self._saved(self.value_head, masters),
                )  # fmt: skip
        dist.barrier()  # every rank returns once the checkpoint is complete
        return path

    def load(self, path: Path, *, scheduler: Any) -> Resumed:
        """Weights into the module and the fp32 master partitions, then the optimiser, scheduler, RNGs."""
        from safetensors.torch import load_file

        from trainers.training.checkpoint import VALUE_HEAD_FILE

        path = Path(path)
        weights = read_weights(path)
        head = load_file(path / VALUE_HEAD_FILE) if self.value_head is not None else {}
        with self._whole_parameters(modifier_rank=0):  # ZeRO-3 re-partitions rank 0's weights on exit
            load_model_weights(self.model, path, weights)
            if self.value_head is not None:
                self.value_head.load_state_dict(head)
        if self.config.bf16:
            self._load_masters(weights, head)
        else:
            self.zero.refresh_fp32_params()  # the fp32 masters from this rank's parameter partitions
        state = load_trainer_state(path)
        if state["optimizer"] is not None:
            self.load_optimizer_state(state["optimizer"])
        if scheduler is not None and state["scheduler"] is not None:
            scheduler.load_state_dict(state["scheduler"])
        set_rng_state(state["rng"])
        return Resumed(step=state["step"], extra=state["extra"])

    def _load_masters(self, weights: dict[str, torch.Tensor], head: dict[str, torch.Tensor]) -> None:
        """bf16: each rank's fp32 master partitions from the checkpoint's weights (fp32 when saved so)."""
        saved = _by_parameter(self.model, weights)
        if self.value_head is not None:
            saved.update(_by_parameter(self.value_head, head))
        for p in self.ds.module.parameters():
            self._set_master(p, saved[id(p)].float())

    def _set_master(self, param: nn.Parameter, full: torch.Tensor) -> None:
        """Write `full` into this rank's fp32 master partition of `param` (local, no collective)."""
        from deepspeed.utils import safe_set_full_fp32_param, safe_set_local_fp32_param

        if self.config.stage == 3:  # the full setter cannot slice a padded last partition
            safe_set_local_fp32_param(param, self._rank_slice(full, param.ds_tensor.numel()))
        else:
            safe_set_full_fp32_param(param, full.to(self._device()))

    def close(self) -> None:
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


def _by_parameter(module: nn.Module, weights: dict[str, torch.Tensor]) -> dict[int, torch.Tensor]:
    """`weights` keyed by the id of the parameter each name holds (a tied one under any of its names)."""
    named = module.state_dict(keep_vars=True)
    return {id(named[key]): value for key, value in weights.items() if isinstance(named[key], nn.Parameter)}
