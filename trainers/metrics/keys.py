"""Standard metric names, shared by the loop, the sinks, the dashboard and the echo-trap detector.

Namespaced like CleanRL (`losses/approx_kl`): `<section>/<name>`; per-component and per-tool
series use the `*_PREFIX` constants followed by the component or tool name.
"""

from __future__ import annotations

# Rollout statistics (compute_step_metrics).
REWARD_MEAN = "reward/mean"
REWARD_STD = "reward/std"
REWARD_GROUP_STD_MEAN = "reward/group_std_mean"  # mean within-group reward std: the echo-trap signal
REWARD_ZERO_VARIANCE_FRAC = "reward/zero_variance_frac"  # groups whose rewards are all equal
REWARD_COMPONENT_PREFIX = "reward/"  # reward/<component>, e.g. reward/correctness
RESPONSE_LENGTH = "rollout/response_length"  # mean policy (sampled) tokens per trajectory
RESPONSE_LENGTH_MAX = "rollout/response_length_max"
TURNS = "rollout/turns"  # mean assistant turns per trajectory
TRUNCATED_FRAC = "rollout/truncated_frac"  # trajectories that stopped at the length limit
TOOL_CALLS_PER_TRAJ = "tools/calls_per_traj"
TOOL_CALLS_PREFIX = "tools/calls/"  # tools/calls/<tool>: mean calls of that tool per trajectory
TOOL_SUCCESS_RATE = "tools/success_rate"  # ok results / (results + malformed calls); absent without calls
TOOL_PARSE_ERROR_RATE = "tools/parse_error_rate"  # malformed calls / all calls
TOOL_SERVER_ERRORS = "tools/server_errors"  # calls that failed at an MCP or environment server, in the step
TOOL_SERVER_ERRORS_PREFIX = "tools/server_errors/"  # tools/server_errors/<server>: that server's failed calls
FILTERED_FRAC = "filter/filtered_frac"  # groups dropped by the filters

# LLM-judge rewards (the `judge` component records each call in trajectory.metadata[JUDGE_METADATA]).
JUDGE_METADATA = "judge"
JUDGE_CALLS = "reward/judge_calls"  # judge requests the step's rewards made, cache hits included
JUDGE_ERRORS = "reward/judge_errors"  # calls that scored error_score (timeout, HTTP, refusal, format)
JUDGE_CACHE_HITS = "reward/judge_cache_hits"  # answered from the run's cache (an identical request)
JUDGE_TOKENS = "reward/judge_tokens"  # prompt + completion tokens the judge reported, cache hits excluded
JUDGE_SECONDS = "reward/judge_s"  # summed time of the requests sent (they overlap: a batch runs concurrently)

# Update statistics (the loss functions return these; the loop adds grad norm).
LOSS_TOTAL = "loss/total"
LOSS_POLICY = "loss/policy"
LOSS_ENTROPY = "loss/entropy"  # mean entropy over policy tokens
LOSS_KL = "loss/kl"  # mean KL to the reference over policy tokens
LOSS_APPROX_KL = "loss/approx_kl"  # k3 KL between the sampling and the current policy
LOSS_CLIPFRAC_LOW = "loss/clipfrac_low"
LOSS_CLIPFRAC_HIGH = "loss/clipfrac_high"
LOSS_CLIPFRAC_DUAL = "loss/clipfrac_dual"
LOSS_VALUE = "loss/value"
LOSS_VALUE_CLIPFRAC = "loss/value_clipfrac"
LOSS_GRAD_NORM = "loss/grad_norm"
LOSS_TIS_WEIGHT = "loss/tis_weight"  # mean truncated-IS weight min(pi_old / pi_sampler, C) over policy tokens

# Throughput and time split (the loop).
TOKENS_PER_S = "perf/tokens_per_s"
TIME_GENERATION = "time/generation"
TIME_TOOLS = "time/tools"
TIME_UPDATE = "time/update"
TIME_STEP = "time/step"
TIME_ROLLOUT = "time/rollout"  # sampling, tools, rewards and filters of the step, refill rounds included
COMPLETIONS_PER_S = "perf/completions_per_s"  # sampled trajectories per second of the whole step

