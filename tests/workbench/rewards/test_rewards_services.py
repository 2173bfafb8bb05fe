import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from tests.support.judge_server import judge_server
from workbench.catalog.services import version_diff
from workbench.rewards import definitions, services

COMPONENTS = [{"name": "correctness", "weight": 1.0}, {"name": "format", "weight": 0.5}]
ANSWER = "<think>12 * 7 = 84, plus 5.</think> The answer is \\boxed{89}."


def _create(team, user, components=COMPONENTS, name="correct+format"):
    return services.reward_definition_create(team=team, user=user, name=name, components=components)


def test_component_choices_come_from_the_trainers_registry():
    assert {"correctness", "format", "toolrl", "tool_n1", "torl", "otc", "overlong"} <= set(
        definitions.component_names()
    )
    correctness = next(c for c in definitions.component_reference() if c.name == "correctness")
    mode = next(p for p in correctness.params if p.name == "mode")
    assert (mode.kind, mode.default) == ("math | exact | numeric", "math")


def test_params_are_checked_by_the_components_pydantic_model():
    errors = definitions.component_errors(name="correctness", params={"mode": "fuzzy", "x": 1}, schedule=None)
    assert errors == {
        "params": ["mode: Input should be 'math', 'exact' or 'numeric'", "x: Extra inputs are not permitted"]
    }
    assert definitions.component_errors(name="nope", params={}, schedule=None)["name"][0].startswith(
        "unknown reward component 'nope'"
    )


def test_schedules_are_checked():
    bad = definitions.component_errors(
        name="format", params={}, schedule={"name": "step", "boundaries": [10]}
    )
    assert bad["schedule"][0].startswith("step.values: Field required")
    good = {"name": "toolrl_dynamic", "part": "format", "steps": 100}
    assert definitions.component_errors(name="format", params={}, schedule=good) == {}


def test_create_stores_the_validated_definition(team, member):
    version = _create(team, member)
    assert [c["name"] for c in version.components] == ["correctness", "format"]
    assert version.build().weights_at(0) == {"correctness": 1.0, "format": 0.5}


def test_duplicate_components_need_labels(team, member):
    with pytest.raises(ValidationError) as exc:
        _create(team, member, components=[{"name": "format"}, {"name": "format"}])
    assert "duplicate component keys ['format']" in exc.value.messages[0]


def test_empty_definition_and_duplicate_name(team, member):
    with pytest.raises(ValidationError, match="Add at least one component"):
        _create(team, member, components=[])
    _create(team, member)
    with pytest.raises(ValidationError) as exc:
        _create(team, member)
    assert "This team already has one with that name." in exc.value.messages


def test_viewer_cannot_create(team, viewer):
    with pytest.raises(PermissionDenied):
        _create(team, viewer)


def test_edit_creates_version_two_with_a_diff(team, member):
    first = _create(team, member)
    second = services.reward_definition_update(
        item=first.item, user=member, components=[{"name": "correctness", "weight": 2.0}], note="no format"
    )
    first.refresh_from_db()
    assert (first.number, second.number, len(first.components)) == (1, 2, 2)
    lines = {d.text for d in version_diff(old_text=first.canonical_text(), new_text=second.canonical_text())}
    assert '+        "weight": 2.0' in lines and '-        "name": "format",' in lines


def test_sample_scores_each_component_and_the_total(team, member):
    version = _create(team, member)
    score = services.reward_definition_test(
        version=version, text=ANSWER, ground_truth={"answer": "89"}, template="qwen_tool"
    )
    assert (score.components, score.total, score.error) == ({"correctness": 1.0, "format": 1.0}, 1.5, None)
    wrong = services.reward_definition_test(
        version=version, text="\\boxed{90}", ground_truth={"answer": "89"}, template="qwen_tool"
    )
    assert (wrong.components, wrong.total) == ({"correctness": 0.0, "format": 0.0}, 0.0)


def test_sample_with_a_schedule_uses_the_step(team, member):
    schedule = {"name": "linear", "start": 0.0, "end": 1.0, "steps": 10}
    version = _create(team, member, components=[{"name": "correctness", "schedule": schedule}])
    score = services.reward_definition_test(
        version=version, text="\\boxed{89}", ground_truth={"answer": "89"}, template="qwen_tool", step=5
    )
    assert (score.weights, score.total) == ({"correctness": 0.5}, 0.5)


def test_sample_with_a_judge_asks_the_registered_judge_within_the_allowlist(
    team, member, monkeypatch, settings
):
    with judge_server(lambda body: "SCORE: 6") as server:
        server.register(monkeypatch)
        version = _create(team, member, components=[{"name": "judge", "params": {"judge": "local"}}])
        sample = {"text": ANSWER, "ground_truth": {"answer": "89", "question": "12 * 7 + 5?"}}
        settings.WORKBENCH_EGRESS_ALLOW = [server.url.removeprefix("http://").removesuffix("/v1")]
        score = services.reward_definition_test(version=version, template="qwen_tool", **sample)
        assert (score.components, score.total, score.error, score.notes) == ({"judge": 0.6}, 0.6, None, [])
        assert "12 * 7 + 5?" in server.requests[0]["messages"][1]["content"]
        settings.WORKBENCH_EGRESS_ALLOW = []  # the web process's setting, not the environment's, applies
        refused = services.reward_definition_test(version=version, template="qwen_tool", **sample)
        assert refused.components == {"judge": 0.0} and "unreachable" in refused.notes[0]
        assert len(server.requests) == 1
    monkeypatch.delenv("WORKBENCH_JUDGES")
    gone = services.reward_definition_test(version=version, template="qwen_tool", **sample)
    assert "no judge named 'local' is registered" in gone.error
