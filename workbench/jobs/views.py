"""Status page (database, broker, live workers, stranded and recovered runs), job progress polling, queue
checks, health."""

from django.contrib.auth.decorators import login_not_required
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from trainers.workbench_api import SANDBOX_INSECURE_ENV, sandbox_insecure_allowed
from workbench.accounts.access import get_scoped_or_404, team_role_required
from workbench.accounts.models import Role
from workbench.jobs import selectors, services
from workbench.jobs.models import JobProgress
from workbench.jobs.queues import QUEUE_NAMES
from workbench.jobs.tasks import queue_check
from workbench.runs.recovery_selectors import run_recoveries, runs_stranded


def status(request):
    return render(request, "jobs/status.html", _status_context(request))


def status_panel(request):
    """The part of the status page that htmx refreshes every few seconds."""
    return render(request, "jobs/_status_panel.html", _status_context(request))


# The database path or name, the broker URL (host, port, user) and connection errors (which quote
# hosts and paths) describe the deployment: staff see them, members see up or down.
DEPLOYMENT_DETAILS = ("name", "url", "error")


def _for(request, info: dict | None) -> dict | None:
    if info is None or request.user.is_staff:
        return info
    return {key: value for key, value in info.items() if key not in DEPLOYMENT_DETAILS}


def _status_context(request) -> dict:
    workers = selectors.workers_gpu_slots(workers=list(selectors.workers_online()), user=request.user)
    return {
        "database": _for(request, selectors.database_status()),
        "broker": _for(request, selectors.broker_status()),
        "workers": workers,
        "ping": _for(request, selectors.broker_ping()),
        "queue_names": QUEUE_NAMES,
        # The web server runs members' "try it" code too, so its own setting counts as much as a worker's.
        "sandbox_insecure": sandbox_insecure_allowed() or any(w.sandbox_insecure for w in workers),
        "sandbox_insecure_env": SANDBOX_INSECURE_ENV,
        "stranded_runs": runs_stranded(user=request.user),
        "recoveries": run_recoveries(user=request.user),
    }


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
