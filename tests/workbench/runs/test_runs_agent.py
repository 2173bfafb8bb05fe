"""Runs with an agent program pinned: its source inlined into rollout.agent, the operator's bounds on its
episodes refused by field, the pin kept with the run, and the inspector's view of an agent episode."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from trainers.config import RunConfig
from workbench.agents.services import agent_program_create
from workbench.runs.models import Run
from workbench.runs.services import run_clone_initial, run_create
from workbench.runs.telemetry.ingest import trajectories_ingest

from .test_runs_views import form_post

PROGRAM = 'def run(task, client):\n    print("thinking")\n    return {"answer": "4"}\n'
AGENT = {"rollout": {"backend": "agent", "agent": {"wall_s": 30}}}


@pytest.fixture
def agent_version(team, member):
    return agent_program_create(team=team, user=member, name="echo", source=PROGRAM)


def create(team, member, prompts, config, **pins):
    return run_create(
        team=team,
        user=member,
        name="a",
        config=config,
        queue="cpu",
        dataset_version=prompts,
        launch=False,
        **pins,
    )


def test_the_pinned_source_is_inlined_beside_the_configs_limits(team, member, prompts, agent_version):
    run = create(team, member, prompts, AGENT, agent_version=agent_version)
    agent = run.config["rollout"]["agent"]
    assert (agent["source"], agent["program"], agent["wall_s"]) == (PROGRAM, None, 30)
    assert run.agent_version == agent_version
    assert run_clone_initial(run=run)["agent_version"] == agent_version.pk


def test_a_pin_on_a_run_that_is_not_an_agent_run_is_refused(team, member, prompts, agent_version):
    with pytest.raises(ValidationError) as exc:
        create(team, member, prompts, {}, agent_version=agent_version)
    assert exc.value.message_dict["agent_version"] == [
        "The rollout backend is local: set rollout.backend to agent to play each episode with echo v1, or"
        " clear this pin."
    ]


def test_the_operators_bounds_are_refused_by_field(settings, team, member, prompts, agent_version):
    settings.WORKBENCH_AGENT_MAX_MEMORY_MB, settings.WORKBENCH_AGENT_MAX_CONCURRENCY = 2048, 4
    config = {
        "rollout": {
            "backend": "agent",
            "agent": {"wall_s": 400, "memory_mb": 3000, "max_context_tokens": 65536},
        }
    }
    with pytest.raises(ValidationError) as exc:
        create(team, member, prompts, config, agent_version=agent_version)
    assert exc.value.message_dict == {
        "rollout.agent.wall_s": ["400 is above the operator's maximum of 300 (WORKBENCH_AGENT_MAX_WALL_S)"],
        "rollout.agent.memory_mb": [
            "3000 is above the operator's maximum of 2048 (WORKBENCH_AGENT_MAX_MEMORY_MB)"
        ],
        "rollout.agent.concurrency": [  # the default, 8, is checked too
            "8 is above the operator's maximum of 4 (WORKBENCH_AGENT_MAX_CONCURRENCY)"
        ],
        "rollout.agent.max_context_tokens": [
            "65536 is above the operator's maximum of 32768 (WORKBENCH_AGENT_MAX_CONTEXT_TOKENS)"
        ],
    }
    assert not Run.objects.exists()


def test_a_program_path_outside_the_data_roots_is_refused(settings, tmp_path, team, member, prompts):
    settings.WORKBENCH_DATA_ROOTS = [str(tmp_path / "data")]
    program = tmp_path / "agent.py"
    program.write_text(PROGRAM)
    config = {"rollout": {"backend": "agent", "agent": {"program": str(program)}}}
    with pytest.raises(ValidationError) as exc:
        create(team, member, prompts, config)
    assert list(exc.value.message_dict) == ["rollout.agent.program"]
    assert "outside what the operator allows" in exc.value.message_dict["rollout.agent.program"][0]


@pytest.mark.parametrize("where", ["absent.py", "broken.py", "unreadable.py"])
def test_refusing_a_program_path_says_nothing_of_the_file(settings, tmp_path, team, member, prompts, where):
    """The web process never reads a program path: whether the file exists, parses or is readable, a
    path outside the data roots gets the same error, and only that one."""
    settings.WORKBENCH_DATA_ROOTS = [str(tmp_path / "data")]
    (tmp_path / "broken.py").write_text("def run(task:\n")
    (tmp_path / "unreadable.py").write_text(PROGRAM)
    (tmp_path / "unreadable.py").chmod(0)
    config = {"rollout": {"backend": "agent", "agent": {"program": str(tmp_path / where)}}}
    with pytest.raises(ValidationError) as exc:
        create(team, member, prompts, config)
    [message] = exc.value.message_dict["rollout.agent.program"]
    assert list(exc.value.message_dict) == ["rollout.agent.program"]
    assert message.startswith(f"{str(tmp_path / where)!r} is outside what the operator allows: a file under")
    assert "line" not in message and "cannot read" not in message


def _agent_form(prompts, agent_version, wall_s) -> dict:
    config = RunConfig().model_dump(mode="json")
    config["rollout"]["backend"] = "agent"
    data = form_post(config, dataset_version=prompts.pk, agent_version=agent_version.pk)
    return {**data, "agent_wall_s": wall_s}


def test_the_form_launches_an_agent_run(client_for, member, prompts, agent_version):
    response = client_for(member).post(reverse("runs:create"), _agent_form(prompts, agent_version, "45"))
    run = Run.objects.get()
    assert response.status_code == 302
    assert (run.config["rollout"]["agent"]["source"], run.config["rollout"]["agent"]["wall_s"]) == (
        PROGRAM,
        45,
    )
    assert run.agent_version == agent_version


def test_the_form_names_the_wall_s_bound_on_its_field(client_for, member, prompts, agent_version):
    response = client_for(member).post(reverse("runs:create"), _agent_form(prompts, agent_version, "400"))
    assert response.status_code == 400
    assert response.context["form"].errors["agent_wall_s"] == [
        "rollout.agent.wall_s: 400 is above the operator's maximum of 300 (WORKBENCH_AGENT_MAX_WALL_S)"
    ]
    assert not Run.objects.exists()


def _agent_trajectory(make_trajectory, *, failure, stdout, result):
    traj = make_trajectory("g0", 0, reward=0.0)
    traj.metadata.update(
        failure=failure,
        agent={
            "episode": "g0-0-ab12",
            "segment": 0,
            "requests": 2,
            "result": result,
            "log": {
                "status": "error" if failure else "ok",
                "error": "ZeroDivisionError: division by zero" if failure else "",
                "stdout": stdout,
                "stderr": "Traceback (most recent call last):" if failure else "",
                "elapsed_s": 0.42,
            },
        },
    )
    return traj


def test_the_inspector_shows_the_failure_and_the_programs_log(client_for, member, run, make_trajectory):
    stdout = "<script>alert(1)</script> step 1"
    traj = _agent_trajectory(make_trajectory, failure="crash", stdout=stdout, result=None)
    trajectories_ingest(run_id=run.pk, batches={1: [traj]})
    url = reverse("runs:trajectory", args=[run.pk, run.trajectories.get().pk])
    body = client_for(member).get(url).content.decode()
    assert "failed: crash" in body and "ZeroDivisionError: division by zero" in body
    assert '<details class="agent-log" id="agent-stdout">' in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt; step 1" in body and "<script>alert(1)" not in body
    assert "Traceback (most recent call last):" in body
    assert "None: the program did not finish." in body
    assert '<ol class="turns">' in body  # the turn-by-turn view is still there


def test_the_inspector_shows_the_programs_result(client_for, member, run, make_trajectory):
    traj = _agent_trajectory(make_trajectory, failure=None, stdout="", result={"answer": "4"})
    trajectories_ingest(run_id=run.pk, batches={1: [traj, make_trajectory("g1", 0)]})
    agent, builtin = run.trajectories.order_by("group_id")
    client = client_for(member)
    body = client.get(reverse("runs:trajectory", args=[run.pk, agent.pk])).content.decode()
    assert '<dd id="agent-failure">ok</dd>' in body
    assert '<pre class="text" id="agent-result">{\n  &quot;answer&quot;: &quot;4&quot;\n}</pre>' in body
    assert 'stdout <span class="muted">(empty)</span>' in body
    body = client.get(reverse("runs:trajectory", args=[run.pk, builtin.pk])).content.decode()
    assert 'id="agent-episode"' not in body


def test_the_form_offers_only_the_teams_programs_and_shows_the_bound(
    client_for, member, outsider, other_team, prompts, agent_version
):
    theirs = agent_program_create(team=other_team, user=outsider, name="theirs", source=PROGRAM)
    client = client_for(member)
    body = client.get(reverse("runs:create")).content.decode()
    assert "echo v1" in body and "theirs v1" not in body
    assert "Operator bound: ≤ 300 (WORKBENCH_AGENT_MAX_WALL_S)" in body
    response = client.post(reverse("runs:create"), _agent_form(prompts, theirs, ""))
    assert "Select a valid choice" in response.context["form"].errors["agent_version"][0]
    assert not Run.objects.exists()
