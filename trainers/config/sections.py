"""Run-config sections for everything but the learning algorithm: model, template, tools, rollout,
optimiser, training schedule, SFT stage, evaluation, checkpoints and data."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from trainers.config.agent import AgentConfig
from trainers.metrics.echo_trap import EchoTrapConfig


class TinyModelConfig(BaseModel):
    """The bundled tiny Qwen2 model's size and tokenizer, built in the run directory when path is 'tiny'."""

    model_config = ConfigDict(extra="forbid")

    hidden_size: int = Field(128, ge=16, le=1024, description="tiny model: hidden size")
    num_layers: int = Field(4, ge=1, le=16, description="tiny model: decoder layers")
    num_heads: int = Field(4, ge=1, le=32, description="tiny model: attention heads")
    num_kv_heads: int = Field(2, ge=1, le=32, description="tiny model: key/value heads (divides num_heads)")
    tokenizer_corpus: Literal["default", "sft_data"] = Field(
        "default",
        description="tiny model: what its tokenizer is trained on: built-in arithmetic text, or the run's"
        " SFT conversations rendered with its template and tools (merges cross spaces: short prompts)",
    )

    @model_validator(mode="after")
    def _heads_fit(self) -> TinyModelConfig:
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError("num_heads must divide hidden_size and num_kv_heads must divide num_heads")
        return self


class LoraConfig(BaseModel):
    """LoRA adapters (PEFT) on the policy: only they train; the base weights stay frozen."""

    model_config = ConfigDict(extra="forbid")

    r: int = Field(8, ge=1, le=1024, description="LoRA: rank of each adapter")
    alpha: float = Field(16.0, gt=0.0, description="LoRA: scaling numerator (the update is alpha / r)")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="LoRA: dropout on the adapters' input")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        min_length=1,
        description="LoRA: names of the linear layers that get adapters (the attention and MLP projections)",
    )


class ModelConfig(BaseModel):
    """The policy model, loaded with from_pretrained from a local path."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        "tiny", min_length=1, description="local model directory; 'tiny': the bundled demo model"
    )
    tiny: TinyModelConfig = Field(
        default_factory=TinyModelConfig, description="the bundled model's size, when path is 'tiny'"
    )
    tokenizer_path: str | None = Field(None, description="local tokenizer directory; none = the model's")
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="parameter dtype")
    device: str = Field("cpu", pattern=r"^(cpu|cuda(:\d+)?|auto)$", description="cpu, cuda, cuda:N or auto")
    lora: LoraConfig | None = Field(None, description="LoRA adapters to train; none = every weight trains")


class TemplateConfig(BaseModel):
    """The chat template: a registered family, optionally with an edited Jinja prompt source."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("qwen_tool", description="registered chat template")
    source: str | None = Field(None, description="Jinja prompt source replacing the template's own")

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        from trainers.templates import TEMPLATES  # lazy: keeps config import light

        if name not in TEMPLATES:
            raise ValueError(f"unknown template {name!r}; known: {', '.join(TEMPLATES.names())}")
        return name


