import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from workbench.agents import services
from workbench.agents.models import AgentProgram
from workbench.catalog.services import version_diff

PROGRAM = 'def run(task, client):\n    return {"answer": task["question"]}\n'


def _create(team, user, source=PROGRAM, name="echo"):
    return services.agent_program_create(team=team, user=user, name=name, source=source)


def test_create_keeps_the_source_as_version_one(team, member):
    version = _create(team, member)
    assert (version.number, version.source, version.item.name) == (1, PROGRAM, "echo")


def test_a_syntax_error_names_its_line_and_saves_nothing(team, member):
    with pytest.raises(ValidationError) as exc:
        _create(team, member, source="def run(task, client):\n    return (\n")
    assert exc.value.message_dict == {"source": ["agent_program.py: line 2: '(' was never closed"]}
    assert not AgentProgram.objects.exists()


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def main(task, client):\n    pass\n", "agent_program.py: no top-level function run(task, client)"),
        ("def run(task):\n    pass\n", "agent_program.py: run() must take (task, client)"),
    ],
)
def test_run_task_client_is_required(team, member, source, message):
    with pytest.raises(ValidationError) as exc:
        _create(team, member, source=source)
    assert exc.value.message_dict == {"source": [message]}


def test_duplicate_name_and_viewer(team, member, viewer):
    _create(team, member)
    with pytest.raises(ValidationError) as exc:
        _create(team, member)
    assert "This team already has one with that name." in exc.value.messages
    with pytest.raises(PermissionDenied):
        _create(team, viewer, name="other")


def test_edit_creates_version_two_with_a_diff_and_refuses_a_broken_one(team, member):
    first = _create(team, member)
    changed = PROGRAM.replace("question", "prompt")
    second = services.agent_program_update(item=first.item, user=member, source=changed, note="prompt")
    with pytest.raises(ValidationError):
        services.agent_program_update(item=first.item, user=member, source="run = 1\n")
    first.refresh_from_db()
    assert (first.number, second.number, first.source, first.item.versions.count()) == (1, 2, PROGRAM, 2)
    lines = [
        (d.kind, d.text)
        for d in version_diff(old_text=first.canonical_text(), new_text=second.canonical_text())
    ]
    assert ("del", '-    return {"answer": task["question"]}') in lines
    assert ("add", '+    return {"answer": task["prompt"]}') in lines
