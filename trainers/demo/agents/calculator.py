"""The calculator task as a plain OpenAI-client tool loop: an agent program (docs/agents.md).

`run(task, client)` is all the workbench asks of a program; it runs in the sandbox, and `client` reaches
only this episode's session of the policy under training.
"""

import ast
import json
import operator

TOOLS = [{"type": "function", "function": {
    "name": "calculator",
    "description": "Evaluate an arithmetic expression with + - * / // % ** and parentheses.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string",
                   "description": "e.g. (3 + 4.5) * -2 ** 3"}},
                   "required": ["expression"], "additionalProperties": False}}}]  # fmt: skip
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
             ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
             ast.USub: operator.neg, ast.UAdd: operator.pos}  # fmt: skip


def calculate(expression: str) -> str:
    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](value(node.operand))
        raise ValueError("only numbers and + - * / // % ** are allowed")

    try:
        return str(value(ast.parse(expression, mode="eval").body))
    except Exception as exc:  # the model sees the error, as with any tool
        return f"error: {exc}"


def run(task, client):
    messages = [{"role": "user", "content": task["question"]}]
    for _ in range(3):
        reply = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS, max_tokens=40)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return None  # the answer is the \boxed{} of this last message
        for call in message.tool_calls:
            expression = json.loads(call.function.arguments).get("expression", "")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": calculate(str(expression))})
    return None
