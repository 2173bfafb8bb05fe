"""Render a template for a preview or a check: the trainers family renders it in its Jinja sandbox."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from trainers.workbench_api import TEMPLATES, TemplateRenderError
from workbench.prompts.tokenizers import TokenizerError, count_tokens, load_tokenizer

SAMPLE_QUESTION = "What is 12 * 7 + 5?"
SAMPLE_TOOL = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
    },
}


def family_names() -> list[str]:
    return TEMPLATES.names()


def family_source(family: str) -> str:
    """The family's own prompt source, used as a preset."""
    return TEMPLATES.get(family).prompt_source


def observation_text(state: Any) -> str | None:
    """A row's initial environment state as the text the template shows."""
    if state is None or state == "":
        return None
    return state if isinstance(state, str) else json.dumps(state, ensure_ascii=False)


def render(
    *,
    family: str,
    source: str,
    question: str,
    tools: list[dict],
    observation: str | None,
    tokenizer: Any = None,
) -> str:
    """The prompt text; TemplateRenderError (with the line) for syntax errors and sandbox violations."""
    template = TEMPLATES.get(family)(tokenizer=tokenizer)
    return template.render_prompt(
        question=question, tools=tools, observation=observation, source=source or None, tokenizer=tokenizer
    )


def source_error(*, family: str, source: str) -> str | None:
    """Why the source cannot be saved (it fails on a sample question with one tool), or None."""
    if family not in TEMPLATES:
        return f"unknown template family {family!r}; known: {', '.join(family_names())}"
    try:
        render(family=family, source=source, question=SAMPLE_QUESTION, tools=[SAMPLE_TOOL], observation="S")
    except TemplateRenderError as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class Preview:
    text: str = ""
    tokens: int | None = None
    error: str | None = None


def preview(
    *, family: str, source: str, question: str, tools: list[dict], observation: str | None, tokenizer: str
) -> Preview:
    """Rendered prompt and its token count with the chosen tokenizer, or the error to show."""
    if family not in TEMPLATES:
        return Preview(error=f"unknown template family {family!r}")
    try:
        tok = load_tokenizer(tokenizer)
        text = render(
            family=family,
            source=source,
            question=question,
            tools=tools,
            observation=observation,
            tokenizer=tok,
        )
        return Preview(text=text, tokens=count_tokens(text, tokenizer))
    except (TemplateRenderError, TokenizerError) as exc:
        return Preview(error=str(exc))
