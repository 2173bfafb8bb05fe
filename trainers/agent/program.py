"""Agent programs: a team's own agent code, run in the sandbox against its episode's session.

A program is a Python file with a top-level `run(task: dict, client) -> dict | None`. `task` is the dataset
row without its reference answer, plus `episode_id` (for posting a reward). `client` is an
`openai.OpenAI` client whose only reachable server is the episode's session on the agent endpoint
(a Unix socket bound into the sandbox; no other network). What `run` returns is kept with the episode
(its "answer", if any, is the trajectory's final answer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from trainers.config.agent import ENTRY_POINT, AgentConfig, check_program

# Its last line is an assignment: the sandbox prints the value of a final bare expression, which would
# land in the program's stdout.
RUNNER = """\
import json as _json

import httpx as _httpx
import openai as _openai

_http = _httpx.Client(
    transport=_httpx.HTTPTransport(uds={socket!r}, verify=False),  # plain HTTP over the socket: no CAs
    base_url="http://agent/v1",
    verify=False,
    headers={{"Authorization": "Bearer " + {key!r}}},
    timeout={timeout!r},
)
client = _openai.OpenAI(base_url="http://agent/v1", api_key={key!r}, http_client=_http, max_retries=0)
_program = {{"__name__": "agent_program"}}
exec(compile({source!r}, {filename!r}, "exec"), _program)
_result = _program[{entry!r}](_json.loads({task!r}), client)
_result = _json.loads(_json.dumps(_result, default=str))
_posted = _http.post("/episodes/{episode}/result", json={{"result": _result}})
"""


@dataclass(frozen=True)
class AgentProgram:
    """The source of one agent program and the name its tracebacks show."""

    source: str
    filename: str = "agent_program.py"

    @classmethod
    def from_config(cls, config: AgentConfig) -> AgentProgram:
        """The program `rollout.agent` names, checked (trainers.config.agent.check_program)."""
        source, filename = config.read()
        check_program(source, filename)
        return cls(source, filename)

    def runner(self, task: dict, *, socket: str, key: str, episode: str, timeout_s: float) -> str:
        """The sandbox snippet that runs this program on `task` against the session at `socket`."""
        return RUNNER.format(
            socket=socket,
            key=key,
            timeout=timeout_s,
            source=self.source,
            filename=self.filename,
            entry=ENTRY_POINT,
            task=json.dumps(task, default=str),
            episode=episode,
        )
