"""The Qwen tool template: JSON Schema tools in the system, <think>, <tool_call> JSON, a boxed answer."""

from __future__ import annotations

from trainers.templates.base import TEMPLATES
from trainers.templates.chatml import ChatMLToolTemplate

QWEN_TOOL_PROMPT = """<|im_start|>system
In this environment you have access to a set of tools you can use to assist with the user query. \
You may perform multiple rounds of function calls. In each round, you can call one or more functions.

Here are available functions in JSONSchema format:
```json
{{ tools_json }}
```

In your response, you need to first think about the reasoning process in the mind and then conduct \
function calling to get the information or perform the actions if needed. The reasoning process and \
function calling are enclosed within <think> </think> and <tool_call> </tool_call> tags. The results of \
the function calls will be given back to you after execution, and you can continue to call functions \
until you get the final answer for the user's question. Finally, if you have got the answer, enclose it \
within \\boxed{} with latex format and do not continue to call functions.

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
<|im_start|>user
{{ question }}{% if observation %}

Current state:
{{ observation }}{% endif %}<|im_end|>
<|im_start|>assistant
"""


@TEMPLATES.register("qwen_tool")
class QwenToolTemplate(ChatMLToolTemplate):
    """Think first, then one or more calls per round (several tags or a JSON list); answer in `\\boxed{}`."""

    name = "qwen_tool"
    prompt_source = QWEN_TOOL_PROMPT
    format_pattern = r"(?:think (?:tool_call )+(?:tool_response )*)*think (?:(?:tool_call )+|answer )"
