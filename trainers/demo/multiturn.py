"""The multi-turn demo recipe (RAGEN/StarPO, GiGPO): a tiny policy plays a grid game through its tool.

SFT on expert plays, of which a chosen fraction is deliberately imperfect (a move is replaced by a random
one, then the expert replans; or by a wasted one that changes nothing, such as a step into a wall), so
the SFT policy sampled at temperature 1 errs sometimes and RL has something to remove; optionally after
perfect plays alone (`sft_perfect_steps`), so that reading the level forms before the mistakes come in.
RL is an ordinary `RunConfig` run on the environment reward (GRPO or GiGPO). The policy is measured on
held-out levels (maps never trained on) greedily and at T=1, after SFT and after RL.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from trainers.config.loader import validate_config
from trainers.demo.progress import Progress, evaluation_numbers, rl_sink
from trainers.demo.settings import SettingsError, below, not_positive, not_shares, refuse, shared_problems
from trainers.envs.base import Environment
from trainers.metrics.keys import SFT_LOSS
from trainers.tools.toolset import Toolset
from trainers.trajectory import Trajectory

HELD_OUT_SEED = 1_000_000  # held-out levels use seeds from here on; training levels use 0, 1, 2, ...
# One layout in HELD_OUT_SHARE is held out. Small rooms repeat (the first 4096 Sokoban seeds make 1151
# distinct levels), so disjoint seeds alone put 83 of 100 "held-out" levels in the training set
HELD_OUT_SHARE = 5
# With one seed in five on either side by chance, this many in a row on the other side means the maps
# of this side have run out (a game with few distinct maps), not bad luck
SEEDS_WITHOUT_A_LEVEL = 10_000


@dataclass(frozen=True)
class Game:
    """What the recipe needs to know about one environment tool."""

    tool: str
    question: str
    level: dict[str, Any]  # generation params of every level (seeded per row)
    max_turns: int
    solve: Callable[[Environment], list[str] | None]  # an expert's shortest plan, None if unsolvable
    solved: Callable[[str], bool]  # is this rendered state a success?
    symbols: str = ""  # the grid's cell symbols: one token each in the demo tokenizer
    layout: Callable[[str], str] = str  # a start grid without its player: the map that the split keys on
    # the tool's config: `describe` (the surroundings line), `invalid_action_penalty` (RAGEN's format_penalty)
    tool_config: dict[str, Any] = field(default_factory=dict)
    server: str | None = None  # an environment server's URL: RL and evaluation play through it

    def binding(self) -> dict[str, Any]:
        """The in-process tool as a run config names it; experts and the level split play through this."""
        return {"name": self.tool, "config": dict(self.tool_config)}

    def rollout_binding(self) -> dict[str, Any]:
        """What RL and evaluation play through: the in-process tool, or with `server` the `env_server` tool
        shown to the policy exactly as the in-process one (name, description, action schema)."""
        if self.server is None:
            return self.binding()
        toolset = self.toolset()
        spec = toolset.specs()[0]["function"]
        config = {"url": self.server, "name": spec["name"], "description": spec["description"],
                  "parameters": spec["parameters"], "actions": list(toolset.environment.actions),
                  "invalid_action_penalty": toolset.environment.invalid_action_penalty}  # fmt: skip
        return {"name": "env_server", "config": config}

    def toolset(self, initial_state: dict[str, Any] | None = None) -> Toolset:
        return Toolset.build([self.binding()], initial_state=initial_state)


@dataclass
class MultiTurnSettings:
    env: str = "frozenlake"
    estimator: str = "gigpo"
    seed: int = 0
    # With 400 plays on unseen maps the 2x64 policy read 4x4 lakes on some seeds only (greedy held-out
    # success 0.43 on seed 2, RL +5 points); 2000 plays cover 667 maps, not 249
    n_experts: int = 2000
    imperfect: float = 0.5  # share of expert plays with mistakes in them
    slip: float = 0.3  # in an imperfect play, the chance that each move is replaced by a mistake
    mistake: str = "random"  # what replaces it: one of MISTAKES (see `mistaken_move`)
    hidden_size: int = 64
    num_layers: int = 2
    # At 3e-3 one SFT run in three read lakes poorly whatever the steps (greedy held-out success 0.50 on
    # seed 2 after 600 steps, 0.46 on seed 1 after 1000); 1e-3 for 1000 steps: 0.88-0.96 on seeds 0-2
    sft_steps: int = 1000
    # SFT curriculum: the first this many of `sft_steps` train on as many perfect plays (the reading of the
    # level forms undisturbed), the rest on the plays with mistakes; 0: all steps on the latter
    sft_perfect_steps: int = 0
    sft_lr: float = 1e-3
    rl_steps: int = 20
    rl_lr: float = 3e-4  # 1e-4 left FrozenLake flat in 10 steps
    kl_coef: float = 0.0
    prompts_per_step: int = 8
    samples_per_prompt: int = 8
    n_train_levels: int = 4096
    n_eval: int = 100  # held-out levels
    eval_samples: int = 2  # samples per held-out level at T=1
    threads: int | None = None

    def __post_init__(self) -> None:
        """Refuse impossible settings before any work (SFT takes minutes), naming each of them."""
        v = vars(self)
        found = below(v, ("n_experts", "hidden_size", "num_layers", "rl_steps", "prompts_per_step", "n_eval",
                          "eval_samples", "n_train_levels"), 1)  # fmt: skip
        found += below(v, ("samples_per_prompt",), 2)  # a level's plays are compared
        found += below(v, ("sft_steps",), 0)
        if self.sft_steps >= 0 and not 0 <= self.sft_perfect_steps <= self.sft_steps:
            found.append(f"sft_perfect_steps ({self.sft_perfect_steps}) must be between 0 and sft_steps "
                         f"({self.sft_steps})")  # fmt: skip
        found += not_shares(v, ("imperfect", "slip")) + not_positive(v, ("sft_lr", "rl_lr"))
        if self.mistake not in MISTAKES:
            found.append(f"unknown mistake {self.mistake!r}; use one of {', '.join(MISTAKES)}")
        refuse("multi-turn", found + shared_problems(v))


@dataclass
class MultiTurnReport:
    settings: dict[str, Any]
    before: dict[str, float]
    after: dict[str, float]
    sft_seconds: float
    rl_seconds: float
    curve: list[float] = field(default_factory=list)  # training success per RL step
    anchor_groups: list[float] = field(default_factory=list)  # GiGPO anchor-state groups per step

    def table(self) -> str:
        rows = [("held-out success (T=1)", "sampled/accuracy"),
                ("held-out success (greedy)", "greedy/accuracy"),
                ("moves per play (T=1)", "sampled/tool_calls_per_traj")]  # fmt: skip
        lines = [f"{'metric':<30}{'after SFT':>12}{'after RL':>12}{'change':>10}"]
        for label, key in rows:
            b, a = self.before.get(key, float("nan")), self.after.get(key, float("nan"))
            lines.append(f"{label:<30}{b:>12.3f}{a:>12.3f}{a - b:>+10.3f}")
        lines.append(f"wall time: SFT {self.sft_seconds:.0f} s + RL {self.rl_seconds:.0f} s")
        return "\n".join(lines)


def served(game: Game, url: str) -> Game:
    """`game` with RL and evaluation through the environment server at `url`, which must serve the game's
    environment with its config (SettingsError naming the command that would). The operator named the
    server on the command line: its host and port join this process's egress allowlist."""
    import os

    from trainers.net import ALLOW_ENV
    from trainers.tools.env_server import ServerFault, server_metadata

    where = urlsplit(url)
    os.environ[ALLOW_ENV] = ",".join(filter(None, [os.environ.get(ALLOW_ENV), where.netloc]))
    env_config = {k: v for k, v in game.tool_config.items() if k != "invalid_action_penalty"}
    start = (
        f"python -m trainers env-server {game.tool} --config '{json.dumps(env_config)}' --port {where.port}"
    )
    try:
        meta = server_metadata(url)
    except ServerFault as exc:
        raise SettingsError(f"--env-server {url}: {exc}; start one with: {start}") from None
    if meta.get("name") != game.tool or meta.get("config") != env_config:
        raise SettingsError(f"--env-server {url} serves {meta.get('name')} with {meta.get('config')}, not "
                            f"{game.tool} with {env_config}; start one with: {start}")  # fmt: skip
    return replace(game, server=url)


