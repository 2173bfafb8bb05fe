"""One program, one behaviour per task["mode"]: how agents fail, branch, and what the sandbox allows."""

import os
import socket
import time


def ask(client, messages, **options):
    return client.chat.completions.create(model="policy", messages=messages, **options)


def run(task, client):
    mode = task["mode"]
    user = [{"role": "user", "content": task["question"]}]
    if mode == "crash":
        ask(client, user)
        raise RuntimeError("the agent's own bug")
    if mode == "hang":
        ask(client, user)
        time.sleep(600)
    if mode == "silent":
        return {"answer": "4"}
    if mode == "greedy":  # more requests than the turn limit allows
        while True:
            reply = ask(client, user).choices[0].message
            user = [*user, reply.model_dump(exclude_none=True), {"role": "user", "content": "again"}]
    if mode == "edit":  # one answer, then an edited first question: a new segment
        reply = ask(client, user).choices[0].message
        ask(client, [{"role": "user", "content": "another question"}, reply.model_dump(exclude_none=True),
                     {"role": "user", "content": "and?"}])  # fmt: skip
        return None
    if mode == "choices":
        replies = ask(client, user, n=3).choices
        return {"choices": len(replies)}
    if mode == "probe":  # what the sandbox lets a program reach
        reached = {}
        for name, target in [("internet", ("1.1.1.1", 80)), ("loopback", ("127.0.0.1", 5432))]:
            try:
                socket.create_connection(target, timeout=1)
                reached[name] = True
            except OSError:
                reached[name] = False
        reached["project"] = os.path.exists(os.path.join(task["project"], "trainers"))
        ask(client, user)
        return reached
    raise ValueError(mode)
