"""Abstract models for versioned, team-owned catalog objects.

Rule: saving an edit creates a new immutable version; runs pin a version; lists show the latest;
history is browsable with a diff between versions. How an app uses it (datasets as the example):

    class Dataset(CatalogItem):                      # team, name, created_by, created_at, is_deleted
        list_url_name = "datasets:list"              # where the generic delete view returns to
        def get_absolute_url(self): return reverse("datasets:detail", args=[self.pk])

    class DatasetVersion(CatalogVersion):            # number, created_by, created_at, note
        item = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="versions")
        ... content fields ...
        class Meta(CatalogVersion.Meta):             # keep the (item, number) uniqueness
            pass
        def canonical_text(self) -> str: ...         # stable text rendering the diff compares

Write through the services (workbench.catalog.services):
    catalog_item_create(item=Dataset(team=..., name=...), version=DatasetVersion(...), user=...)  # v1
    catalog_version_create(item=..., version=DatasetVersion(...), user=...)  # an edit: next number, row lock
    catalog_item_soft_delete(item=..., user=...)
Read with the selectors: `catalog_items_for(model=Dataset, user=..., team=...)` (live items, latest first) and
`item.latest_version()`. Generic pages exist for every item with no wiring: `item.get_history_url()`,
`item.get_diff_url(a, b)` and `item.get_delete_url()` (htmx confirm); templates under
frontend/templates/catalog/. Querysets scope to the user's teams through workbench.accounts.access
(`team_field = "item__team"` is set for versions).
"""

from django.conf import settings
from django.db import models
from django.urls import reverse


class ImmutableVersionError(Exception):
    """A saved catalog version was about to change; make a new version instead."""


class CatalogItem(models.Model):
    team = models.ForeignKey("accounts.Team", on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=100)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Soft delete: a pinned version must stay readable after its item leaves the list.
    is_deleted = models.BooleanField(default=False)

    list_url_name: str = ""

    class Meta:
        abstract = True
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "name"],
                condition=models.Q(is_deleted=False),
                name="%(app_label)s_%(class)s_unique_live_name",
                violation_error_message="This team already has one with that name.",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def latest_version(self):
        return self.versions.order_by("-number").first()

    def _catalog_url(self, view: str, **kwargs) -> str:
        meta = self._meta
        return reverse(
            f"catalog:{view}", kwargs={"kind": f"{meta.app_label}.{meta.model_name}", "pk": self.pk, **kwargs}
        )

    def get_history_url(self) -> str:
        return self._catalog_url("history")

    def get_delete_url(self) -> str:
        return self._catalog_url("delete")

    def get_diff_url(self, a: int, b: int) -> str:
        return self._catalog_url("diff", a=a, b=b)


class CatalogVersion(models.Model):
    # Subclasses declare: item = models.ForeignKey(<Item>, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    note = models.CharField(max_length=200, blank=True, help_text="What changed in this version.")

    team_field = "item__team"

    class Meta:
        abstract = True
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(fields=["item", "number"], name="%(app_label)s_%(class)s_unique_number")
        ]

    def __str__(self) -> str:
        return f"{self.item} v{self.number}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ImmutableVersionError(f"{self} is saved and immutable; create a new version instead.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ImmutableVersionError(f"{self} may be pinned by a run; soft-delete its item instead.")

    def canonical_text(self) -> str:
        """Stable text rendering of the content (sorted JSON, template source, ...) that diffs compare."""
        raise NotImplementedError(f"{type(self).__name__} must define canonical_text()")
