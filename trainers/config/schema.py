"""The whole run configuration: one validated, typed object from which a run is built.

Unknown keys anywhere are errors naming their path; `RunConfig.json_schema()` is what the
workbench's forms are built from.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from trainers.config.agent import AGENT_TEMPLATES
from trainers.config.algorithm import (
    AlgorithmConfig,
    FilterConfig,
    LossConfig,
    MismatchConfig,
    default_algorithm,
)
from trainers.config.limits import RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.config.sections import (
    CheckpointConfig,
    DataConfig,
    EchoTrapSection,
    EvaluationConfig,
    GenerationConfig,
    ModelConfig,
    OptimizerConfig,
    ResourcesConfig,
    RolloutConfig,
    SFTConfig,
    TemplateConfig,
    ToolBindingConfig,
    TrainingConfig,
)
from trainers.config.tracking import TrackingConfig
from trainers.rewards import RewardDefinition

# descriptions for fields of shared models that do not carry one, so every form field has help text
_SHARED_DESCRIPTIONS = {
    "SamplingParams": {
        "temperature": "sampling temperature; 0 = greedy",
        "top_p": "nucleus sampling mass",
        "top_k": "0 disables top-k",
        "seed": "sampling seed; none = from the run seed",
    },
    "RolloutLimits": {"max_new_tokens_per_turn": "policy tokens per assistant turn"},
}


def _default_reward() -> RewardDefinition:
    return RewardDefinition(components=[{"name": "correctness"}])


class RunConfig(BaseModel):
    """Everything a training run needs, validated before it starts."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("run", min_length=1, description="a short name for the run")
    seed: int = Field(0, ge=0, description="seed of data order, sampling and initialisation")
    output_dir: str = Field(
        "runs/run", min_length=1, description="run directory: metrics, trajectories, checkpoints"
    )
    model: ModelConfig = Field(default_factory=ModelConfig, description="the policy model")
    template: TemplateConfig = Field(default_factory=TemplateConfig, description="the chat template")
    tools: list[ToolBindingConfig] = Field(default_factory=list, description="tools the policy may call")
    limits: RolloutLimits = Field(default_factory=RolloutLimits, description="call, turn and token budgets")
    sampling: SamplingParams = Field(default_factory=SamplingParams, description="rollout sampling")
    generation: GenerationConfig = Field(
        default_factory=GenerationConfig, description="the generation backend: hf or vllm"
    )
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="prompts and samples per step")
    reward: RewardDefinition = Field(
        default_factory=_default_reward, description="weighted reward components"
    )
    algorithm: AlgorithmConfig = Field(
        default_factory=default_algorithm, description="the advantage estimator and its parameters"
    )
    loss: LossConfig = Field(default_factory=LossConfig, description="policy, KL, entropy and value losses")
    mismatch: MismatchConfig = Field(
        default_factory=MismatchConfig, description="sampler vs trainer log-probs: old policy, TIS, metric"
    )
    filters: list[FilterConfig] = Field(default_factory=list, description="group filters, applied in order")
    optimizer: OptimizerConfig = Field(
        default_factory=OptimizerConfig, description="optimiser and lr schedule"
    )
    training: TrainingConfig = Field(default_factory=TrainingConfig, description="steps, epochs, minibatches")
    sft: SFTConfig | None = Field(None, description="SFT warm start before RL; none = RL only")
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig, description="periodic evaluation")
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig, description="checkpoint schedule")
    data: DataConfig = Field(default_factory=DataConfig, description="training and evaluation data")
    echo_trap: EchoTrapSection = Field(default_factory=EchoTrapSection, description="collapse detection")
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig, description="GPUs the run needs")
    tracking: TrackingConfig | None = Field(
        None, description="experiment trackers the metrics are mirrored to; none = no mirror"
    )

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        aggregation = self.algorithm.estimator_class.loss_aggregation
        if aggregation is not None and "aggregation" not in self.loss.model_fields_set:
            # e.g. Dr. GRPO drops the per-response length normalisation: each sequence's token-loss sum
            # is divided by the fixed generation budget (loss.norm_constant), unless aggregation is chosen
            self.loss.aggregation = aggregation
        grouped = self.algorithm.group_comparison()
        if grouped is not None and self.rollout.samples_per_prompt < 2:
            raise ValueError(f"{grouped} compares samples of a prompt: samples_per_prompt >= 2")
        if self.model.tiny.tokenizer_corpus == "sft_data" and self.model.path == "tiny" and self.sft is None:
            raise ValueError("model.tiny.tokenizer_corpus 'sft_data' needs SFT data: add an sft section")
        if self.loss.kl == "none" and self.loss.kl_coef > 0:
            raise ValueError("loss.kl_coef > 0 needs a KL estimator (loss.kl: k1, k2 or k3)")
        if self.rollout.backend == "remote" and self.training.engine == "deepspeed":
            raise ValueError(
                "rollout.backend 'remote' needs training.engine 'local': under deepspeed each rank rolls out"
                " its share of the prompts in-process (rollout.backend 'local')"
            )
        self._agent_fits()
        self._lora_fits()
        minibatch = self.training.minibatch_size
        if minibatch is not None and minibatch > self.batch_size:
            raise ValueError(
                f"training.minibatch_size {minibatch} exceeds the step's batch {self.batch_size}"
            )
        names = [f.name for f in self.filters]
        if len(set(names)) != len(names):
            raise ValueError("each filter may appear once")
        self._resources_fit()
        return self

    def _agent_fits(self) -> None:
        """An agent run has its program, a ChatML template the endpoint renders conversations with, and
        no tools of its own (the program brings them)."""
        if self.rollout.backend != "agent":
            return
        if self.rollout.agent is None:
            raise ValueError("rollout.backend 'agent' needs rollout.agent: the agent program")
        if self.template.name not in AGENT_TEMPLATES:
            raise ValueError(
                f"rollout.backend 'agent' needs template.name among {', '.join(AGENT_TEMPLATES)}"
            )
        if self.tools:
            raise ValueError("rollout.backend 'agent': the agent program brings its tools; leave tools empty")
        if self.training.engine != "local":
            raise ValueError("rollout.backend 'agent' needs training.engine 'local'")

    def _lora_fits(self) -> None:
        """LoRA trains on the local engine and samples with the HF backend in-process (for now)."""
        if self.model.lora is None:
            return
        if self.training.engine != "local":
            raise ValueError("model.lora needs training.engine 'local': DeepSpeed with LoRA is unsupported")
        if self.generation.backend != "hf":
            raise ValueError("model.lora needs generation.backend 'hf': vLLM does not load adapters yet")
        if self.rollout.backend == "remote":
            raise ValueError("model.lora needs rollout.backend 'local' or 'agent': workers take full weights")

    def _resources_fit(self) -> None:
        """The GPUs asked for are the ones the run uses: its device, and one DeepSpeed rank per GPU."""
        gpus, device = self.resources.gpus, self.model.device
        if device.startswith("cuda") and gpus == 0:
            raise ValueError(f"model.device {device} needs resources.gpus >= 1 (0 = CPU)")
        if device.startswith("cuda:") and int(device.split(":")[1]) >= gpus:
            raise ValueError(f"model.device {device}: the run sees its {gpus} GPU(s) as cuda:0..{gpus - 1}")
        ranks = self.training.deepspeed.ranks
        if gpus and self.training.engine == "deepspeed" and ranks != gpus:
            raise ValueError(
                f"training.deepspeed.ranks ({ranks}) must equal resources.gpus ({gpus}): one per GPU"
            )

    @property
    def batch_size(self) -> int:
        """Trajectories sampled per step (before filters)."""
        return self.rollout.prompts_per_step * self.rollout.samples_per_prompt

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema of a run config, every property with a description."""
        schema = cls.model_json_schema()
        for model, descriptions in _SHARED_DESCRIPTIONS.items():
            props = schema.get("$defs", {}).get(model, {}).get("properties", {})
            for field, text in descriptions.items():
                if field in props:
                    props[field].setdefault("description", text)
        return schema
