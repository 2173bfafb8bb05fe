"""The estimator interface: an `AdvantageBatch` in, per-token advantages (and PPO returns) out.

Layout: row i is trajectory i; column j is the j-th token of its response (every turn after the
prompt, tool and glue turns included), right-padded to T. `response_mask` is 1 on policy tokens.

An estimator is one module: its class, its parameters (an `EstimatorParams` set as the class's
`Params`: the run config's `algorithm` section) and one `ESTIMATORS.register`. The run config, and so
the web process, imports these modules for their parameters, so they do not import torch at module
level: tensors arrive in the batch, and new ones are made from them (`x.new_zeros`, `x.new_tensor`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from trainers.registry import Registry

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Step:
    """One assistant turn of a multi-turn trajectory: tokens [start, end) of the response."""

    start: int
    end: int
    reward: float = 0.0
    state_hash: str | None = None  # the state the action was taken from (GiGPO anchor state)
    state_text: str | None = None  # that state's text, for similarity grouping


@dataclass
class AdvantageBatch:
    """Everything any estimator may read; optional fields are needed only by some estimators."""

    group_ids: list[str]  # [B] samples of the same prompt share a group id
    rewards: torch.Tensor  # [B] scalar trajectory rewards
    response_mask: torch.Tensor  # [B, T] 1 on policy tokens, 0 on tool output, glue and padding
    steps: list[list[Step]] = field(default_factory=list)  # per trajectory, per assistant turn
    values: torch.Tensor | None = None  # [B, T] critic values (ppo)
    token_rewards: torch.Tensor | None = None  # [B, T] token-level rewards (ppo, reinforce_pp)
    kl: torch.Tensor | None = None  # [B, T] k1 KL (logp_old - ref_logp) per token, for kl_coef
    baseline_rewards: dict[str, float] | None = None  # group id -> greedy response reward (remax)

    def __post_init__(self) -> None:
        # advantages are targets, never differentiated through: cut any graph the inputs carry
        self.rewards = self.rewards.detach().float()
        self.response_mask = self.response_mask.detach().float()
        for name in ("values", "token_rewards", "kl"):
            tensor = getattr(self, name)
            if tensor is not None:
                if tensor.shape != self.response_mask.shape:
                    raise ValueError(
                        f"{name} has shape {tuple(tensor.shape)}, the response mask has "
                        f"{tuple(self.response_mask.shape)}"
                    )
                setattr(self, name, tensor.detach().float())
        if not self.steps:
            self.steps = [[] for _ in self.group_ids]
        rows, _ = self.response_mask.shape
        if not (len(self.group_ids) == rows == self.rewards.shape[0] == len(self.steps)):
            raise ValueError("group_ids, rewards, response_mask and steps must have one row per trajectory")

    @property
    def size(self) -> int:
        return len(self.group_ids)


@dataclass
class AdvantageResult:
    """Per-token advantages [B, T] (zero off-policy), PPO returns, and per-turn values for the inspector."""

    advantages: torch.Tensor
    returns: torch.Tensor | None = None
    turn_advantages: list[list[float]] = field(default_factory=list)  # mean advantage of each step
    step_groups: list[list[str | None]] | None = None  # GiGPO anchor-group key of each step


class EstimatorParams(BaseModel):
    """An estimator's parameters, flat beside `estimator` in the run config's `algorithm` section.

    Subclass it with the estimator's fields and set it as the estimator's `Params`; registering the
    estimator tags it with the estimator's name (the `estimator` field): one case of the config's union.
    """

    model_config = ConfigDict(extra="forbid")

    estimator: str = Field(description="advantage estimator")

    def estimator_kwargs(self) -> dict[str, Any]:
        """Constructor arguments of the estimator: each field under its own name unless overridden."""
        return self.model_dump(exclude={"estimator"})

    @property
    def estimator_class(self) -> type[AdvantageEstimator]:
        return ESTIMATORS.get(self.estimator)

    def group_comparison(self) -> str | None:
        """What compares the samples of a prompt (then samples_per_prompt must be >= 2); None: nothing."""
        return self.estimator if self.estimator_class.compares_group_samples else None

    def build(self) -> AdvantageEstimator:
        return self.estimator_class(**self.estimator_kwargs())


class AdvantageEstimator(ABC):
    """Stateless unless it says otherwise; stateful ones persist through `state_dict`.

    The class flags tell the loop what to put in the batch without knowing the estimator's name.
    """

    Params: ClassVar[type[EstimatorParams]] = EstimatorParams  # its config fields; tagged on registration
    compares_group_samples: ClassVar[bool] = False  # advantages compare a prompt's samples (group size >= 2)
    loss_aggregation: ClassVar[str | None] = None  # the loss aggregation it pairs with unless one is chosen
    needs_values: ClassVar[bool] = False  # run the critic and fill batch.values (ppo)
    needs_greedy_baseline: ClassVar[bool] = False  # roll out greedily per prompt: batch.baseline_rewards
    kl_coef: float = 0.0  # > 0: fill batch.kl with the per-token k1 KL to the reference

    @property
    def needs_kl(self) -> bool:
        return self.kl_coef > 0

    @abstractmethod
    def compute(self, batch: AdvantageBatch) -> AdvantageResult: ...

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        del state  # nothing to restore for a stateless estimator


class EstimatorRegistry(Registry[type[AdvantageEstimator]]):
    """Registering an estimator also tags its `Params` with its name, `estimator: Literal[name]`."""

    def register(self, name: str) -> Callable[[type[AdvantageEstimator]], type[AdvantageEstimator]]:
        add = super().register(name)

        def decorator(cls: type[AdvantageEstimator]) -> type[AdvantageEstimator]:
            add(cls)
            tag = Literal[name]  # type: ignore[valid-type]  # the name is known only at registration
            cls.Params = create_model(
                f"{cls.__name__}Params",
                __base__=cls.Params,
                __module__=cls.__module__,
                __doc__=cls.Params.__doc__,
                estimator=(tag, Field(name, description="advantage estimator")),
            )
            cls.Params.__qualname__ = f"{cls.__qualname__}.Params"  # where pickle finds it
            return cls

        return decorator


ESTIMATORS = EstimatorRegistry("advantage estimator")


def group_indices(group_ids: Sequence[str]) -> dict[str, list[int]]:
    """Row indices of each group, in first-seen order."""
    groups: dict[str, list[int]] = {}
    for i, gid in enumerate(group_ids):
        groups.setdefault(gid, []).append(i)
    return groups


def group_std(values: torch.Tensor, unbiased: bool) -> torch.Tensor:
    """Std of a group; a single sample has no spread (0, not NaN)."""
    if values.numel() < 2:
        return values.new_zeros(())
    return values.std(correction=1 if unbiased else 0)


def broadcast_to_tokens(scalars: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A per-trajectory scalar on each of its policy tokens, zero elsewhere."""
    return scalars[:, None] * mask


def turn_means(advantages: torch.Tensor, mask: torch.Tensor, steps: list[list[Step]]) -> list[list[float]]:
    """Mean advantage over the policy tokens of each step (what the inspector shows per turn)."""
    out: list[list[float]] = []
    for row, row_steps in enumerate(steps):
        values = []
        for step in row_steps:
            m = mask[row, step.start : step.end]
            total = m.sum()
            mean = (advantages[row, step.start : step.end] * m).sum() / total if total > 0 else total
            values.append(float(mean))
        out.append(values)
    return out


def outcome_result(scalars: torch.Tensor, batch: AdvantageBatch) -> AdvantageResult:
    """Result of an outcome-supervised estimator: one scalar per trajectory on all its policy tokens."""
    advantages = broadcast_to_tokens(scalars, batch.response_mask)
    turns = turn_means(advantages, batch.response_mask, batch.steps)
    return AdvantageResult(advantages, turn_advantages=turns)
