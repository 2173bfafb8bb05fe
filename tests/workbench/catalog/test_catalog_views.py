"""Generic catalog pages: history, diff, delete with confirmation (htmx and plain), all team scoped."""

import re

import pytest

from tests.workbench.catalog.test_catalog_versioning import calculator_version
from workbench.catalog import services
from workbench.toolschemas.models import ToolSchema


@pytest.fixture
def tool(team, member):
    version = services.catalog_item_create(
        item=ToolSchema(team=team, name="<b>calc</b>"), version=calculator_version(), user=member
    )
    services.catalog_version_create(
        item=version.item, version=calculator_version("Evaluate maths."), user=member
    )
    return version.item


def test_history_lists_every_version_with_a_diff_link(client_for, viewer, tool):
    body = client_for(viewer).get(tool.get_history_url()).content.decode()
    assert "v2" in body and "v1" in body
    assert tool.get_diff_url(1, 2) in body


def test_diff_shows_the_changed_lines(client_for, viewer, tool):
    body = client_for(viewer).get(tool.get_diff_url(1, 2)).content.decode()
    assert re.search(r'<span class="diff-del">-\s*&quot;description&quot;: &quot;Evaluate arithmetic\.', body)
    assert re.search(r'<span class="diff-add">\+\s*&quot;description&quot;: &quot;Evaluate maths\.', body)


def test_names_are_rendered_escaped(client_for, viewer, tool):
    body = client_for(viewer).get(tool.get_history_url()).content.decode()
    assert "<b>calc</b>" not in body
    assert "&lt;b&gt;calc&lt;/b&gt;" in body


def test_diff_of_a_missing_version_is_404(client_for, viewer, tool):
    assert client_for(viewer).get(tool.get_diff_url(1, 9)).status_code == 404


@pytest.mark.parametrize("page", ["get_history_url", "get_delete_url"])
def test_another_teams_item_pages_are_404(client_for, outsider, tool, page):
    assert client_for(outsider).get(getattr(tool, page)()).status_code == 404


def test_an_unknown_kind_is_404(client_for, member, tool):
    assert client_for(member).get(f"/catalog/accounts.team/{tool.team_id}/history/").status_code == 404


def test_a_viewer_cannot_delete(client_for, viewer, tool):
    assert client_for(viewer).post(tool.get_delete_url()).status_code == 403
    tool.refresh_from_db()
    assert not tool.is_deleted


def test_htmx_delete_asks_in_a_partial_then_redirects_the_page(client_for, member, tool):
    client = client_for(member)
    confirm = client.get(tool.get_delete_url(), headers={"HX-Request": "true"}).content.decode()
    assert 'id="confirm-delete"' in confirm and "<html" not in confirm
    response = client.post(tool.get_delete_url(), headers={"HX-Request": "true"})
    assert response["HX-Redirect"] == "/tools/"
    tool.refresh_from_db()
    assert tool.is_deleted


def test_plain_delete_confirms_on_a_page_and_redirects(client_for, member, tool):
    client = client_for(member)
    assert "<html" in client.get(tool.get_delete_url()).content.decode()
    assert client.post(tool.get_delete_url())["Location"] == "/tools/"


def test_history_of_a_deleted_item_stays_readable(client_for, member, tool):
    services.catalog_item_soft_delete(item=tool, user=member)
    assert client_for(member).get(tool.get_history_url()).status_code == 200
