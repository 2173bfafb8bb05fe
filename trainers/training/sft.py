"""SFT warm start on expert trajectories (ReTool's SFT-then-RL recipe), masked exactly like RL.

An expert file is JSONL; each line has `messages` (user, assistant with optional `tool_calls`, tool,
assistant...). Each message is rendered with the run's chat template and tokenized on its own, so the
result is a `Trajectory` with the same turns as a rollout: only assistant tokens have loss mask 1.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from trainers.metrics import keys
from trainers.templates.base import ChatTemplate
from trainers.training.optim import adamw
from trainers.training.policy import collate, forward_policy
from trainers.trajectory import ToolCall, ToolResult, Trajectory, Turn


def render_call(call: dict[str, Any]) -> str:
    """A call in the Qwen tool format, JSON in <tool_call> tags (OpenAI `function` wrappers accepted)."""
    parsed = _call(call)
    body = json.dumps({"name": parsed.name, "arguments": parsed.arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def _call(call: dict[str, Any]) -> ToolCall:
    fn = call.get("function", call)
    arguments = fn.get("arguments", {})
    return ToolCall(fn["name"], json.loads(arguments) if isinstance(arguments, str) else arguments)


def assistant_text(message: dict[str, Any]) -> str:
    """The text the policy should produce: content, then its calls (unless the content holds them)."""
    content = message.get("content") or ""
    calls = message.get("tool_calls") or []
    if not calls:
        return content
    rendered = "\n".join(render_call(c) for c in calls)
    return f"{content}\n{rendered}" if content else rendered


def _turn(role: str, text: str, tokenizer: Any, extra_ids: Sequence[int] = ()) -> Turn:
    ids = tokenizer.encode(text, add_special_tokens=False) + list(extra_ids)
    mask = 1 if role == "assistant" else 0
    return Turn(role=role, text=text, token_ids=ids, loss_mask=[mask] * len(ids))


def render_expert(
    messages: Sequence[dict[str, Any]],
    *,
    template: ChatTemplate,
    tokenizer: Any,
    tools: list[dict],
    uid: str = "expert",
    observation: str | None = None,
    prompt_source: str | None = None,
) -> Trajectory:
    """An expert conversation as a Trajectory: prompt, assistant turns (mask 1), glue and tool turns (0).

    `prompt_source` is the run's edited Jinja prompt, if any: the prompt must read as the rollout's."""
    system = [m for m in messages if m["role"] == "system"]
    rest = [m for m in messages if m["role"] != "system"]
    if not rest or rest[0]["role"] != "user":
        raise ValueError("an expert conversation starts with a user message")
    del system  # the template writes its own system prompt from the tool specs
    # `observation`: an environment's initial state, shown in the prompt as the rollout engine does
    prompt = template.render_prompt(
        question=rest[0]["content"], tools=tools, observation=observation, source=prompt_source,
        tokenizer=tokenizer,
    )  # fmt: skip
    turns = [_turn("prompt", prompt, tokenizer)]
    # A template whose turns run to the end of the message (several calls per turn) has the policy
    # sample the end-of-turn before the tool responses, as in a rollout; the glue then leaves it out.
    closes = template.stops_at_turn_end(tools)
    turn_end = tokenizer.encode(template.turn_end, add_special_tokens=False) if closes else []
    i = 1
    while i < len(rest):
        message = rest[i]
        if message["role"] != "assistant":
            raise ValueError(f"message {i}: expected an assistant message, got {message['role']!r}")
        text = assistant_text(message)
        last = i == len(rest) - 1
        # The final turn ends with end-of-sequence, which the policy must learn to sample.
        turns.append(_turn("assistant", text, tokenizer, [tokenizer.eos_token_id] if last else turn_end))
        turns[-1].tool_calls = [_call(c) for c in message.get("tool_calls") or []]
        i += 1
        results = []
        while i < len(rest) and rest[i]["role"] == "tool":
            results.append(ToolResult(name=rest[i].get("name", ""), ok=True, output=str(rest[i]["content"])))
            i += 1
        if results:
            glue = template.render_tool_responses(results, turn_closed=closes)
            turns.append(_turn("tool", glue, tokenizer))
            turns[-2].tool_results = results
        elif i < len(rest) and rest[i]["role"] == "user":
            turns.append(
                _turn("glue", template.render_notice(rest[i]["content"], turn_closed=closes), tokenizer)
            )
            i += 1
    return Trajectory(uid=uid, group_id=uid, turns=turns)


def load_experts(path: str | Path) -> list[dict[str, Any]]:
    """Expert records from JSONL; each has `messages` and optionally `answer` or other fields."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def sft_loss(model: torch.nn.Module, trajectories: Sequence[Trajectory], pad_token_id: int) -> torch.Tensor:
    """Token-mean cross-entropy over assistant tokens only (tool output and glue never count)."""
    batch = collate(trajectories, pad_token_id)
    out = forward_policy(model, batch, with_entropy=False)  # on the model's device; `batch` stays on the CPU
    return -out.logprobs.sum() / batch.response_mask.sum().clamp(min=1).to(out.logprobs.device)


