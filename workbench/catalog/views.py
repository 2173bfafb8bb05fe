"""Generic pages every versioned catalog item gets: history, diff of two versions, delete with confirm."""

from django.apps import apps
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from workbench.accounts.access import get_scoped_or_404
from workbench.accounts.models import Role
from workbench.catalog import selectors, services
from workbench.catalog.models import CatalogItem


def _item_model(kind: str) -> type[CatalogItem]:
    try:
        model = apps.get_model(kind)
    except (LookupError, ValueError) as exc:
        raise Http404 from exc
    if not issubclass(model, CatalogItem):
        raise Http404
    return model


def _item(request, kind: str, pk: int, min_role: str = Role.VIEWER) -> CatalogItem:
    # Deleted items keep their history pages: a run may link to a pinned version of one.
    return get_scoped_or_404(_item_model(kind), request.user, pk, min_role=min_role)


def history(request, kind: str, pk: int):
    item = _item(request, kind, pk)
    versions = list(selectors.catalog_versions(item=item))
    pairs = [
        (newer, older, item.get_diff_url(older.number, newer.number))
        for newer, older in zip(versions, versions[1:], strict=False)
    ]
    context = {"item": item, "versions": versions, "pairs": pairs, "kind_label": item._meta.verbose_name}
    return render(request, "catalog/history.html", context)


def diff(request, kind: str, pk: int, a: int, b: int):
    item = _item(request, kind, pk)
    try:
        old, new = (selectors.catalog_version_get(item=item, number=n) for n in (a, b))
    except item.versions.model.DoesNotExist as exc:
        raise Http404 from exc
    lines = services.version_diff(old_text=old.canonical_text(), new_text=new.canonical_text())
    context = {"item": item, "old": old, "new": new, "lines": lines, "kind_label": item._meta.verbose_name}
    return render(request, "catalog/diff.html", context)


def delete(request, kind: str, pk: int):
    item = _item(request, kind, pk, min_role=Role.MEMBER)
    if item.is_deleted:
        raise Http404
    if request.method == "POST":
        services.catalog_item_soft_delete(item=item, user=request.user)
        messages.success(request, f"Deleted {item._meta.verbose_name} {item.name}.")
        target = reverse(item.list_url_name) if item.list_url_name else reverse("home")
        if request.htmx:
            return HttpResponse(status=204, headers={"HX-Redirect": target})
        return redirect(target)
    template = "catalog/_confirm_delete.html" if request.htmx else "catalog/confirm_delete.html"
    return render(request, template, {"item": item, "kind_label": item._meta.verbose_name})
