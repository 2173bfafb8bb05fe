"""Everything the workbench (the Django project) may use of the trainers library, and nothing else.

The workbench imports trainers only through this module (tests/workbench/test_trainers_surface.py
enforces it), so the library can reorganise its internals without breaking the web application.
Importing it is cheap: nothing here imports torch or transformers (the web process never needs
them); `run_config` and `build_tiny_tokenizer` import them when called, on a worker.

Run configuration
    RunConfig, ConfigError, validate_config: the typed run configuration and its validation.
    PRESETS, preset_config: the paper recipes as named presets.
Training
    run_config(config, *, sink, should_stop, resume_from): train a config the one way the command line
    and the demos also use (SFT when configured, then RL); returns a RunResult.
    Sink: the interface a run's metrics, trajectories, evaluations, checkpoints and alerts go to.
    Phase: what a run reports it is doing between steps (`Sink.log_phase`: loading, sft, starting_rl,
    evaluating, saving, training).
    Trajectory: the record of one rollout, as sinks receive it.
Distributed rollouts
    RolloutJob, JobResult, JobFailed: a chunk of a step's rollouts and its result, as JSON-able data.
    RolloutWorkerState: a rollout worker's loaded policies; `.run(job)` rolls a job out.
    ResubmittingDispatcher: sends jobs, sends lost ones again, one result per job (Celery subclasses it).
Evaluation
    EvalConfig, eval_config_from_run(run_config, **fields): a model evaluated with a run config's template,
    tools, limits, sampling and reward on a dataset file, k samples per prompt. evaluate_config(config):
    (metrics, trajectories), as `python -m trainers eval` prints them; eval_metrics_finite(metrics): the
    metrics with NaN as None. evaluation_due(every_steps, step, *, last): whether a run evaluates its
    policy after a step, the rule its trainer follows too.
Agent programs
    check_agent_program(source, filename): raise AgentProgramError unless the source parses and defines a
    top-level `run(task, client)` in at most MAX_AGENT_PROGRAM_CHARS characters (what `rollout.agent`
    checks before a run starts).
Echo-trap detection
    EchoTrapConfig, EchoTrapDetector: RAGEN's collapse detector, replayed over stored series.
Prompt templates
    TEMPLATES (registry of template families), TemplateRenderError.
Rewards
    REWARDS (registry of components), RewardDefinition, Schedule (a component's weight schedule),
    describe_components (the components' descriptions and parameter schemas), score_text (score one
    response text with a definition).
Tools
    TOOLS (registry of built-in tools), Toolset (tools built from bindings, with their specs; call
    `await toolset.start()` before the first call and `close()` after, in one event loop: an `env_server`
    tool resets its episode in `start`).
    server_metadata(url): an environment server's `GET /metadata` through the egress guard (`name`,
    `actions`, `legend`, `config` for trainers' own servers), ServerFault when it cannot be read.
MCP servers
    McpServer (one operator-listed server: name, transport, address, open_to(team)), McpServerError
    (the list is malformed, or a server unknown or closed to a team), parse_servers(text) (servers by
    name from WORKBENCH_MCP_SERVERS's text), listed_servers(servers) (tools built and called in that
    context see those servers), MCP_POOL (the process's sessions: `await MCP_POOL.list_tools(server)`),
    McpCallError (a server down, slow or broken), mcp_schema_hash(input_schema) (what an import pins),
    mcp_function_name(tool_name) (a server's tool name as a function name).
Sandbox
    SandboxError (the sandbox failed or refused to start), sandbox_probe() (the isolation a pool
    started by this process gets: mode "root" | "userns" | "none" | "refused"), sandbox_insecure_allowed()
    (the operator set WORKBENCH_SANDBOX_INSECURE), SANDBOX_INSECURE_ENV (that variable's name).
    SandboxLimits: the per-call limits a python tool's `limits` config sets (defaults included).
Outbound requests
    EgressPolicy (public addresses plus the operator's allowlist), egress_policy(policy) (requests
    started in that context use it), EGRESS_ERROR (the one message of every refused or failed request).
Demo
    demo_expert_conversations(): the calculator demo's SFT conversations (a conversations dataset);
    demo_agent_program(): the calculator agent program's text (the demo catalog's agent program);
    DEMO_LEARNING_RUN, DEMO_COLLAPSE_RUN: the configs of the demo runs (SFT then GRPO that learns, and
    the recipe that collapses into an echo-trap alert).
Artifacts
    ArtifactStore: where run artifacts every worker reads live (a local directory or s3://...);
    ArtifactStore.from_url(url), put_dir/get_dir/exists/list_dirs/delete by '/'-separated key.
Tokenizers
    load_tokenizer(path): a local tokenizer directory, exactly as trained.
    build_tiny_tokenizer(): the bundled tiny model's tokenizer (trains a small BPE: seconds).
"""

