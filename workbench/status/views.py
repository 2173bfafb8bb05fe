"""The status page: the database, the broker and the live workers (jobs) with the GPUs they hold, and the
user's stranded and recovered runs (runs); htmx refreshes its panel every few seconds."""

from django.shortcuts import render

from trainers.workbench_api import SANDBOX_INSECURE_ENV, sandbox_insecure_allowed
from workbench.jobs import selectors
from workbench.jobs.queues import QUEUE_NAMES
from workbench.runs.execution.recovery_selectors import run_recoveries, runs_stranded


def status(request):
    return render(request, "status/status.html", _status_context(request))


def status_panel(request):
    """The part of the status page that htmx refreshes every few seconds."""
    return render(request, "status/_panel.html", _status_context(request))


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