@dataclass
class SFTResult:
    steps: int
    seconds: float
    final_loss: float


def sft_train(
    model: torch.nn.Module,
    examples: Sequence[Trajectory],
    *,
    pad_token_id: int,
    steps: int,
    batch_size: int = 32,
    lr: float = 3e-3,
    warmup_steps: int = 20,
    weight_decay: float = 0.0,
    decay: bool = True,
    max_seconds: float | None = None,
    seed: int = 0,
    should_stop: Callable[[], bool] | None = None,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> SFTResult:
    """AdamW, linear warmup, then cosine decay over `steps` (or constant); stops early at `max_seconds`."""
    rng = random.Random(seed)
    trainable = [p for p in model.parameters() if p.requires_grad]  # LoRA: the adapters alone
    optimizer = adamw(trainable, lr=lr, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: _warmup_cosine(s, warmup_steps, steps if decay else 0)
    )
    model.train()
    start, loss_value, step = time.perf_counter(), float("nan"), 0
    order: list[int] = []
    for step in range(1, steps + 1):
        if len(order) < batch_size:
            order += rng.sample(range(len(examples)), len(examples))  # epochs of reshuffled examples
        batch, order = [examples[j] for j in order[:batch_size]], order[batch_size:]
        loss = sft_loss(model, batch, pad_token_id)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        loss_value = loss.item()
        if on_step is not None:
            on_step(
                step,
                {
                    keys.SFT_LOSS: loss_value,
                    keys.SFT_GRAD_NORM: float(grad_norm),
                    keys.SFT_LR: scheduler.get_last_lr()[0],
                    keys.SFT_PROGRESS: step / steps,
                },
            )
        elapsed = time.perf_counter() - start
        if (max_seconds is not None and elapsed > max_seconds) or (should_stop is not None and should_stop()):
            break
    model.eval()
    return SFTResult(steps=step, seconds=time.perf_counter() - start, final_loss=loss_value)


def _warmup_cosine(step: int, warmup: int, total: int) -> float:
    import math

    if step < warmup:
        return (step + 1) / warmup
    if total <= 0:
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))  # decays to a tenth, not to zero


def render_experts(
    records: Iterable[dict[str, Any]],
    *,
    template: ChatTemplate,
    tokenizer: Any,
    tools: list[dict],
    prompt_source: str | None = None,
) -> list[Trajectory]:
    return [
        render_expert(
            r["messages"],
            template=template,
            tokenizer=tokenizer,
            tools=tools,
            uid=f"expert-{i}",
            observation=r.get("observation"),
            prompt_source=prompt_source,
        )  # fmt: skip
        for i, r in enumerate(records)
    ]


def run_template_and_tools(config: Any, tokenizer: Any = None) -> tuple[ChatTemplate, list[dict]]:
    """The run's chat template and its tools' specs, as its rollouts see them."""
    from trainers.templates import TEMPLATES
    from trainers.tools.toolset import Toolset

    template = TEMPLATES.get(config.template.name)(tokenizer=tokenizer)
    return template, Toolset.build([b.model_dump() for b in config.tools]).specs()


