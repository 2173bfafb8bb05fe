"""Isolation fails closed, runs without root, and is proven for both: the hostile suite as an
unprivileged user, a pool that cannot isolate refusing to start, and the operator's insecure override."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from trainers.sandbox import INSECURE_ENV, worker
from trainers.sandbox.pool import PROJECT_ROOT

HERE = Path(__file__).resolve().parent
NOBODY = 65534

# A pool's owner under a seccomp filter that refuses unshare: what Docker's default profile does to a
# non-root process, and what any kernel without usable (user) namespaces looks like to the pool.
NO_NAMESPACES = """
import json, sys
from trainers.sandbox.worker import install_seccomp
assert install_seccomp()
from trainers.sandbox import SandboxError, WorkerPool
try:
    pool = WorkerPool(size=1)
except SandboxError as exc:
    print(json.dumps({"refused": str(exc)}))
    sys.exit(0)
result = pool.run("print(6 * 7)")
print(json.dumps({"mode": pool.mode, "report": pool.report, "stdout": result.stdout}))
pool.close()
"""


def run_python(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -c code args` with this repository importable and without the insecure override,
    unless `env` sets it."""
    base = {k: v for k, v in os.environ.items() if k != INSECURE_ENV}
    full = {**base, "PYTHONPATH": str(PROJECT_ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=full, timeout=120
    )


needs_seccomp = pytest.mark.skipif(worker.seccomp_program() is None, reason="no seccomp table here")


@needs_seccomp
def test_a_pool_that_cannot_isolate_refuses_to_start() -> None:
    answer = json.loads(run_python(NO_NAMESPACES).stdout)
    assert "refused" in answer, answer  # no snippet ran
    message = answer["refused"]
    assert message.startswith("the sandbox refuses to start: sandbox isolation")
    assert "unshare: Operation not permitted" in message
    assert "seccomp filter" in message  # what is missing, as far as the pool can tell
    assert INSECURE_ENV in message  # and the operator's way out


@needs_seccomp
def test_the_insecure_setting_runs_without_isolation_and_warns() -> None:
    done = run_python(NO_NAMESPACES, env={INSECURE_ENV: "1"})
    answer = json.loads(done.stdout)
    assert answer["mode"] == "none"
    assert answer["stdout"] == "42\n"
    assert "unshare: Operation not permitted" in answer["report"]["refused"]
    assert f"{INSECURE_ENV} is set and sandbox isolation failed" in done.stderr
    assert "WITHOUT isolation" in done.stderr


@needs_seccomp
def test_the_command_line_exits_with_the_reason(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text("print('never runs')\n")
    code = (
        "import sys\n"
        "from trainers.sandbox.worker import install_seccomp\n"
        "install_seccomp()\n"
        "from trainers.cli import main\n"
        "sys.exit(main(['sandbox', sys.argv[1]]))\n"
    )
    done = run_python(code, str(snippet))
    assert done.returncode == 2
    assert "never runs" not in done.stdout
    assert done.stderr.startswith("error: the sandbox refuses to start:")


@pytest.mark.parametrize(
    ("setting", "value", "named"),
    [
        ("/proc/sys/kernel/unprivileged_userns_clone", "0", "kernel.unprivileged_userns_clone=0"),
        ("/proc/sys/user/max_user_namespaces", "0", "user.max_user_namespaces=0"),
        (
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            "1",
            "apparmor_restrict_unprivileged_userns=1",
        ),
    ],
)
def test_the_error_names_the_switch_that_disables_user_namespaces(
    monkeypatch: pytest.MonkeyPatch, setting: str, value: str, named: str
) -> None:
    real_open = open

    def fake_open(path, *args, **kwargs):
        if path == setting:
            return __import__("io").StringIO(value + "\n")
        if str(path).startswith("/proc/sys/"):
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(worker, "open", fake_open, raising=False)
    assert named in worker.diagnose("userns")
    assert named not in worker.diagnose("root")  # root needs no user namespace


def test_the_probe_reports_what_a_pool_gets() -> None:
    from trainers.sandbox import probe

    report = probe()
    assert report["mode"] == ("root" if os.geteuid() == 0 else "userns")
    assert report["isolation"]["filesystem"] is True
    assert report["insecure_allowed"] is False or os.environ.get(INSECURE_ENV)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="as root only: a non-root run is already the unprivileged pass")
@pytest.mark.timeout(900)
def test_the_hostile_suite_passes_as_an_unprivileged_user() -> None:
    """CI runs as root, so the pool isolates as root there: run test_sandbox_hostile.py again as the
    unprivileged `nobody`, where the pool must isolate with user namespaces (as the deployment does)."""
    home = tempfile.mkdtemp(prefix="sandbox-unprivileged-")
    try:
        os.chown(home, NOBODY, NOBODY)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "TMPDIR": home,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "DATABASE_URL": "postgres://admin:hunter2@db/prod",  # a secret the snippets must not see
        }
        command = [
            *(sys.executable, str(HERE / "as_unprivileged.py"), str(NOBODY), str(NOBODY), "--"),
            *(sys.executable, "-m", "pytest", str(HERE / "test_sandbox_hostile.py"), "-q", "-x"),
            *("-p", "no:cacheprovider", f"--basetemp={home}/pytest"),
        ]
        done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=840)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    tail = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, tail
    assert " passed" in done.stdout and "failed" not in done.stdout and "error" not in done.stdout, tail


DEPLOY = PROJECT_ROOT / "deploy"
# systemd options that would stop the sandbox from creating its namespaces (or mounting its /proc)
BLOCKING_UNIT_OPTIONS = ("RestrictNamespaces=", "PrivateUsers=", "ProcSubset=", "SystemCallFilter=")


@pytest.mark.parametrize("unit", sorted(p.name for p in (DEPLOY / "systemd").glob("*.service")))
def test_systemd_units_run_as_a_user_the_sandbox_can_isolate_for(unit: str) -> None:
    """The units run as `workbench`: the "userns" mode the unprivileged test pass proves."""
    lines = [ln.strip() for ln in (DEPLOY / "systemd" / unit).read_text().splitlines()]
    settings = [ln for ln in lines if ln and not ln.startswith("#")]
    assert "User=workbench" in settings
    assert not [ln for ln in settings if ln.startswith(BLOCKING_UNIT_OPTIONS)]


def test_the_compose_services_may_create_user_namespaces() -> None:
    import yaml

    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    dockerfile = (DEPLOY / "Dockerfile").read_text().splitlines()
    assert [ln for ln in dockerfile if ln.startswith("USER ")][-1] == "USER workbench"
    for name in ("web", "worker-cpu", "worker-gpu"):
        options = compose["services"][name]["security_opt"]
        assert {"seccomp=unconfined", "apparmor=unconfined"} <= set(options), name
        assert "privileged" not in compose["services"][name] and "cap_add" not in compose["services"][name]
