"""Run and trajectory selectors: team scoping, inspector filters, keyset pagination."""

from __future__ import annotations

import pytest
from django.http import Http404

from workbench.runs.selectors import (
    TrajectoryFilters,
    anchor_state_groups,
    run_get,
    run_list,
    trajectory_get,
    trajectory_group,
    trajectory_list,
)
from workbench.runs.telemetry.ingest import trajectories_ingest


@pytest.fixture
def stored(run, make_trajectory):
    """Step 1: four samples of g0 with rewards 0..3; step 2: a failing python call and a wrong answer."""
    step1 = [make_trajectory("g0", i, reward=float(i)) for i in range(4)]
    step2 = [
        make_trajectory("g1", 0, reward=-1.0, tools=("python",), failed=1, correct=False),
        make_trajectory("g1", 1, reward=0.5, tools=(), text="I think 5"),
    ]
    trajectories_ingest(run_id=run.id, batches={1: step1, 2: step2})
    return run


def keys(page):
    return [(rec.step, rec.key) for rec in page.items]


def test_another_teams_run_is_404(member, other_run):
    with pytest.raises(Http404):
        run_get(user=member, pk=other_run.pk)


def test_run_list_shows_only_own_team(member, run, other_run):
    assert list(run_list(user=member)) == [run]


def test_trajectory_of_another_run_is_404(stored, other_run, make_trajectory):
    trajectories_ingest(run_id=other_run.id, batches={1: [make_trajectory("x", 0)]})
    foreign = other_run.trajectories.get()
    with pytest.raises(Http404):
        trajectory_get(run=stored, pk=foreign.pk)


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (TrajectoryFilters(step=1, reward_min=1.5), [(1, "g0/3"), (1, "g0/2")]),
        (TrajectoryFilters(correct=False), [(2, "g1/0")]),
        (TrajectoryFilters(tool="python"), [(2, "g1/0")]),
        (TrajectoryFilters(failed_call=True), [(2, "g1/0")]),
        (TrajectoryFilters(step=2, failed_call=False), [(2, "g1/1")]),
        (TrajectoryFilters(turns_min=2, reward_max=0.0), [(1, "g0/0"), (2, "g1/0")]),
        (TrajectoryFilters(group="g1", length_max=6), [(2, "g1/1"), (2, "g1/0")]),
    ],
)
def test_filters(stored, filters, expected):
    assert keys(trajectory_list(run=stored, filters=filters)) == expected


def test_ascending_sort(stored):
    page = trajectory_list(run=stored, filters=TrajectoryFilters(step=1), sort="reward")
    assert [rec.reward for rec in page.items] == [0.0, 1.0, 2.0, 3.0]


def test_keyset_pages_cover_everything_once(stored):
    seen, cursor = [], ""
    while True:
        page = trajectory_list(
            run=stored, filters=TrajectoryFilters(), sort="-reward", cursor=cursor, limit=2
        )
        seen += keys(page)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [(1, "g0/3"), (1, "g0/2"), (1, "g0/1"), (2, "g1/1"), (1, "g0/0"), (2, "g1/0")]


def test_tampered_cursor_restarts_at_first_page(stored):
    page = trajectory_list(run=stored, filters=TrajectoryFilters(), cursor="not-a-cursor", limit=1)
    assert keys(page) == [(1, "g0/3")]


def test_anchor_state_groups_gather_turns_from_the_same_state(run, make_trajectory):
    trajs = [make_trajectory("g0", i) for i in range(3)]
    for traj, states in zip(trajs, [("s0", "s1"), ("s0", "s2"), ("s0", "s1")], strict=True):
        for turn, state in zip(traj.assistant_turns, states, strict=True):
            turn.state_hash, turn.advantage = state, 0.5
    trajectories_ingest(run_id=run.id, batches={1: trajs})
    groups = anchor_state_groups(trajectory_group(run=run, step=1, group_id="g0"))
    assert [(state, [(s.sample_index, s.turn) for s in steps]) for state, steps in groups] == [
        ("s0", [(0, 1), (1, 1), (2, 1)]),
        ("s1", [(0, 2), (2, 2)]),
        ("s2", [(1, 2)]),
    ]
