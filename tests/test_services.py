"""The test command's own set-up: throwaway PostgreSQL and Redis when none answers, gone afterwards."""

import glob
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import services
from tests.support.polling import wait_for

ROOT = Path(__file__).resolve().parent.parent
# Connects to both services, creates a table and a key, then prints the URLs it was given.
PROBE = """
import os, psycopg, redis
base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
with psycopg.connect(base + "/postgres", autocommit=True) as conn:
    conn.execute("CREATE TABLE probe (x int)")
    assert conn.execute("SELECT 41 + 1").fetchone() == (42,)
client = redis.Redis.from_url(os.environ["REDIS_URL"])
assert client.set("probe", "1") and client.get("probe") == b"1"
print(os.environ["DATABASE_URL"], os.environ["REDIS_URL"])
"""


def throwaway_dirs() -> set[str]:
    return set(glob.glob("/tmp/workbench-test-*"))


def run_services(*argv: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.services", *argv], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)  # fmt: skip


@pytest.mark.slow
def test_throwaway_servers_serve_the_command_and_are_gone_after():
    before = throwaway_dirs()
    runner = run_services("--throwaway", "--", sys.executable, "-c", PROBE)
    out, err = runner.communicate(timeout=120)
    assert runner.returncode == 0, err
    database_url, redis_url = out.split()
    assert f"started a throwaway server for DATABASE_URL: {database_url}" in err
    for url, port in ((database_url, 5432), (redis_url, 6379)):
        assert not services.answers(url, port), f"{url} still answers after the command ended"
    assert throwaway_dirs() == before


@pytest.mark.slow
def test_the_command_exit_code_is_passed_on():
    runner = run_services("--throwaway", "--", sys.executable, "-c", "raise SystemExit(7)")
    runner.communicate(timeout=120)
    assert runner.returncode == 7


@pytest.mark.slow
def test_sigterm_stops_the_command_and_the_servers():
    before = throwaway_dirs()
    script = "import os, time; print(os.environ['REDIS_URL'], flush=True); time.sleep(600)"
    runner = run_services("--throwaway", "--", sys.executable, "-c", script)
    redis_url = runner.stdout.readline().split()[-1]
    wait_for(lambda: services.answers(redis_url, 6379), 60, "the throwaway Redis to answer", every=0.1)
    runner.send_signal(signal.SIGTERM)
    runner.communicate(timeout=60)
    assert runner.returncode != 0
    assert not services.answers(redis_url, 6379)
    assert throwaway_dirs() == before


def test_missing_binaries_fail_at_once_with_what_to_install(monkeypatch, capsys):
    monkeypatch.setattr(services, "answers", lambda url, port: False)
    monkeypatch.setattr(services, "postgres_binary", lambda name: None)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setattr(sys, "argv", ["services", "--", "false"])
    assert services.main() == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert "apt-get install postgresql redis-server" in lines[0] and "docker compose" in lines[0]


def test_an_explicit_url_that_does_not_answer_is_reported_not_replaced(monkeypatch, capsys):
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{services.free_port()}/0")
    monkeypatch.setattr(sys, "argv", ["services", "--", "true"])
    assert services.main() == 1
    assert "REDIS_URL=redis://127.0.0.1:" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() != 0, reason="the root-only path: PostgreSQL is run as another user")
def test_as_root_postgres_runs_as_an_unprivileged_user():
    assert services.server_user() in ("postgres", "nobody")
