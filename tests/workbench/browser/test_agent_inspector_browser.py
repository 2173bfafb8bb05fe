"""In chromium, an agent episode in the trajectory inspector: its failure reason and result are read at a
glance, the program's stdout and stderr open from collapsed sections, and the turns are still there."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from trainers.config import RunConfig
from trainers.trajectory import ToolCall, ToolResult, Trajectory, Turn
from workbench.runs.models import Run
from workbench.runs.telemetry.ingest import trajectories_ingest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def agent_episode() -> Trajectory:
    call = ToolCall("calculator", {"expression": "17*3"})
    turns = [
        Turn("prompt", "<|im_start|>user\nWhat is 17*3?<|im_end|>\n", [1, 2, 3], [0, 0, 0]),
        Turn("assistant", '<tool_call>{"name": "calculator"}</tool_call>', [4, 5], [1, 1], [-0.1, -0.2],
             tool_calls=[call], tool_results=[ToolResult("calculator", True, "51")]),
        Turn("tool", "<tool_response>51</tool_response>", [6], [0]),
        Turn("assistant", "\\boxed{51}", [7], [1], [-0.3]),
    ]  # fmt: skip
    log = {"status": "error", "error": "TimeoutError: the tool server did not answer", "elapsed_s": 3.2,
           "stdout": "asked the policy\ncalled calculator",
           "stderr": "Traceback (most recent call last):\n  ..."}  # fmt: skip
    metadata = {"failure": "crash", "agent": {"episode": "q1-0-ab12", "segment": 0, "requests": 2,
                                              "result": None, "log": log}}  # fmt: skip
    return Trajectory("q1/0", "q1", 0, turns, final_answer="51", metadata=metadata)


def test_an_agent_episode_reads_in_the_inspector(page, login, member, team, screenshot):
    run = Run.objects.create(team=team, created_by=member, name="agent-run", status="succeeded",
                             config=RunConfig().model_dump(mode="json"))  # fmt: skip
    trajectories_ingest(run_id=run.pk, batches={1: [agent_episode()]})
    login(member)
    page.goto(reverse("runs:trajectory", args=[run.pk, run.trajectories.get().pk]))
    expect(page.get_by_text("failed: crash")).to_be_visible()
    stdout = page.locator("#agent-stdout")
    expect(stdout.get_by_text("called calculator")).to_be_hidden()
    stdout.locator("summary").click()
    expect(stdout.get_by_text("called calculator")).to_be_visible()
    expect(page.locator("ol.turns > li")).to_have_count(4)
    screenshot("agent-episode-inspector")