def level_rows(game: Game, name: str, count: int, *, held_out: bool = False) -> list[dict[str, Any]]:
    """`count` levels from one side of the split: training levels from seed 0 on, held-out ones from
    HELD_OUT_SEED on. `initial_state` fixes each level; a held-out map is never a training map."""
    first = HELD_OUT_SEED if held_out else 0
    rows: list[dict[str, Any]] = []
    seed = last_found = first
    while len(rows) < count:
        if seed - last_found > SEEDS_WITHOUT_A_LEVEL:
            side = "held-out" if held_out else "training"
            raise RuntimeError(f"{game.tool}: no {side} map in {SEEDS_WITHOUT_A_LEVEL} seeds in a row "
                               f"({len(rows)} of {count} levels found); too few distinct maps")  # fmt: skip
        initial_state = {**game.level, "seed": seed}
        if is_held_out(game, initial_state) == held_out:
            rows.append({"id": f"{name}{seed}", "question": game.question, "initial_state": initial_state})
            last_found = seed
        seed += 1
    return rows


def is_held_out(game: Game, initial_state: dict[str, Any]) -> bool:
    """Whether the level's map (its layout) falls in the held-out share (a stable hash, not the seed)."""
    start = game.toolset(initial_state).environment.grid()
    digest = hashlib.sha256(game.layout(start).encode()).digest()
    return int.from_bytes(digest[:8], "big") % HELD_OUT_SHARE == 0


