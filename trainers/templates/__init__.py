"""Chat templates, found by name in `TEMPLATES`; importing this package registers the built-ins."""

from trainers.templates import artist, hf_native, qwen_tool, tool_n1, torl
from trainers.templates.base import TEMPLATES, ChatTemplate, tool_name
from trainers.templates.jinja import TemplateRenderError, render_template_source

__all__ = [
    "TEMPLATES",
    "ChatTemplate",
    "TemplateRenderError",
    "artist",
    "hf_native",
    "qwen_tool",
    "render_template_source",
    "tool_n1",
    "tool_name",
    "torl",
]
