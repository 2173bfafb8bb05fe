"""Workbench test set-up: Django on PostgreSQL + Redis, teams with roles, a real Celery worker, a browser.

Django is configured here, not in pyproject, so the pure-python trainers tests never load it.
DATABASE_URL (default postgres://postgres@127.0.0.1:5432/workbench; pytest-django creates test_<name>)
and REDIS_URL (default redis://127.0.0.1:6379/0) may be overridden, e.g. one database per developer.
"""

import atexit
import contextlib
import os
import shutil
import tempfile
import uuid

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/workbench")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
# Each session gets its own Redis keys, so concurrent sessions never take each other's tasks.
os.environ.setdefault("REDIS_KEY_PREFIX", f"wbtest-{uuid.uuid4().hex[:8]}:")
# Each session keeps its runs, artifacts and broker files in a directory of its own, which every worker it
# starts inherits: run ids restart with each test database, so sessions sharing the repository's var/ would
# read (and prune) each other's runs/1, and `make run`'s var/ is left alone.
if "WORKBENCH_VAR_DIR" not in os.environ:
    os.environ["WORKBENCH_VAR_DIR"] = tempfile.mkdtemp(prefix="wbtest-var-")
    atexit.register(shutil.rmtree, os.environ["WORKBENCH_VAR_DIR"], ignore_errors=True)
# Playwright's sync API runs an event loop in the main thread; the ORM calls in tests are still synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

import django
import pytest
from pytest_django.plugin import _setup_django

from tests.workbench.support.browser import CHROMIUM, CHROMIUM_ARGS, ConsoleLog, log_in
from tests.workbench.support.users import PASSWORD
from tests.workbench.support.worker import WorkerProcess, database_url_for


def pytest_configure(config: pytest.Config) -> None:
    # Whitenoise warns that staticfiles/ is missing until collectstatic ran; tests serve from finders.
    config.addinivalue_line("filterwarnings", "ignore:No directory at:UserWarning")
    django.setup()
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # tests only: fast logins
    _setup_django(config)  # what pytest-django does when settings come from its own options


# Teams and users -------------------------------------------------------------------------------


@pytest.fixture
def make_user(db, django_user_model):
    """make_user("ada", team, "member") -> a user with that role in team (no team: no membership)."""
    from workbench.accounts.models import Membership

    def make(username: str, team=None, role: str = "member"):
        user = django_user_model.objects.create_user(username=username, password=PASSWORD)
        if team is not None:
            Membership.objects.create(user=user, team=team, role=role)
        return user

    return make


@pytest.fixture
def team(db):
    from workbench.accounts.models import Team

    return Team.objects.create(name="alpha")


@pytest.fixture
def other_team(db):
    from workbench.accounts.models import Team

    return Team.objects.create(name="beta")


@pytest.fixture
def admin(make_user, team):
    return make_user("ann-admin", team, "admin")


@pytest.fixture
def member(make_user, team):
    return make_user("ada", team, "member")


@pytest.fixture
def viewer(make_user, team):
    return make_user("vic-viewer", team, "viewer")


@pytest.fixture
def outsider(make_user, other_team):
    """A member of another team: every object of `team` must be invisible (404) to them."""
    return make_user("eve", other_team, "member")


@pytest.fixture
def client_for(db):
    """client_for(user) -> a Django test client logged in as user."""
    from django.test import Client

    def make(user):
        client = Client()
        client.force_login(user)
        return client

    return make


# A real Celery worker ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def worker_env(django_db_setup, django_db_blocker) -> dict:
    """Environment for worker processes: this session's test database, Redis keys and a fast heartbeat.
    They sweep for stranded runs only when they start: tests make "running" runs that no worker holds,
    which a periodic sweep would requeue; the recovery tests give their own workers a short period."""
    from django.db import connection

    with django_db_blocker.unblock():
        url = database_url_for(connection.settings_dict)
    periods = {"WORKER_HEARTBEAT_INTERVAL": "1", "RUNS_SWEEP_INTERVAL_S": "86400"}
    return {**os.environ, "DATABASE_URL": url, **periods}


@pytest.fixture(scope="session")
def celery_worker(worker_env, django_db_blocker, tmp_path_factory):
    """One worker process on the gpu, rollout and cpu queues for the session; tests use transactional_db."""
    worker = WorkerProcess(env=worker_env, log_dir=tmp_path_factory.mktemp("worker"))
    worker.start()
    with django_db_blocker.unblock():
        worker.wait_online()
    yield worker
    worker.stop()


@pytest.fixture
def start_worker(worker_env, tmp_path):
    """start_worker(queues=...) -> a worker of its own (e.g. to kill it); stopped after the test."""
    started: list[WorkerProcess] = []

    def start(queues: str = "gpu,rollout,cpu") -> WorkerProcess:
        worker = WorkerProcess(env=worker_env, log_dir=tmp_path, queues=queues)
        worker.start()
        started.append(worker)
        worker.wait_online()
        return worker

    yield start
    for worker in started:
        worker.stop()


# A real browser -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    """Chromium for one test module. Not session-wide: Playwright's sync API keeps an event loop running
    in the main thread, and pytest-django runs the non-database tests (asyncio.run in trainers) last."""
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does this)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def console_log():
    """The page's console errors, WebGL messages and failed requests; console_log.allow(url) for a test
    that opens a failing URL on purpose."""
    return ConsoleLog()


@pytest.fixture
def page(browser, live_server, console_log):
    """A fresh browser context on the live server; page.goto("/datasets/") works with relative URLs.
    The test fails when the page logged a console error, a WebGL message or a failed request."""
    from playwright.sync_api import Error as PlaywrightError

    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    console_log.watch(tab)
    yield tab
    with contextlib.suppress(PlaywrightError):  # closed, or navigating: what it logged so far counts
        tab.evaluate("0")  # a round trip, so the events the page sent before it are recorded
    problems = console_log.problems
    context.close()
    assert problems == [], "the page logged problems:\n" + "\n".join(problems)


@pytest.fixture
def login(page):
    """login(user) logs page in through the real login form."""
    return lambda user, password=PASSWORD: log_in(page, user.username, password)


@pytest.fixture
def screenshot(page):
    """screenshot("datasets-list") saves the page for the README when WORKBENCH_SCREENSHOTS names a folder
    (`make screenshots`); ordinary test runs write nothing."""
    folder = os.environ.get("WORKBENCH_SCREENSHOTS")

    def take(name: str) -> None:
        if folder:
            os.makedirs(folder, exist_ok=True)
            page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=True)

    return take