def sft_stage(
    config: Any,
    model: torch.nn.Module,
    tokenizer: Any,
    *,
    sink: Any = None,
    should_stop: Callable[[], bool] | None = None,
) -> SFTResult:
    """The RunConfig's SFT warm start: experts rendered with the run's template, prompt and tool specs.

    Each step's sft/* metrics (loss, grad norm, lr, progress) go to `sink.log_sft`; `should_stop` is
    polled after every step, so a run can be cancelled during SFT."""
    sft = config.sft
    if sft.data_path is None:
        raise ValueError("sft.data_path: a JSONL file of expert conversations is required")
    template, tools = run_template_and_tools(config, tokenizer)
    records = load_experts(sft.data_path)
    rendered = render_experts(
        records, template=template, tokenizer=tokenizer, tools=tools, prompt_source=config.template.source
    )
    examples = [_truncate(t, sft.max_length) for t in rendered]
    on_step = sink.log_sft if sink is not None else None
    if sft.phases is not None:
        return sft_curriculum(model, examples, sft, pad_token_id=tokenizer.pad_token_id, seed=config.seed,
                              should_stop=should_stop, on_step=on_step)  # fmt: skip
    steps = sft.epochs * -(-len(examples) // sft.batch_size)
    return sft_train(
        model, examples, pad_token_id=tokenizer.pad_token_id, steps=steps, batch_size=sft.batch_size,
        lr=sft.lr, warmup_steps=min(20, steps // 10 + 1), seed=config.seed, should_stop=should_stop,
        on_step=on_step,
    )  # fmt: skip


def calls_a_tool(trajectory: Trajectory) -> bool:
    """Whether an assistant turn of the (rendered expert) trajectory calls a tool."""
    return any(turn.tool_calls for turn in trajectory.response_turns)


def sft_curriculum(
    model: torch.nn.Module,
    examples: Sequence[Trajectory],
    sft: Any,
    *,
    pad_token_id: int,
    seed: int = 0,
    should_stop: Callable[[], bool] | None = None,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> SFTResult:
    """`sft.phases` in order, each `sft_train` at a constant lr (the calculator demo's recipe); steps are
    numbered across phases and `sft/progress` runs from 0 to 1 over all of them."""
    total = sum(phase.steps for phase in sft.phases)
    done, seconds, loss = 0, 0.0, float("nan")
    for phase in sft.phases:
        pool = [e for e in examples if calls_a_tool(e)] if phase.only_tool_calls else list(examples)
        if not pool:
            raise ValueError("sft.phases: a tool-only phase needs conversations that call a tool")
        result = sft_train(
            model, pool, pad_token_id=pad_token_id, steps=phase.steps, batch_size=sft.batch_size, lr=sft.lr,
            decay=False, seed=seed, should_stop=should_stop, on_step=_offset(on_step, done, total),
        )  # fmt: skip
        done, seconds, loss = done + result.steps, seconds + result.seconds, result.final_loss
        if result.steps < phase.steps:  # stopped
            break
    return SFTResult(steps=done, seconds=seconds, final_loss=loss)


def _offset(
    on_step: Callable[[int, dict[str, float]], None] | None, done: int, total: int
) -> Callable[[int, dict[str, float]], None] | None:
    """A phase's step callback renumbered after the `done` steps of earlier phases."""
    if on_step is None:
        return None

    def shifted(step: int, metrics: dict[str, float]) -> None:
        on_step(done + step, {**metrics, keys.SFT_PROGRESS: (done + step) / total})

    return shifted


def _truncate(trajectory: Trajectory, max_length: int) -> Trajectory:
    """Keep the first `max_length` tokens of prompt + response (the prompt itself is never cut)."""
    budget = max_length - len(trajectory.prompt_token_ids)
    turns = [trajectory.turns[0]]
    for turn in trajectory.response_turns:
        if budget <= 0:
            break
        keep = turn.token_ids[:budget]
        turns.append(replace(turn, token_ids=keep, loss_mask=turn.loss_mask[: len(keep)]))
        budget -= len(keep)
    return Trajectory(uid=trajectory.uid, group_id=trajectory.group_id, turns=turns)