# Remote rollouts (RemoteRollouts, when rollout.backend is remote).
ROLLOUT_CHUNKS = "rollout/chunks"  # rollout jobs the step's rows were split into (last rollout round)
ROLLOUT_WORKERS = "rollout/workers"  # distinct workers that returned a job
ROLLOUT_STRAGGLER_S = "rollout/straggler_s"  # the step's wait on its slowest worker once the queue ran dry
ROLLOUT_WEIGHT_VERSION = "rollout/weight_version"  # the published weight version the jobs sampled from
ROLLOUT_STALENESS = "rollout/staleness"  # policy updates between that version and the step's update
ROLLOUT_RESENT = "rollout/resent"  # jobs sent again (their worker died, timed out or failed them)
ROLLOUT_PUBLISH_S = "rollout/publish_s"  # publishing the policy's weights for this step
ROLLOUT_JOB_S_MEDIAN = "rollout/job_s_median"  # a job's time on its worker, weight loading included
ROLLOUT_DISPATCH_S = "rollout/dispatch_s"  # from sending the jobs to the last result

# Train-inference mismatch: |sampler log-prob - trainer log-prob| of the sampled tokens, before the update.
LOGPROB_MISMATCH_MEAN = "rollout/logprob_mismatch_mean"  # mean over policy tokens
LOGPROB_MISMATCH_MAX = "rollout/logprob_mismatch_max"  # the largest of the step

# The update's inputs (the loop).
TRAIN_TRAJECTORIES = "train/trajectories"  # trajectories that reached the update, after the filters
TRAIN_LR = "train/lr"  # learning rate after the step's scheduler update
ADVANTAGE_MEAN_ABS = "advantage/mean_abs"  # mean |advantage| over policy tokens

# The SFT warm start (sft_train's on_step callback, a sink's log_sft), numbered by SFT step; not RL metrics.
SFT_LOSS = "sft/loss"
SFT_GRAD_NORM = "sft/grad_norm"
SFT_LR = "sft/lr"
SFT_PROGRESS = "sft/progress"  # SFT steps done / SFT steps planned

STANDARD_KEYS = (
    REWARD_MEAN,
    REWARD_STD,
    REWARD_GROUP_STD_MEAN,
    REWARD_ZERO_VARIANCE_FRAC,
    RESPONSE_LENGTH,
    RESPONSE_LENGTH_MAX,
    TURNS,
    TRUNCATED_FRAC,
    TOOL_CALLS_PER_TRAJ,
    TOOL_SUCCESS_RATE,
    TOOL_PARSE_ERROR_RATE,
    FILTERED_FRAC,
    LOSS_TOTAL,
    LOSS_POLICY,
    LOSS_ENTROPY,
    LOSS_KL,
    LOSS_APPROX_KL,
    LOSS_CLIPFRAC_LOW,
    LOSS_CLIPFRAC_HIGH,
    LOSS_CLIPFRAC_DUAL,
    LOSS_VALUE,
    LOSS_VALUE_CLIPFRAC,
    LOSS_GRAD_NORM,
    TOKENS_PER_S,
    TIME_GENERATION,
    TIME_TOOLS,
    TIME_UPDATE,
    TIME_STEP,
    TIME_ROLLOUT,
    COMPLETIONS_PER_S,
    TRAIN_TRAJECTORIES,
    TRAIN_LR,
    ADVANTAGE_MEAN_ABS,
)


_REWARD_SUMMARIES = {REWARD_MEAN, REWARD_STD, REWARD_GROUP_STD_MEAN, REWARD_ZERO_VARIANCE_FRAC}


def reward_component_key(component: str) -> str:
    """reward/<component>; a component named like a summary (e.g. "mean") goes to reward/component/<name>."""
    key = f"{REWARD_COMPONENT_PREFIX}{component}"
    return f"{REWARD_COMPONENT_PREFIX}component/{component}" if key in _REWARD_SUMMARIES else key


UNNAMED_TOOL = "(no name)"  # a malformed call whose block named no tool


def tool_calls_key(tool: str) -> str:
    return f"{TOOL_CALLS_PREFIX}{tool or UNNAMED_TOOL}"


def server_errors_key(server: str) -> str:
    return f"{TOOL_SERVER_ERRORS_PREFIX}{server}"
