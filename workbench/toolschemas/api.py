"""A small read-only JSON API over tool schemas, scoped like the pages."""

from workbench.catalog import api as catalog_api
from workbench.toolschemas import selectors
from workbench.toolschemas.models import ToolSchemaVersion


def _version_fields(version: ToolSchemaVersion) -> dict:
    return {"spec": version.spec(), "implementation": version.implementation, "binding": version.binding()}


def tool_schema_list(request):
    items = selectors.tool_schema_list(user=request.user, team=None)
    return catalog_api.list_response(key="tool_schemas", items=items)


def tool_schema_detail(request, pk: int):
    item = selectors.tool_schema_get(user=request.user, pk=pk)
    version = selectors.tool_schema_version_get(item=item, number=None)
    return catalog_api.detail_response(item=item, version=version, version_fields=_version_fields)
