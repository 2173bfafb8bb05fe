"""Helpers shared by the runs benchmarks: a logged-in in-process client and two ways to time a request."""

from __future__ import annotations

import os
import time
from pathlib import Path

from django.db import connection

from workbench.runs.models import Run


def bench_client(run: Run):
    """A logged-in member of the run's team, talking to the app in-process."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment

    from workbench.accounts.models import Membership

    setup_test_environment()  # lets the test client's "testserver" host through ALLOWED_HOSTS
    user, _ = get_user_model().objects.get_or_create(username="bench-user")
    Membership.objects.get_or_create(user=user, team=run.team, defaults={"role": "member"})
    client = Client()
    client.force_login(user)
    return client


def backend_cpu_s() -> float:
    """CPU seconds used so far by this connection's PostgreSQL backend (same machine: /proc)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_request_ms(fn, repeat: int) -> float:
    """Server CPU per request (Django process + its PostgreSQL backend): the wall time on an idle core,
    which a shared, loaded machine cannot show directly."""
    fn()
    py, pg = time.process_time(), backend_cpu_s()
    for _ in range(repeat):
        fn()
    return (time.process_time() - py + backend_cpu_s() - pg) * 1000 / repeat


def timed(fn, repeat: int) -> list[float]:
    fn()  # warm the connection and the buffer cache
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out