class ToolBindingConfig(BaseModel):
    """A registered tool and the keyword config its class takes (timeout_s, url, corpus_path...)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., description="registered tool")
    config: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the tool")

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        from trainers.tools import TOOLS  # lazy: keeps config import light

        if name not in TOOLS:
            raise ValueError(f"unknown tool {name!r}; known: {', '.join(TOOLS.names())}")
        return name


class RolloutConfig(BaseModel):
    """How many trajectories a step samples, and where they are generated."""

    model_config = ConfigDict(extra="forbid")

    prompts_per_step: int = Field(8, ge=1, description="prompts sampled per training step")
    samples_per_prompt: int = Field(8, ge=1, description="G: responses per prompt (one group)")
    backend: Literal["local", "remote", "agent"] = Field(
        "local",
        description="local: the training process generates; remote: rollout jobs on the rollout workers"
        " (the workbench's rollout queue), sampling from the trainer's published weights; agent: an agent"
        " program (rollout.agent) plays each episode against the policy's OpenAI-compatible endpoint",
    )
    agent: AgentConfig | None = Field(None, description="agent: the program and its sandbox limits")
    prompts_per_job: int | None = Field(
        None, ge=1, description="remote: prompts (whole groups) per rollout job; none = from jobs_per_worker"
    )
    jobs_per_worker: int = Field(
        1,
        ge=1,
        description="remote: jobs per live rollout worker when prompts_per_job is none; more jobs even out"
        " uneven workers, but a worker runs its jobs one after another and only overlaps the tool calls"
        " within a job",
    )
    job_timeout_s: float = Field(
        300.0, gt=0.0, description="remote: a job without a result after this long is sent again"
    )
    keep_weight_versions: int = Field(
        2, ge=1, description="remote: published weight versions kept; older ones are deleted"
    )
    max_staleness: int = Field(
        0,
        ge=0,
        le=1,
        description="remote: 1 = the next step's rollout runs while this step trains, on the weights one"
        " update old (PPO's ratio corrects with the sampled log-probs); 0 = on-policy",
    )


class VLLMConfig(BaseModel):
    """The vLLM engine, colocated with training on the same GPU(s) (trainers.backends.vllm)."""

    model_config = ConfigDict(extra="forbid")

    gpu_memory_utilization: float = Field(
        0.5, gt=0.0, le=1.0, description="share of each GPU's memory vLLM takes (weights and KV cache)"
    )
    tensor_parallel_size: int = Field(1, ge=1, le=64, description="GPUs one engine shards the model over")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field("auto", description="engine dtype")
    max_model_len: int | None = Field(None, ge=16, description="longest context; none = the model's")
    enable_prefix_caching: bool = Field(True, description="reuse cached blocks of a shared prompt prefix")
    sleep: bool = Field(
        True, description="free the engine's GPU memory while the trainer updates (vLLM sleep mode)"
    )
    sleep_level: int = Field(
        1, ge=1, le=2, description="1: offload weights to CPU memory while asleep; 2: drop them (reloaded)"
    )
    enforce_eager: bool = Field(False, description="no CUDA graphs (faster start, slower decoding)")


class GenerationConfig(BaseModel):
    """What samples the rollouts: the Hugging Face backend or a vLLM engine."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["hf", "vllm"] = Field(
        "hf",
        description="hf: our sampling loop over the trainer's model (CPU or GPU); vllm: a vLLM engine on"
        " the GPU, loaded with the trainer's weights after every update (requirements-gpu.txt)",
    )
    vllm: VLLMConfig = Field(default_factory=VLLMConfig, description="the vLLM engine, when backend is vllm")


class OptimizerConfig(BaseModel):
    """AdamW and its learning-rate schedule."""

    model_config = ConfigDict(extra="forbid")

    lr: float = Field(1e-6, gt=0.0, description="peak learning rate")
    betas: tuple[float, float] = Field((0.9, 0.999), description="Adam beta1, beta2")
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay")
    grad_clip: float | None = Field(1.0, gt=0.0, description="max global grad norm; none = no clipping")
    schedule: Literal["constant", "linear", "cosine"] = Field("constant", description="decay after warm-up")
    warmup_steps: int = Field(0, ge=0, description="steps of linear warm-up from 0")
    min_lr_ratio: float = Field(0.0, ge=0.0, le=1.0, description="final lr / peak lr for linear and cosine")

    @field_validator("betas")
    @classmethod
    def _betas_in_range(cls, betas: tuple[float, float]) -> tuple[float, float]:
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError("each beta must be in [0, 1)")
        return betas


class DeepSpeedConfig(BaseModel):
    """The DeepSpeed engine: the update on `ranks` data-parallel processes with ZeRO (torchrun launches
    them: gloo on CPU, NCCL on CUDA). Each rank rolls out its share of a step's prompts; rank 0 logs."""

    model_config = ConfigDict(extra="forbid")

    ranks: int = Field(2, ge=1, le=1024, description="processes on this machine (torchrun --nproc_per_node)")
    stage: int = Field(
        2, ge=2, le=3, description="ZeRO stage: 2 shards optimiser state and gradients, 3 also the parameters"
    )
    bf16: bool = Field(False, description="bfloat16 parameters and activations, fp32 master weights")
    offload_optimizer: bool = Field(False, description="keep the optimiser state in CPU memory")
    gradient_checkpointing: bool = Field(False, description="recompute activations in the backward pass")
    micro_batch_size: int | None = Field(
        None,
        ge=1,
        description="trajectories per micro-batch on each rank (memory); none = grad_accumulation"
        " micro-batches per minibatch. Gradients are the same either way",
    )
    timeout_s: float = Field(
        600.0,
        gt=0.0,
        description="collective timeout: a rank that died or hangs fails the step after this long",
    )


