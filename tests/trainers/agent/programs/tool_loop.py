"""A plain tool loop that posts a reward: calls until the policy answers, then posts 0.5."""

import json

TOOLS = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]


def run(task, client):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": task["question"]}]
    for _ in range(5):
        message = (
            client.chat.completions.create(model="policy", messages=messages, tools=TOOLS).choices[0].message
        )
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            expression = json.loads(call.function.arguments)["expression"]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": f"= {expression}"})
    client.post(f"/episodes/{task['episode_id']}/reward", body={"reward": 0.5}, cast_to=object)
    print("turns:", len(messages))
    return {"turns": len(messages)}
