"""Fixtures for the runs app: runs owned by `team` (member) and `other_team` (outsider), trajectories.

team, other_team, member and outsider come from tests/workbench/conftest.py, which also sets Django up
(after this module is imported, so models are imported inside the fixtures).
"""

from __future__ import annotations

import pytest

from trainers.trajectory import ToolCall, ToolResult, Trajectory, Turn


@pytest.fixture(autouse=True)
def _media_root(settings, tmp_path):
    """Datasets the tests upload (the rows a run trains on) and the artifact store's checkpoints are kept
    in a temporary directory."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.ARTIFACTS_URL = str(tmp_path / "artifacts")


@pytest.fixture
def prompts(team, member):
    """A stored dataset of prompts of `team`: what a run launched from the form trains on."""
    from tests.workbench.support.datasets import prompts_version

    return prompts_version(team, member)


@pytest.fixture
def snapshot():
    """A valid config snapshot: the trainers defaults, as run_create stores them."""
    from trainers.config import RunConfig

    return RunConfig().model_dump(mode="json")


@pytest.fixture
def run(team, member, snapshot):
    from workbench.runs.models import Run

    return Run.objects.create(team=team, created_by=member, name="demo", config=snapshot)


@pytest.fixture
def other_run(other_team, outsider):
    from workbench.runs.models import Run

    return Run.objects.create(team=other_team, created_by=outsider, name="theirs", config={})


@pytest.fixture
def make_trajectory():
    return build_trajectory


def build_trajectory(
    group: str = "g0",
    sample: int = 0,
    reward: float = 1.0,
    *,
    tools: tuple[str, ...] = ("calculator",),
    failed: int = 0,
    text: str = "The answer is 4.",
    correct: bool | None = True,
) -> Trajectory:
    """A small two-turn tool-using trajectory with controllable filter columns."""
    calls = [ToolCall(name=name, arguments={"expression": "2+2"}) for name in tools]
    results = [ToolResult(name=c.name, ok=i >= failed, output="4") for i, c in enumerate(calls)]
    turns = [
        Turn(role="prompt", text="What is 2+2?", token_ids=[1, 2, 3], loss_mask=[0, 0, 0]),
        Turn(role="assistant", text="<tool_call>", token_ids=[4, 5], loss_mask=[1, 1], tool_calls=calls),
        Turn(role="tool", text="4", token_ids=[6], loss_mask=[0], tool_results=results),
        Turn(role="assistant", text=text, token_ids=[7, 8, 9], loss_mask=[1, 1, 1]),
    ]
    metadata = {} if correct is None else {"correct": correct}
    return Trajectory(
        uid=f"{group}-{sample}",
        group_id=group,
        sample_index=sample,
        turns=turns,
        final_answer=text,
        reward=reward,
        metadata=metadata,
        ground_truth={"answer": "4"},
    )