class TrainingConfig(BaseModel):
    """The RL schedule: steps, PPO epochs and minibatches of each step's batch."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(100, ge=1, description="training steps (rollout + update)")
    ppo_epochs: int = Field(1, ge=1, description="passes over each step's batch")
    minibatch_size: int | None = Field(
        None, ge=1, description="trajectories per optimiser update; none = the whole step's batch"
    )
    grad_accumulation: int = Field(1, ge=1, description="micro-batches accumulated per update")
    engine: Literal["local", "deepspeed"] = Field(
        "local", description="local: this process trains; deepspeed: ZeRO on several ranks (deepspeed below)"
    )
    deepspeed: DeepSpeedConfig = Field(
        default_factory=DeepSpeedConfig, description="the DeepSpeed engine, when engine is deepspeed"
    )

    @model_validator(mode="after")
    def _divisible(self) -> TrainingConfig:
        if self.minibatch_size is not None and self.minibatch_size % self.grad_accumulation:
            raise ValueError("minibatch_size must be a multiple of grad_accumulation")
        return self


class SFTPhase(BaseModel):
    """One phase of an SFT curriculum: a number of steps, on every conversation or on the tool-using ones."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(..., ge=1, description="SFT steps of this phase")
    only_tool_calls: bool = Field(
        False, description="train on the conversations in which the assistant calls a tool, and no others"
    )


class SFTConfig(BaseModel):
    """An SFT warm start on expert trajectories before RL: `epochs` passes over the data with a cosine
    decay, or a curriculum of `phases`, each at a constant lr with a fresh optimiser and its own warm-up."""

    model_config = ConfigDict(extra="forbid")

    data_path: str | None = Field(None, description="JSONL of expert conversations; filled by the workbench")
    epochs: int = Field(1, ge=1, description="passes over the SFT data; ignored when phases are given")
    phases: list[SFTPhase] | None = Field(
        None,
        min_length=1,
        description="a curriculum run in order, replacing epochs, e.g. the tool-using conversations alone"
        " first (copying tool results forms faster), then all of them",
    )
    lr: float = Field(1e-5, gt=0.0, description="SFT learning rate")
    batch_size: int = Field(8, ge=1, description="conversations per SFT step")
    max_length: int = Field(1024, ge=16, description="tokens kept per conversation")


class EvaluationConfig(BaseModel):
    """Periodic evaluation on the eval split."""

    model_config = ConfigDict(extra="forbid")

    every_steps: int = Field(0, ge=0, description="evaluate every N steps; 0 = only at the end")
    max_problems: int | None = Field(None, ge=1, description="evaluate on at most this many eval rows")
    pass_k: int = Field(1, ge=1, description="k of pass@k (k samples at the rollout temperature)")
    greedy: bool = Field(True, description="also report greedy accuracy")
    at_start: bool = Field(False, description="also evaluate the starting policy, at step 0")
    runner: Literal["inline", "jobs"] = Field(
        "inline",
        description="inline: the trainer evaluates and training waits; jobs (the workbench): the trainer only"
        " checkpoints at every_steps and at the end, and each of those checkpoints is evaluated on the eval"
        " split as an evaluation job on the rollout queue while training goes on (at_start is inline only)",
    )


class CheckpointConfig(BaseModel):
    """When checkpoints are written and how many are kept."""

    model_config = ConfigDict(extra="forbid")

    every_steps: int = Field(50, ge=1, description="write a checkpoint every N steps")
    keep: int = Field(3, ge=1, description="most recent checkpoints kept")
    keep_best: str | None = Field(
        None,
        min_length=1,
        description="evaluation metric (e.g. sampled/accuracy) whose best value's weights are kept in"
        " checkpoints/best; none = keep no best checkpoint",
    )


class DataConfig(BaseModel):
    """Training and evaluation prompts (JSONL rows with the question and its ground truth)."""

    model_config = ConfigDict(extra="forbid")

    train_path: str | None = Field(None, description="JSONL of training rows; filled by the workbench")
    eval_path: str | None = Field(None, description="JSONL of eval rows; none = split off the training rows")
    eval_fraction: float = Field(0.0, ge=0.0, lt=1.0, description="share of training rows held out for eval")
    prompt_key: str = Field("question", min_length=1, description="row field holding the question")


class EchoTrapSection(BaseModel):
    """RAGEN's echo-trap detector on the run's metrics, and what an `echo_trap` alert does."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="run the detector on every step's metrics")
    on_alert: Literal["record", "stop", "starpo_s"] = Field(
        "record", description="record the alert; also stop the run; or switch on StarPO-S filtering"
    )
    detector: EchoTrapConfig = Field(default_factory=EchoTrapConfig, description="the detector's rules")


class ResourcesConfig(BaseModel):
    """What the run's worker must hand it: GPUs of its own (the workbench sets CUDA_VISIBLE_DEVICES)."""

    model_config = ConfigDict(extra="forbid")

    gpus: int = Field(
        0, ge=0, le=64, description="GPUs the run gets to itself; 0 = CPU (a deepspeed run: one rank per GPU)"
    )
