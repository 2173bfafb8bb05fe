"""A small read-only JSON API over reward definitions, scoped like the pages."""

from django.http import JsonResponse

from workbench.rewards import selectors


def reward_definition_list(request):
    items = selectors.reward_definition_list(user=request.user, team=None).select_related("team")
    body = [
        {"id": i.pk, "name": i.name, "team": i.team.name, "latest_version": i.latest_number} for i in items
    ]
    return JsonResponse({"reward_definitions": body})


def reward_definition_detail(request, pk: int):
    item = selectors.reward_definition_get(user=request.user, pk=pk)
    version = selectors.reward_definition_version_get(item=item, number=None)
    body = {
        "id": item.pk,
        "name": item.name,
        "team": item.team.name,
        "version": version.number,
        "description": version.description,
        "definition": version.definition,
    }
    return JsonResponse(body)
