"""Environment servers in the catalog, against a real one (`python -m trainers env-server frozenlake`):
saving asks the server for its actions and pins them, "try it" plays a step of a fresh episode, and a
server that does not answer (or that the operator did not allowlist) is refused on the URL field."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.exceptions import ValidationError

from tests.support.env_server import ServerProcess, env_server
from workbench.toolschemas import services
from workbench.toolschemas.models import Implementation
from workbench.toolschemas.services import ToolSchemaContent


@pytest.fixture(scope="module")
def lake() -> Iterator[ServerProcess]:
    with env_server("frozenlake", "--describe") as running:
        yield running


@pytest.fixture(autouse=True)
def allowlisted(lake: ServerProcess, settings) -> None:
    settings.WORKBENCH_EGRESS_ALLOW = [lake.url.removeprefix("http://")]


def content(url: str) -> ToolSchemaContent:
    return ToolSchemaContent(
        function_name="lake", description="Move on the frozen lake.", parameters={"type": "object"},
        implementation=Implementation.ENV_SERVER, url=url,
    )  # fmt: skip


def test_saving_pins_the_servers_actions_and_their_schema(team, member, lake):
    version = services.tool_schema_create(team=team, user=member, name="lake", content=content(lake.url))
    assert version.env_actions == ["up", "down", "left", "right"]
    assert version.parameters["properties"]["action"]["enum"] == ["up", "down", "left", "right"]
    binding = version.binding()
    assert binding["name"] == "env_server"
    assert (
        binding["config"] | {"url": lake.url, "name": "lake", "actions": version.env_actions}
        == binding["config"]
    )


def test_try_it_plays_a_step_of_a_fresh_episode(team, member, lake):
    version = services.tool_schema_create(team=team, user=member, name="lake", content=content(lake.url))
    result = services.tool_schema_try(version=version, arguments_text='{"action": "right"}')
    assert result.ok, result.error
    assert "reward:" in result.output and "done:" in result.output


def test_a_server_that_does_not_answer_is_refused_on_the_url(team, member, settings):
    with pytest.raises(ValidationError) as refused:
        services.tool_schema_create(
            team=team, user=member, name="gone", content=content("http://127.0.0.1:9")
        )
    assert "did not answer" in refused.value.message_dict["url"][0]


def test_a_server_the_operator_did_not_allowlist_is_refused(team, member, lake, settings):
    settings.WORKBENCH_EGRESS_ALLOW = []
    with pytest.raises(ValidationError) as refused:
        services.tool_schema_create(team=team, user=member, name="lake", content=content(lake.url))
    assert "did not answer" in refused.value.message_dict["url"][0]
    assert not services.ToolSchema.objects.filter(name="lake").exists()
