"""Root URLs: accounts and status at the top, one prefix per catalog app."""

from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path


@login_not_required
def favicon(request):
    """Pages that do not link base.html's icon (the admin's) make browsers ask for /favicon.ico."""
    return redirect(static("favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon),
    path("", include("workbench.home.urls")),
    path("", include("workbench.accounts.urls")),
    path("", include("workbench.status.urls")),
    path("", include("workbench.jobs.urls")),
    path("catalog/", include("workbench.catalog.urls")),
    path("datasets/", include("workbench.datasets.urls")),
    path("tools/", include("workbench.toolschemas.urls")),
    path("templates/", include("workbench.prompts.urls")),
    path("rewards/", include("workbench.rewards.urls")),
    path("agents/", include("workbench.agents.urls")),
    path("runs/", include("workbench.runs.urls")),
    path("evaluations/", include("workbench.evaluations.urls")),
    path("admin/", admin.site.urls),
]