from __future__ import annotations

from typing import Any

from trainers.config import PRESETS, ConfigError, RunConfig, preset_config, validate_config
from trainers.config.agent import MAX_PROGRAM_CHARS as MAX_AGENT_PROGRAM_CHARS
from trainers.config.agent import ProgramError as AgentProgramError
from trainers.config.agent import check_program as check_agent_program
from trainers.demo.catalog import COLLAPSE_RUN as DEMO_COLLAPSE_RUN
from trainers.demo.catalog import LEARNING_RUN as DEMO_LEARNING_RUN
from trainers.demo.catalog import agent_program_source as demo_agent_program
from trainers.demo.catalog import expert_conversations as demo_expert_conversations
from trainers.mcp.client import POOL as MCP_POOL
from trainers.mcp.client import McpCallError
from trainers.mcp.servers import McpServer, McpServerError, listed_servers, parse_servers
from trainers.mcp.servers import function_name as mcp_function_name
from trainers.mcp.servers import schema_hash as mcp_schema_hash
from trainers.metrics.echo_trap import EchoTrapConfig, EchoTrapDetector
from trainers.models.loading import load_tokenizer
from trainers.net import EGRESS_ERROR, EgressPolicy, egress_policy
from trainers.rewards import REWARDS, RewardDefinition, describe_components, score_text
from trainers.rewards.schedules import Schedule
from trainers.rollout.remote.dispatch import ResubmittingDispatcher
from trainers.rollout.remote.wire import JobFailed, JobResult, RolloutJob
from trainers.rollout.remote.worker import RolloutWorkerState
from trainers.sandbox.limits import SandboxLimits
from trainers.sandbox.pool import INSECURE_ENV as SANDBOX_INSECURE_ENV
from trainers.sandbox.pool import SandboxError
from trainers.sandbox.pool import insecure_allowed as sandbox_insecure_allowed
from trainers.sandbox.pool import probe as sandbox_probe
from trainers.storage import ArtifactStore
from trainers.templates import TEMPLATES, TemplateRenderError
from trainers.tools import TOOLS, Toolset
from trainers.tools.env_server import ServerFault, server_metadata
from trainers.training.eval_run import EvalConfig, eval_config_from_run, evaluate_config
from trainers.training.eval_run import finite as eval_metrics_finite
from trainers.training.eval_schedule import evaluation_due
from trainers.training.run import RunResult, run_config
from trainers.training.sinks import Phase, Sink
from trainers.trajectory import Trajectory


def build_tiny_tokenizer() -> Any:
    """The bundled tiny model's tokenizer, trained on its default corpus."""
    from trainers.models.tiny import build_tokenizer  # imports transformers: only when called

    return build_tokenizer()


__all__ = [
    "DEMO_COLLAPSE_RUN",
    "DEMO_LEARNING_RUN",
    "MCP_POOL",
    "PRESETS",
    "Phase",
    "REWARDS",
    "TEMPLATES",
    "TOOLS",
    "AgentProgramError",
    "MAX_AGENT_PROGRAM_CHARS",
    "ArtifactStore",
    "ConfigError",
    "EGRESS_ERROR",
    "EchoTrapConfig",
    "EchoTrapDetector",
    "EvalConfig",
    "JobFailed",
    "JobResult",
    "McpCallError",
    "McpServer",
    "McpServerError",
    "EgressPolicy",
    "ResubmittingDispatcher",
    "RewardDefinition",
    "RolloutJob",
    "RolloutWorkerState",
    "RunConfig",
    "RunResult",
    "SANDBOX_INSECURE_ENV",
    "SandboxError",
    "SandboxLimits",
    "Schedule",
    "ServerFault",
    "Sink",
    "TemplateRenderError",
    "Toolset",
    "Trajectory",
    "build_tiny_tokenizer",
    "check_agent_program",
    "demo_agent_program",
    "demo_expert_conversations",
    "describe_components",
    "server_metadata",
    "egress_policy",
    "eval_config_from_run",
    "eval_metrics_finite",
    "evaluate_config",
    "evaluation_due",
    "listed_servers",
    "load_tokenizer",
    "mcp_function_name",
    "mcp_schema_hash",
    "parse_servers",
    "preset_config",
    "run_config",
    "sandbox_insecure_allowed",
    "sandbox_probe",
    "score_text",
    "validate_config",
]
