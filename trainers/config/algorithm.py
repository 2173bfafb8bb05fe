"""Run-config sections for learning: advantage estimator, policy loss, group filters.

Names match the registries of trainers.advantages (ESTIMATORS) and trainers.filters (FILTERS).
`algorithm` is the union of the registered estimators' parameters, told apart by `estimator`;
`EstimatorParams.build`, `filter_kwargs` and `policy_loss_kwargs` give what their constructors take.
"""

from __future__ import annotations

import operator
from functools import cache, reduce
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializeAsAny,
    TypeAdapter,
    model_validator,
)
from pydantic.json_schema import GetJsonSchemaHandler, JsonSchemaValue
from pydantic_core import CoreSchema

from trainers.advantages import ESTIMATORS, AdvantageEstimator, EstimatorParams

DEFAULT_ESTIMATOR = "grpo"


@cache
def _union(estimators: tuple[tuple[str, type[AdvantageEstimator]], ...]) -> TypeAdapter[Any]:
    cases = reduce(operator.or_, (cls.Params for _, cls in estimators))
    return TypeAdapter(Annotated[cases, Field(discriminator="estimator")])


def estimator_params_union() -> TypeAdapter[Any]:
    """The discriminated union of the estimators' parameters, as registered now (a test may add one)."""
    return _union(tuple(ESTIMATORS.items()))


def _own_params(data: dict[str, Any]) -> dict[str, Any]:
    """The section without other estimators' parameters: configs written before the union (and the
    workbench's form) hold every estimator's parameters side by side, and only the chosen ones apply."""
    chosen = data.get("estimator")
    if not isinstance(chosen, str) or chosen not in ESTIMATORS:
        return data  # the union names the bad estimator
    own = ESTIMATORS.get(chosen).Params.model_fields
    others = {name for _, cls in ESTIMATORS.items() for name in cls.Params.model_fields} - own.keys()
    return {key: value for key, value in data.items() if key not in others}


def _validate_algorithm(data: Any) -> Any:
    """A mapping gets grpo as its default estimator, loses other estimators' parameters, and is then
    validated as the case of the union its `estimator` names."""
    if isinstance(data, EstimatorParams):
        return data
    if isinstance(data, dict):
        data = _own_params({"estimator": DEFAULT_ESTIMATOR, **data})
    return estimator_params_union().validate_python(data)


class _RegisteredEstimatorsSchema:
    """The JSON Schema of the union as registered when the schema is made (the workbench's run form)."""

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        del schema  # the declared type is the base class; the registered cases are what validates
        return handler(estimator_params_union().core_schema)


AlgorithmConfig = Annotated[
    SerializeAsAny[EstimatorParams], BeforeValidator(_validate_algorithm), _RegisteredEstimatorsSchema()
]


def default_algorithm() -> EstimatorParams:
    return ESTIMATORS.get(DEFAULT_ESTIMATOR).Params()


class LossConfig(BaseModel):
    """The clipped policy loss, its KL and entropy terms, and the value loss."""

    model_config = ConfigDict(extra="forbid")

    clip_low: float = Field(0.2, gt=0.0, lt=1.0, description="ratio floor 1 - clip_low")
    clip_high: float = Field(0.2, gt=0.0, description="ratio ceiling 1 + clip_high (DAPO clip-higher: 0.28)")
    dual_clip: float | None = Field(None, gt=1.0, description="c > 1 bounds losses of negative advantages")
    aggregation: Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum"] = Field(
        "token_mean", description="how token losses are averaged (DAPO: token_mean)"
    )
    kl: Literal["k1", "k2", "k3", "none"] = Field("none", description="KL estimator to the frozen reference")
    kl_coef: float = Field(0.0, ge=0.0, description="beta, weight of the KL term")
    entropy_coef: float = Field(0.0, ge=0.0, description="weight of the entropy bonus")
    value_coef: float = Field(0.5, ge=0.0, description="ppo: weight of the value loss")
    value_clip: float | None = Field(0.2, gt=0.0, description="ppo: clip range of the value loss; none = off")
    norm_constant: int | None = Field(
        None,
        ge=1,
        description="seq_mean_token_sum (Dr. GRPO): the fixed divisor of each sequence's token-loss sum; "
        "none = limits.max_total_new_tokens, the generation budget",
    )

    def policy_loss_kwargs(self, generation_budget: int | None = None) -> dict[str, Any]:
        """Arguments of trainers.losses.objective.PolicyLossConfig; `generation_budget` (the run's
        limits.max_total_new_tokens) is the seq_mean_token_sum divisor unless `norm_constant` is set."""
        constant = self.norm_constant or generation_budget
        return {
            "norm_constant": None if constant is None else float(constant),
            "eps_low": self.clip_low,
            "eps_high": self.clip_high,
            "dual_clip": self.dual_clip,
            "agg": self.aggregation,
            "kl_kind": self.kl,
            "kl_coef": self.kl_coef,
            "entropy_coef": self.entropy_coef,
        }


