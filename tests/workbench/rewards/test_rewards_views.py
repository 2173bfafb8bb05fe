import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from workbench.datasets import services as dataset_services
from workbench.rewards import services
from workbench.rewards.models import RewardDefinitionVersion

XSS = "<script>alert(1)</script><b>bold</b>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;"


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path


@pytest.fixture
def reward(team, member):
    components = [{"name": "correctness"}, {"name": "format", "weight": 0.5}]
    return services.reward_definition_create(team=team, user=member, name="cf", components=components).item


def _formset(rows, initial=0):
    data = {"components-TOTAL_FORMS": str(len(rows)), "components-INITIAL_FORMS": str(initial)}
    data |= {"components-MIN_NUM_FORMS": "0", "components-MAX_NUM_FORMS": "1000"}
    for i, row in enumerate(rows):
        fields = {"name": "", "label": "", "weight": "1.0", "params": "{}", "schedule": "", **row}
        data |= {f"components-{i}-{key}": value for key, value in fields.items()}
    return data


def test_create_through_the_formset_skips_empty_rows(client_for, member):
    data = {"name": "r", "description": "", "note": ""}
    data |= _formset([{"name": "correctness", "params": '{"mode": "exact"}'}, {}])
    response = client_for(member).post("/rewards/new/", data)
    assert response.status_code == 302
    version = RewardDefinitionVersion.objects.get()
    assert [(c["name"], c["params"]) for c in version.components] == [("correctness", {"mode": "exact"})]


def test_param_errors_are_shown_on_the_field(client_for, member):
    data = {"name": "r", "description": "", "note": ""} | _formset(
        [{"name": "correctness", "params": '{"mode": 3}'}]
    )
    body = client_for(member).post("/rewards/new/", data).content.decode()
    assert "mode: Input should be &#x27;math&#x27;, &#x27;exact&#x27; or &#x27;numeric&#x27;" in body
    assert not RewardDefinitionVersion.objects.exists()


def test_edit_prefills_components_and_saves_version_two(client_for, member, reward):
    client = client_for(member)
    assert 'value="0.5"' in client.get(f"/rewards/{reward.pk}/edit/").content.decode()
    rows = [{"name": "correctness", "weight": "2"}, {"name": "format", "weight": "0.5", "DELETE": "on"}]
    data = {"description": "", "note": "drop format"} | _formset(rows, initial=2)
    assert client.post(f"/rewards/{reward.pk}/edit/", data).status_code == 302
    latest = reward.latest_version()
    assert (latest.number, [(c["name"], c["weight"]) for c in latest.components]) == (
        2,
        [("correctness", 2.0)],
    )


def test_sample_partial_scores_each_component(client_for, member, reward):
    sample = {"text": "<think>ok</think> \\boxed{4}", "template": "qwen_tool", "answer": "4", "step": "0"}
    body = client_for(member).post(f"/rewards/{reward.pk}/v/1/test/", sample).content.decode()
    assert 'id="score-total">1.5<' in body and "<code>correctness</code></td><td>1<" in body


def test_sample_ground_truth_from_a_dataset_row(client_for, team, member, reward):
    file = SimpleUploadedFile("d.jsonl", (json.dumps({"question": "2+2?", "answer": "4"}) + "\n").encode())
    upload = dataset_services.dataset_upload_create(team=team, user=member, name="d", file=file)
    version = dataset_services.dataset_upload_process(upload_id=upload.pk).version
    sample = {
        "text": "\\boxed{4}",
        "template": "qwen_tool",
        "dataset": version.pk,
        "row_index": "0",
        "step": "0",
    }
    body = client_for(member).post(f"/rewards/{reward.pk}/v/1/test/", sample).content.decode()
    assert "<code>correctness</code></td><td>1<" in body and "{&quot;answer&quot;: &quot;4&quot;}" in body


def test_user_text_is_escaped_everywhere(client_for, team, member):
    components = [{"name": "correctness", "label": XSS, "params": {"answer_key": XSS}}]
    item = services.reward_definition_create(
        team=team, user=member, name=XSS, components=components, description=XSS, note=XSS
    ).item
    client = client_for(member)
    for url in ("/rewards/", item.get_absolute_url(), item.get_history_url(), f"/rewards/{item.pk}/edit/"):
        body = client.get(url).content.decode()
        assert "<script>alert(1)" not in body and "<b>bold" not in body, url
        assert ESCAPED in body, url
    sample = {"text": XSS, "template": "qwen_tool", "answer": XSS, "step": "0"}
    body = client.post(f"/rewards/{item.pk}/v/1/test/", sample).content.decode()
    assert "<script>alert(1)" not in body


def test_viewer_reads_and_tests_but_cannot_write(client_for, viewer, reward):
    client = client_for(viewer)
    assert client.get(reward.get_absolute_url()).status_code == 200
    sample = {"text": "\\boxed{4}", "template": "qwen_tool", "answer": "4", "step": "0"}
    assert client.post(f"/rewards/{reward.pk}/v/1/test/", sample).status_code == 200
    assert client.get("/rewards/new/").status_code == 403
    assert client.get(f"/rewards/{reward.pk}/edit/").status_code == 403


def test_other_team_gets_404_by_url_and_api(client_for, outsider, reward):
    client = client_for(outsider)
    for url in (reward.get_absolute_url(), f"/rewards/{reward.pk}/edit/", f"/rewards/api/{reward.pk}/"):
        assert client.get(url).status_code == 404, url
    assert client.post(f"/rewards/{reward.pk}/v/1/test/", {"text": "x"}).status_code == 404
    assert client.get("/rewards/api/").json() == {"reward_definitions": []}


def test_api_detail(client_for, member, reward):
    body = client_for(member).get(f"/rewards/api/{reward.pk}/").json()
    assert [c["name"] for c in body["definition"]["components"]] == ["correctness", "format"]
