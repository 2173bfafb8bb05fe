"""The bundled tiny policy of a run config (`model.path: tiny`), built once in the run directory.

`model.tiny` sets its size. With `tokenizer_corpus: sft_data` its tokenizer is trained on the run's SFT
conversations, rendered with the run's template and tools exactly where a rollout tokenizes separately,
and its merges cross spaces: the long tool system prompt becomes a few dozen tokens, which is what makes
SFT plus RL fit in minutes on two CPU cores.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainers.models.tiny import build_tiny_model
from trainers.templates.base import ChatTemplate
from trainers.training.sft import assistant_text, load_experts, run_template_and_tools
from trainers.trajectory import ToolResult

if TYPE_CHECKING:
    from trainers.config.schema import RunConfig


def conversation_corpus(
    records: Sequence[dict[str, Any]],
    *,
    template: ChatTemplate,
    tools: list[dict],
    prompt_source: str | None = None,
) -> list[str]:
    """Every piece of text the policy will see in these conversations, one piece per tokenized unit."""
    texts = []
    for record in records:
        messages = [m for m in record["messages"] if m["role"] != "system"]
        question, observation = messages[0]["content"], record.get("observation")
        texts.append(
            template.render_prompt(
                question=question, tools=tools, observation=observation, source=prompt_source
            )
        )
        for message in messages[1:]:
            if message["role"] == "assistant":
                texts.append(assistant_text(message))
            elif message["role"] == "tool":  # the glue around a response is one piece, as in a rollout
                result = ToolResult(name=message.get("name", ""), ok=True, output=str(message["content"]))
                texts.append(template.render_tool_responses([result]))
            else:
                texts.append(template.render_notice(str(message["content"])))
    return texts


def build_config_tiny_model(config: RunConfig, target: Path) -> Path:
    """Build and save the tiny model and tokenizer `config.model.tiny` describes into `target`."""
    tiny, corpus = config.model.tiny, None
    if tiny.tokenizer_corpus == "sft_data":
        if config.sft is None or config.sft.data_path is None:
            raise ValueError("model.tiny.tokenizer_corpus 'sft_data' needs sft.data_path")
        template, tools = run_template_and_tools(config)
        records = load_experts(config.sft.data_path)
        corpus = conversation_corpus(
            records, template=template, tools=tools, prompt_source=config.template.source
        )
    return build_tiny_model(
        target,
        hidden_size=tiny.hidden_size,
        num_layers=tiny.num_layers,
        num_heads=tiny.num_heads,
        num_kv_heads=tiny.num_kv_heads,
        seed=config.seed,
        corpus=corpus,
        split_words=corpus is None,
    )