class MismatchConfig(BaseModel):
    """Train-inference mismatch: the sampler's log-probs (vLLM's kernels, another dtype) differ from the
    trainer's for the same tokens. Truncated importance sampling (Yao et al. 2025, verl's TIS) weights
    each token's policy loss by min(exp(logp_trainer_old - logp_sampler), tis_cap)."""

    model_config = ConfigDict(extra="forbid")

    old_logprobs: Literal["trainer", "sampler"] = Field(
        "trainer",
        description="the old policy of the clipped ratio: the trainer's recomputed log-probs, or the"
        " sampler's as they came with the rollout",
    )
    tis_cap: float | None = Field(
        None, ge=1.0, description="truncated importance sampling cap C (e.g. 2); none = off"
    )
    measure: bool = Field(
        False,
        description="report rollout/logprob_mismatch_mean and _max also when nothing else needs the"
        " trainer's log-probs before the update (one more forward pass; always on with vLLM or TIS)",
    )

    @model_validator(mode="after")
    def _tis_needs_trainer(self) -> MismatchConfig:
        if self.tis_cap is not None and self.old_logprobs == "sampler":
            raise ValueError(
                "mismatch.tis_cap corrects towards the trainer's log-probs: old_logprobs: trainer"
            )
        return self


class ZeroTIRBandFilter(BaseModel):
    """ZeroTIR: drop groups whose accuracy is above `high` or below `low`."""

    model_config = ConfigDict(extra="forbid")
    name: Literal["zerotir_band"] = Field("zerotir_band", description="filter kind")
    low: float = Field(0.2, ge=0.0, le=1.0, description="lowest group accuracy kept")
    high: float = Field(0.8, ge=0.0, le=1.0, description="highest group accuracy kept")
    reward_key: str = Field("correctness", description="reward component read as correctness")
    threshold: float = Field(0.5, description="a sample is correct when that component exceeds this")


class StarPOSFilter(BaseModel):
    """StarPO-S: keep the groups with the highest within-group reward std."""

    model_config = ConfigDict(extra="forbid")
    name: Literal["starpo_s"] = Field("starpo_s", description="filter kind")
    keep_fraction: float = Field(0.25, gt=0.0, le=1.0, description="share of groups kept")


class DapoDynamicFilter(BaseModel):
    """DAPO dynamic sampling: drop zero-variance groups and sample more to refill the batch."""

    model_config = ConfigDict(extra="forbid")
    name: Literal["dapo_dynamic"] = Field("dapo_dynamic", description="filter kind")
    max_refill_rounds: int = Field(3, ge=0, description="extra sampling rounds per step to refill the batch")
    tolerance: float = Field(1e-6, ge=0.0, description="rewards closer than this count as equal")


FilterConfig = Annotated[ZeroTIRBandFilter | StarPOSFilter | DapoDynamicFilter, Field(discriminator="name")]

_LOOP_ONLY = {"name", "max_refill_rounds"}  # read by the training loop, not by the filter


def filter_kwargs(spec: ZeroTIRBandFilter | StarPOSFilter | DapoDynamicFilter) -> dict[str, Any]:
    """Constructor arguments of `FILTERS.get(spec.name)`."""
    return spec.model_dump(exclude=_LOOP_ONLY)
