"""Settings from the environment: production mode passes `check --deploy`; the broker follows REDIS_URL."""

import os
import secrets
import subprocess
import sys

import pytest

from tests.workbench.support.worker import REPO_ROOT

# Set by the test conftest for this process; a deployment has none of them.
TEST_ONLY_VARIABLES = {"DJANGO_ENV", "DJANGO_DEBUG", "REDIS_KEY_PREFIX", "DJANGO_ALLOW_ASYNC_UNSAFE"}


def run_python(env_overrides: dict, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in TEST_ONLY_VARIABLES}
    env.update(env_overrides)
    return subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_production_settings_pass_check_deploy_without_a_warning():
    done = run_python(
        {
            "DJANGO_ENV": "production",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_ALLOWED_HOSTS": "workbench.example.com",
        },
        "manage.py",
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


@pytest.mark.slow
def test_production_refuses_to_start_without_a_secret_key():
    env = {
        "DJANGO_ENV": "production",
        "DJANGO_ALLOWED_HOSTS": "workbench.example.com",
        "DJANGO_SECRET_KEY": "",
    }
    done = run_python({k: v for k, v in env.items() if v}, "-c", "import django; django.setup()")
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY" in done.stderr


@pytest.mark.slow
def test_production_refuses_to_start_with_the_example_files_placeholder_key():
    example = (REPO_ROOT / "deploy" / "workbench.env.example").read_text()
    lines = example.splitlines()
    placeholder = next(line.split("=", 1)[1] for line in lines if line.startswith("DJANGO_SECRET_KEY="))
    env = {
        "DJANGO_ENV": "production",
        "DJANGO_ALLOWED_HOSTS": "workbench.example.com",
        "DJANGO_SECRET_KEY": placeholder,
    }
    done = run_python(env, "-c", "import django; django.setup()")
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and "placeholder" in done.stderr


SHOW_BROKER = (
    "import django; django.setup(); from django.conf import settings as s; print(s.CELERY_BROKER_URL)"
)


@pytest.mark.slow
def test_redis_url_selects_redis_and_its_absence_the_filesystem_transport(tmp_path):
    with_redis = run_python({"REDIS_URL": "redis://127.0.0.1:6379/3"}, "-c", SHOW_BROKER)
    without = run_python({"REDIS_URL": "", "WORKBENCH_VAR_DIR": str(tmp_path)}, "-c", SHOW_BROKER)
    assert with_redis.stdout.strip() == "redis://127.0.0.1:6379/3"
    assert without.stdout.strip() == "filesystem://localhost//"


@pytest.mark.slow
def test_the_rollouts_a_step_bound_comes_from_its_variable():
    show = "import django; django.setup(); from django.conf import settings as s; print(s.{})"
    name = "WORKBENCH_MAX_ROLLOUTS_PER_STEP"
    done = run_python({name: "96"}, "-c", show.format(name))
    assert done.stdout.strip() == "96", done.stderr
