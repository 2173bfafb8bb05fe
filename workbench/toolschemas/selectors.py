"""Reads for tool schemas, always scoped to the user's teams."""

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404

from trainers.workbench_api import McpServer, parse_servers
from workbench.accounts.access import get_scoped_or_404
from workbench.accounts.models import Role, Team
from workbench.catalog.selectors import catalog_items_for
from workbench.toolschemas.models import ToolSchema, ToolSchemaVersion


def tool_schema_list(*, user, team: Team | None) -> QuerySet[ToolSchema]:
    return catalog_items_for(model=ToolSchema, user=user, team=team)


def tool_schema_get(*, user, pk, min_role: str = Role.VIEWER) -> ToolSchema:
    return get_scoped_or_404(ToolSchema, user, pk, min_role=min_role)


def tool_schema_version_get(*, item: ToolSchema, number: int | None) -> ToolSchemaVersion:
    versions = item.versions.select_related("created_by")
    version = versions.filter(number=number).first() if number else versions.order_by("-number").first()
    if version is None:
        raise Http404
    return version


def mcp_servers() -> dict[str, McpServer]:
    """The operator's MCP servers by name (WORKBENCH_MCP_SERVERS); McpServerError when malformed."""
    return parse_servers(settings.WORKBENCH_MCP_SERVERS)


def mcp_servers_for(*, team: Team) -> list[McpServer]:
    """The servers open to `team`, by name."""
    return sorted((s for s in mcp_servers().values() if s.open_to(team.name)), key=lambda s: s.name)


def mcp_server_get(*, team: Team, name: str) -> McpServer:
    """The named server if it is open to `team`; 404 otherwise (another team's server is not shown)."""
    server = mcp_servers().get(name)
    if server is None or not server.open_to(team.name):
        raise Http404
    return server