MISTAKES = ("random", "wasted")


def mistaken_move(env: Environment, planned: str, mistake: str, rng: random.Random) -> str:
    """An imperfect expert's move instead of `planned`: "random" is any other move (the expert then
    replans from wherever it led); "wasted" is a move that leaves the state as it is (into a wall, or
    against a box that cannot move), so the play stays on the expert's path and only loses a turn. With
    no wasted move from here, the planned one."""
    if mistake == "random":
        return rng.choice([a for a in env.actions if a != planned])
    if mistake == "wasted":
        return rng.choice(wasted_moves(env) or [planned])
    raise ValueError(f"unknown mistake {mistake!r}; use one of {', '.join(MISTAKES)}")


def wasted_moves(env: Environment) -> list[str]:
    """The moves after which the state is the one before (tried on copies of `env`)."""
    here, wasted = env.state_hash(), []
    for action in env.actions:
        trial = copy.deepcopy(env)
        trial.step(action)
        if trial.state_hash() == here:
            wasted.append(action)
    return wasted


def expert_record(
    game: Game, row: dict[str, Any], rng: random.Random, slip: float, mistake: str = "random"
) -> dict[str, Any] | None:
    """One expert play of the row's level with the real tool's responses; each move is replaced by a
    mistake with probability `slip` (see `mistaken_move`). None if unsolvable or longer than the game's
    turns."""
    toolset = game.toolset(row["initial_state"])
    env, tool = toolset.environment, toolset.tools[game.tool]
    observation = env.observation()
    plan = game.solve(env)
    if not plan or len(plan) > game.max_turns:
        return None
    messages: list[dict[str, Any]] = [{"role": "user", "content": game.question}]
    while plan and not env.done and len(messages) < 1 + 2 * game.max_turns:
        action = mistaken_move(env, plan[0], mistake, rng) if rng.random() < slip else plan[0]
        call = {"name": game.tool, "arguments": {"action": action}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        result = asyncio.run(tool.invoke({"action": action}))
        messages.append({"role": "tool", "name": game.tool, "content": result.output})
        plan = game.solve(env) if not env.done else []
    return {"messages": messages, "observation": observation, "solved": game.solved(env.observation())}


def make_experts(game: Game, rows: list[dict[str, Any]], n: int, *, imperfect: float, slip: float,
                 mistake: str = "random", seed: int = 0) -> list[dict[str, Any]]:  # fmt: skip
    """`n` expert plays of training levels; a share `imperfect` of them err (see `expert_record`)."""
    rng, records = random.Random(seed), []
    for row in rows:
        if len(records) == n:
            break
        record = expert_record(game, row, rng, slip if rng.random() < imperfect else 0.0, mistake)
        if record is not None:
            records.append(record)
    return records


def success_judge(game: Game) -> Callable[[Trajectory], bool]:
    """A play succeeded if the last state it reached is solved."""

    def judge(traj: Trajectory) -> bool:
        states = [t.state for t in traj.turns if t.role == "assistant" and t.state]
        return bool(states) and game.solved(states[-1])

    return judge


def rl_config(
    game: Game, s: MultiTurnSettings, out: Path, model_dir: Path, train_path: Path,
    overrides: dict[str, Any] | None = None,
) -> Any:  # fmt: skip
    """StarPO-style run: env reward summed per play, GRPO or GiGPO advantages, a move per turn;
    `overrides` are merged into the config (a study's filters, schedule or detector)."""
    from trainers.config.presets import deep_merge

    return validate_config(deep_merge({
        "name": f"{game.tool}-{s.estimator}-seed{s.seed}",
        "seed": s.seed,
        "output_dir": str(out),
        "model": {"path": str(model_dir)},
        "template": {"name": "qwen_tool"},
        "tools": [game.rollout_binding()],
        "limits": limits(game),
        "sampling": {"temperature": 1.0},
        "rollout": {"prompts_per_step": s.prompts_per_step, "samples_per_prompt": s.samples_per_prompt},
        "reward": {"components": [{"name": "env"}]},
        "algorithm": {"estimator": s.estimator},
        "loss": {"kl": "k3" if s.kl_coef else "none", "kl_coef": s.kl_coef},
        "optimizer": {"lr": s.rl_lr},
        "training": {"steps": s.rl_steps},
        "checkpoint": {"every_steps": 100_000, "keep": 1},
        "data": {"train_path": str(train_path)},
    }, overrides or {}))  # fmt: skip


def limits(game: Game) -> dict[str, int]:
    return {"max_turns": game.max_turns, "max_tool_calls": game.max_turns, "max_new_tokens_per_turn": 32,
            "max_total_new_tokens": 32 * game.max_turns}  # fmt: skip


def held_out_eval(
    game: Game, model: Any, tokenizer: Any, rows: list[dict], s: MultiTurnSettings,
    progress: Progress | None = None, name: str = "evaluation",
) -> dict:  # fmt: skip
    from trainers.backends.hf import HFBackend
    from trainers.config.limits import RolloutLimits
    from trainers.rollout.engine import RolloutEngine
    from trainers.training.evaluate import Evaluator

    engine = RolloutEngine(
        HFBackend(model, tokenizer), "qwen_tool", [game.rollout_binding()], RolloutLimits(**limits(game))
    )
    evaluator = Evaluator(engine, rows, success_judge(game), samples=s.eval_samples)
    with (progress or Progress(enabled=False)).phase(name, evaluator.mode_count) as phase:
        evaluator.on_mode = lambda mode, metrics: phase.advance(**evaluation_numbers(mode, metrics))
        return evaluator.run(seed=10_000 + s.seed)


def anchor_groups_per_step(path: Path) -> list[float]:
    """GiGPO's anchor-state groups that formed (two or more moves from one state) at each RL step."""
    from trainers.training.sinks import read_jsonl

    members: dict[int, dict[str, int]] = {}
    for traj in read_jsonl(path) if path.exists() else []:
        step = members.setdefault(int(traj.get("step", 0)), {})
        for key in (traj.get("metadata") or {}).get("anchor_groups") or []:
            if key is not None:
                step[key] = step.get(key, 0) + 1
    return [float(sum(n > 1 for n in keys.values())) for _, keys in sorted(members.items())]


def success_per_step(game: Game, path: Path) -> list[float]:
    """Training success at each RL step: the share of plays whose last state is solved."""
    from trainers.training.sinks import read_jsonl

    plays: dict[int, list[bool]] = {}
    for traj in read_jsonl(path) if path.exists() else []:
        turns = traj.get("turns", [])
        states = [t["state"] for t in turns if t.get("role") == "assistant" and t.get("state")]
        plays.setdefault(int(traj.get("step", 0)), []).append(bool(states) and game.solved(states[-1]))
    return [sum(won) / len(won) for _, won in sorted(plays.items())]


@dataclass
class MultiTurnSFT:
    """The policy after SFT (also saved in out/sft), its evaluation and the RL inputs."""

    model: Any
    tokenizer: Any
    base: Path  # the untrained model directory (tokenizer, config)
    held_out: list[dict[str, Any]]
    train_path: Path
    before: dict[str, float]
    seconds: float
    checkpoint: Path  # out/sft: the SFT policy as saved

    def fresh(self) -> MultiTurnSFT:
        """The same SFT result with the policy reloaded from its checkpoint (RL trains `model` in place)."""
        from trainers.models.model_io import load_policy

        model, tokenizer = load_policy(self.checkpoint)
        return replace(self, model=model, tokenizer=tokenizer)


def multiturn_sft(
    game: Game, s: MultiTurnSettings, out: Path, progress: Progress | None = None
) -> MultiTurnSFT:
    """Experts, the tiny model, SFT and the held-out evaluation of the SFT policy."""
    import torch

    from trainers.demo.model import build_demo_model
    from trainers.models.model_io import load_policy
    from trainers.templates import TEMPLATES
    from trainers.training.sft import render_experts, sft_train

    if s.threads:
        torch.set_num_threads(s.threads)
    out.mkdir(parents=True, exist_ok=True)
    # Levels are the same for every seed; the seed changes the experts' slips, the model, SFT and RL.
    train = level_rows(game, game.tool, s.n_train_levels)
    held_out = level_rows(game, "held", s.n_eval, held_out=True)
    records = make_experts(game, train, s.n_experts, imperfect=s.imperfect, slip=s.slip, mistake=s.mistake,
                           seed=s.seed)  # fmt: skip
    perfect = make_experts(game, train, s.n_experts, imperfect=0.0, slip=0.0) if s.sft_perfect_steps else []
    template, tools = TEMPLATES.get("qwen_tool")(), game.toolset().specs()
    base = build_demo_model(out / "base", perfect + records, template=template, tools=tools, seed=s.seed,
                            hidden_size=s.hidden_size, num_layers=s.num_layers, num_heads=2,
                            num_kv_heads=1, isolated=game.symbols)  # fmt: skip
    model, tokenizer = load_policy(base)
    seconds = 0.0
    parts = [(plays, steps) for plays, steps in ((perfect, s.sft_perfect_steps),
             (records, s.sft_steps - s.sft_perfect_steps)) if plays and steps > 0]  # fmt: skip
    progress = progress or Progress(enabled=False)
    with progress.phase("SFT", sum(steps for _, steps in parts)) as bar:
        for plays, steps in parts:
            examples = render_experts(plays, template=template, tokenizer=tokenizer, tools=tools)
            seconds += sft_train(model, examples, pad_token_id=tokenizer.pad_token_id, steps=steps,
                                 batch_size=16, lr=s.sft_lr, seed=s.seed,
                                 on_step=lambda _, m: bar.advance(loss=m[SFT_LOSS])).seconds  # fmt: skip
    model.save_pretrained(out / "sft")
    tokenizer.save_pretrained(out / "sft")
    before = held_out_eval(game, model, tokenizer, held_out, s, progress, "evaluation after SFT")
    train_path = out / "train.jsonl"
    train_path.write_text("".join(json.dumps(r) + "\n" for r in train), encoding="utf-8")
    return MultiTurnSFT(model, tokenizer, base, held_out, train_path, before, seconds, out / "sft")


def multiturn_rl(
    game: Game, s: MultiTurnSettings, sft: MultiTurnSFT, out: Path, *,
    name: str | None = None, overrides: dict[str, Any] | None = None, progress: Progress | None = None,
) -> MultiTurnReport:  # fmt: skip
    """RL from the SFT policy (trained in place) with `s.estimator` in out/<name or estimator>, then the
    held-out evaluation."""
    from trainers.training.run import run_config

    progress = progress or Progress(enabled=False)
    run_dir = out / (name or s.estimator)
    config = rl_config(game, s, run_dir, sft.base, sft.train_path, overrides)
    start = time.perf_counter()
    with progress.phase("RL", config.training.steps) as phase:
        run_config(config, model=sft.model, tokenizer=sft.tokenizer, sink=rl_sink(run_dir, phase))
    rl_seconds = time.perf_counter() - start
    after = held_out_eval(game, sft.model, sft.tokenizer, sft.held_out, s, progress, "evaluation after RL")
    report = MultiTurnReport(
        asdict(s), sft.before, after, sft.seconds, rl_seconds,
        curve=success_per_step(game, run_dir / "trajectories.jsonl"),
        anchor_groups=anchor_groups_per_step(run_dir / "trajectories.jsonl"),
    )  # fmt: skip
    (run_dir / "report.json").write_text(json.dumps(asdict(report), indent=2), encoding="utf-8")
    return report


def run_multiturn_demo(
    game: Game, s: MultiTurnSettings, out_dir: str | Path, progress: Progress | None = None
) -> MultiTurnReport:
    """Experts, tiny model, SFT, held-out evaluation, RL, held-out evaluation; writes report.json.
    `progress` shows each phase (by default nothing is shown)."""
    out = Path(out_dir)
    return multiturn_rl(game, s, multiturn_sft(game, s, out, progress), out, progress=progress)
