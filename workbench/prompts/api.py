"""A small read-only JSON API over prompt templates, scoped like the pages."""

from django.http import JsonResponse

from workbench.prompts import selectors


def prompt_template_list(request):
    items = selectors.prompt_template_list(user=request.user, team=None).select_related("team")
    body = [
        {"id": i.pk, "name": i.name, "team": i.team.name, "latest_version": i.latest_number} for i in items
    ]
    return JsonResponse({"prompt_templates": body})


def prompt_template_detail(request, pk: int):
    item = selectors.prompt_template_get(user=request.user, pk=pk)
    version = selectors.prompt_template_version_get(item=item, number=None)
    body = {
        "id": item.pk,
        "name": item.name,
        "team": item.team.name,
        "version": version.number,
        "family": version.family,
        "source": version.source,
        "description": version.description,
    }
    return JsonResponse(body)
