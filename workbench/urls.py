"""Root URLs: accounts and status at the top, one prefix per catalog app."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("workbench.accounts.urls")),
    path("", include("workbench.jobs.urls")),
    path("catalog/", include("workbench.catalog.urls")),
    path("datasets/", include("workbench.datasets.urls")),
    path("tools/", include("workbench.toolschemas.urls")),
    path("templates/", include("workbench.prompts.urls")),
    path("rewards/", include("workbench.rewards.urls")),
    path("runs/", include("workbench.runs.urls")),
    path("admin/", admin.site.urls),
]
