"""A small read-only JSON API over tool schemas, scoped like the pages."""

from django.http import JsonResponse

from workbench.toolschemas import selectors


def tool_schema_list(request):
    items = selectors.tool_schema_list(user=request.user, team=None).select_related("team")
    body = [
        {"id": i.pk, "name": i.name, "team": i.team.name, "latest_version": i.latest_number} for i in items
    ]
    return JsonResponse({"tool_schemas": body})


def tool_schema_detail(request, pk: int):
    item = selectors.tool_schema_get(user=request.user, pk=pk)
    version = selectors.tool_schema_version_get(item=item, number=None)
    body = {
        "id": item.pk,
        "name": item.name,
        "team": item.team.name,
        "version": version.number,
        "spec": version.spec(),
        "implementation": version.implementation,
        "binding": version.binding(),
    }
    return JsonResponse(body)
