"""The status page shows the sandbox mode each worker got, and warns when code may run without isolation."""

import pytest
from django.utils import timezone

from trainers.workbench_api import SANDBOX_INSECURE_ENV
from workbench.jobs import services
from workbench.jobs.heartbeat import Heartbeat, sandbox_report
from workbench.jobs.models import WorkerHeartbeat

ISOLATED = {"mode": "userns", "isolation": {"filesystem": True}, "insecure_allowed": False}
BARE = {"mode": "none", "error": "unshare: Operation not permitted", "insecure_allowed": True}
REFUSED = {"mode": "refused", "error": "the sandbox refuses to start: ...", "insecure_allowed": False}


@pytest.fixture(autouse=True)
def no_override(monkeypatch):
    monkeypatch.delenv(SANDBOX_INSECURE_ENV, raising=False)


def beat(hostname: str, sandbox: dict) -> None:
    services.worker_heartbeat_beat(
        hostname=hostname, queues=["cpu"], gpus=[], pid=1, started_at=timezone.now(), sandbox=sandbox
    )


def row(body: str, hostname: str) -> str:
    start = body.index(f'data-hostname="{hostname}"')
    return body[start : body.index("</tr>", start)]


def test_each_worker_row_shows_its_sandbox_mode(client_for, member):
    beat("isolated@a", ISOLATED)
    beat("refused@b", REFUSED)
    beat("new@c", {})  # the probe has not answered yet
    body = client_for(member).get("/status/panel/").content.decode()
    assert '<td class="sandbox"><span class="ok">userns</span></td>' in row(body, "isolated@a")
    refused = '<span class="bad" title="the sandbox refuses to start: ...">refused</span>'
    assert refused in row(body, "refused@b")
    assert '<span class="muted">checking</span>' in row(body, "new@c")
    assert 'id="sandbox-insecure"' not in body  # every worker isolates or refuses: nothing runs bare


def test_a_worker_without_isolation_puts_a_warning_on_the_page(client_for, member):
    beat("isolated@a", ISOLATED)
    beat("bare@b", BARE)
    body = client_for(member).get("/status/").content.decode()
    assert 'id="sandbox-insecure"' in body
    assert f"<code>{SANDBOX_INSECURE_ENV}=1</code>" in body
    assert '<span class="bad" title="unshare: Operation not permitted">none</span>' in row(body, "bare@b")


def test_the_web_servers_own_override_puts_a_warning_on_the_page(client_for, member, monkeypatch):
    monkeypatch.setenv(SANDBOX_INSECURE_ENV, "1")  # the web server runs members' "try it" code
    assert 'id="sandbox-insecure"' in client_for(member).get("/status/panel/").content.decode()


def test_the_heartbeat_publishes_the_sandbox_probe(db, monkeypatch):
    # the worker's connection housekeeping would close the test's transaction
    monkeypatch.setattr("workbench.jobs.heartbeat.close_old_connections", lambda: None)
    report = sandbox_report()  # a real pool starts on this machine and closes
    assert report["mode"] in ("root", "userns")
    heartbeat = Heartbeat(hostname="probe@test", queues=["cpu"], interval=1)
    heartbeat.sandbox = report
    heartbeat.beat()
    assert WorkerHeartbeat.objects.get(hostname="probe@test").sandbox["mode"] == report["mode"]
