"""Job progress polling, queue checks (started from the status page, workbench/status) and health."""

from django.contrib.auth.decorators import login_not_required
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from workbench.accounts.access import get_scoped_or_404, team_role_required
from workbench.accounts.models import Role
from workbench.jobs import selectors, services
from workbench.jobs.models import JobProgress
from workbench.jobs.queues import QUEUE_NAMES
from workbench.jobs.tasks import queue_check


@require_POST
@team_role_required(Role.MEMBER)
def queue_check_start(request, queue: str):
    if queue not in QUEUE_NAMES:
        raise Http404
    job = services.job_create(
        team=request.team, kind="queue_check", message=f"Waiting for a worker on {queue}"
    )
    services.job_enqueue(job=job, task=queue_check, queue=queue)
    return render(request, "jobs/_progress.html", {"job": job})


def progress(request, pk):
    job = get_scoped_or_404(JobProgress, request.user, pk)
    response = render(request, "jobs/_progress.html", {"job": job})
    if job.is_finished:
        response["HX-Trigger"] = "job-finished"  # lets the page around the bar refresh what the job changed
    return response


@login_not_required
def health(request):
    database = selectors.database_status()
    return JsonResponse(
        {"ok": database["ok"], "database": database["ok"]}, status=200 if database["ok"] else 503
    )
