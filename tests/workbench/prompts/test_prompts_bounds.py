"""The template preview and template saves stay bounded, and the preview is for members only."""

import pytest

from trainers.bounded import Limits
from trainers.templates import jinja
from workbench.prompts import services
from workbench.prompts.models import PromptTemplateVersion

pytestmark = pytest.mark.timeout(300)  # before the bounds the nested loop rendered for days
NESTED_LOOP = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"


@pytest.fixture
def short_render(monkeypatch):
    """One CPU second per render: the shipped five only make these tests slower."""
    monkeypatch.setattr(jinja.RENDERER, "limits", Limits(cpu_s=1, wall_s=300, output_bytes=2 << 20))


@pytest.fixture
def template(team, member):
    return services.prompt_template_create(
        team=team, user=member, name="t", family="qwen_tool", source="Q: {{ question }}"
    ).item


def _preview(client, source: str, tokenizer: str = "tiny"):
    return client.post(
        "/templates/preview/", {"family": "qwen_tool", "source": source, "tokenizer": tokenizer}
    )


@pytest.mark.slow
def test_a_nested_range_loop_ends_with_the_bound_named(client_for, member, short_render):
    client = client_for(member)
    body = _preview(client, NESTED_LOOP).content.decode()
    assert "template render exceeded 1 s of CPU time" in body
    assert "Q: What is 12 * 7 + 5?" in _preview(client, "Q: {{ question }}").content.decode()


def test_a_ten_megabyte_repetition_is_refused_not_returned(client_for, member):
    response = _preview(client_for(member), "{{ 'x'*10**7 }}")
    body = response.content.decode()
    assert "template uses a forbidden operation: a repetition of more than 1048576 items" in body
    assert len(response.content) < 100_000


@pytest.mark.slow
def test_saving_a_runaway_template_is_refused(client_for, member, short_render):
    data = {"name": "loop", "family": "qwen_tool", "source": NESTED_LOOP, "description": "", "note": ""}
    body = client_for(member).post("/templates/new/", data).content.decode()
    assert "template render exceeded 1 s of CPU time" in body
    assert not PromptTemplateVersion.objects.exists()


def test_the_preview_needs_the_member_role(client_for, viewer, member, template):
    assert _preview(client_for(viewer), "Q: {{ question }}").status_code == 403
    assert 'id="preview-form"' not in client_for(viewer).get(template.get_absolute_url()).content.decode()
    assert _preview(client_for(member), "Q: {{ question }}").status_code == 200
    assert 'id="preview-form"' in client_for(member).get(template.get_absolute_url()).content.decode()


def test_a_tokenizer_path_outside_the_model_roots_is_refused(client_for, member, settings, tmp_path):
    settings.WORKBENCH_MODEL_ROOTS = [str(tmp_path / "models")]
    body = _preview(client_for(member), "Q", tokenizer="/etc").content.decode()
    assert f"/etc is not under a model root (WORKBENCH_MODEL_ROOTS: {tmp_path / 'models'})" in body
