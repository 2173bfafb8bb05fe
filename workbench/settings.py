"""Settings, all from the environment (cookiecutter-django style, one module).

DJANGO_ENV=production switches on the secure defaults that `manage.py check --deploy` wants.
Without DATABASE_URL / REDIS_URL the workbench runs on embedded defaults: SQLite under var/ and
kombu's filesystem transport under var/broker, so `make run` needs no server.
"""

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF

from workbench.jobs.queues import DEFAULT_QUEUE, TASK_QUEUES, TASK_ROUTES

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("WORKBENCH_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


PRODUCTION = os.environ.get("DJANGO_ENV", "development") == "production"
DEBUG = env_bool("DJANGO_DEBUG", default=not PRODUCTION)

DEV_SECRET_KEY = "dev-only-insecure-key-change-me-for-anything-real"
# Keys anyone can read (deploy/workbench.env.example, this file): a deployment copying them signs
# sessions and password-reset links with a public key, so production refuses them.
PUBLIC_SECRET_KEYS = {"replace-with-50-random-characters", DEV_SECRET_KEY}

if PRODUCTION:
    SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]  # no fallback: a production key must be set
    if SECRET_KEY.strip() in PUBLIC_SECRET_KEYS:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is the public placeholder from deploy/workbench.env.example: set it to "
            "a random secret (python -c 'import secrets; print(secrets.token_urlsafe(50))')"
        )
else:
    SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", DEV_SECRET_KEY)

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "" if PRODUCTION else "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "axes",
    "workbench.accounts",
    "workbench.catalog",
    "workbench.jobs",
    "workbench.datasets",
    "workbench.toolschemas",
    "workbench.prompts",
    "workbench.rewards",
    "workbench.agents",
    "workbench.runs",
    "workbench.evaluations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "workbench.accounts.middleware.CurrentTeamMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out login into the lockout page
]

# Content-Security-Policy (django-csp): scripts and styles only from our own static files (templates hold
# no inline script, style attribute or on* handler; htmx and plotly are told not to inject or eval), no
# plugins, no framing by other sites, forms post only here.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

ROOT_URLCONF = "workbench.urls"
WSGI_APPLICATION = "workbench.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "frontend" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "workbench.accounts.context_processors.teams",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("DJANGO_CONN_MAX_AGE", "60")),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default has a web server and worker processes writing at once. A deferred
    # transaction that reads and then writes cannot wait for the lock ("database is locked" at once),
    # so transactions take the write lock when they begin and wait up to `timeout` seconds for it;
    # WAL lets readers go on while one process writes.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# django-axes first: it refuses a locked-out username+address before the password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Login throttling, the admin's login included: after AXES_FAILURE_LIMIT failed logins for one username
# from one address, that pair is refused (the right password too) until AXES_COOLOFF_MINUTES pass.
AXES_FAILURE_LIMIT = int(os.environ.get("AXES_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("AXES_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_CLIENT_IP_CALLABLE = "workbench.accounts.throttling.client_ip"
# Proxies in front of the web server that append to X-Forwarded-For (one TLS-terminating proxy: 1).
TRUSTED_PROXY_COUNT = int(os.environ.get("DJANGO_TRUSTED_PROXY_COUNT", "0"))
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "frontend" / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
MEDIA_ROOT = Path(os.environ.get("DJANGO_MEDIA_ROOT", VAR_DIR / "media"))
MEDIA_URL = "media/"

# Uploads: request bodies above this stream to temporary files instead of memory; datasets have
# their own limit (checked while streaming) so a 200 MB file is refused with a clear message.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
DATASET_MAX_UPLOAD_BYTES = int(os.environ.get("DATASET_MAX_UPLOAD_BYTES", str(256 * 1024 * 1024)))
# What one dataset may hold: columns (distinct fields), bytes per row, bytes a Parquet file decodes to,
# nesting depth and digits of a JSON integer; uploads past any of them are refused with the limit named.
DATASET_MAX_COLUMNS = int(os.environ.get("DATASET_MAX_COLUMNS", "256"))
DATASET_MAX_ROW_BYTES = int(os.environ.get("DATASET_MAX_ROW_BYTES", str(1024 * 1024)))
DATASET_MAX_EXPANDED_BYTES = int(os.environ.get("DATASET_MAX_EXPANDED_BYTES", str(1024 * 1024 * 1024)))
DATASET_MAX_NESTING_DEPTH = int(os.environ.get("DATASET_MAX_NESTING_DEPTH", "64"))
DATASET_MAX_INTEGER_DIGITS = int(os.environ.get("DATASET_MAX_INTEGER_DIGITS", "100"))
FILE_UPLOAD_TEMP_DIR = os.environ.get("DJANGO_FILE_UPLOAD_TEMP_DIR") or None

# Internal hosts that HTTP tools and SandboxFusion may reach ("sandbox.internal:8080,10.0.0.5"): the web
# process's "try it" reads this setting, workers read the same variable; public addresses need no entry.
WORKBENCH_EGRESS_ALLOW = env_list("WORKBENCH_EGRESS_ALLOW", "")

# The MCP servers teams may import tools from: a JSON list, or the path of a JSON file holding one, of
# {"name", "url" (streamable HTTP) | "command" (stdio argv), "env", "teams" (team names; absent: all),
# "connect_timeout_s"} (trainers/mcp/servers.py). The web process (imports, launch checks, "try it", bounds)
# reads this setting; workers read the same variable.
WORKBENCH_MCP_SERVERS = os.environ.get("WORKBENCH_MCP_SERVERS", "")

# Celery. REDIS_URL selects Redis for broker and results; otherwise the filesystem transport.
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
    # How long an unacknowledged task (a worker that died mid-run) waits before Redis hands it out again.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": float(os.environ.get("CELERY_VISIBILITY_TIMEOUT", str(6 * 3600)))
    }
    # Lets concurrent test sessions share one Redis without taking each other's tasks.
    if os.environ.get("REDIS_KEY_PREFIX"):
        CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"] = os.environ["REDIS_KEY_PREFIX"]
else:
    BROKER_DIR = VAR_DIR / "broker"
    for sub in ("queue", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://localhost//"  # a host, so kombu does not warn on every connect
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
    CELERY_RESULT_BACKEND = None  # progress lives in JobProgress rows, not in task results
CELERY_TASK_QUEUES = TASK_QUEUES
CELERY_TASK_DEFAULT_QUEUE = DEFAULT_QUEUE
CELERY_TASK_ROUTES = TASK_ROUTES
# Acknowledge a task only when it is done, so the task of a killed worker is redelivered.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # long tasks: never hold a second one while busy
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_SEND_TASK_EVENTS = False

# Workers write a heartbeat row this often; the status page forgets one not seen for the TTL.
WORKER_HEARTBEAT_INTERVAL = float(os.environ.get("WORKER_HEARTBEAT_INTERVAL", "5"))
WORKER_HEARTBEAT_TTL = float(os.environ.get("WORKER_HEARTBEAT_TTL", "15"))

# A worker training a run renews its lease (the run's heartbeat, valid RUNS_LEASE_S) every RUNS_LEASE_S / 5
# seconds. Every worker sweeps every RUNS_SWEEP_INTERVAL_S for runs whose lease expired (their worker died)
# and re-enqueues each once; a run stranded on its RUNS_MAX_ATTEMPTS-th attempt fails instead.
RUNS_LEASE_S = float(os.environ.get("RUNS_LEASE_S", "30"))
RUNS_SWEEP_INTERVAL_S = float(os.environ.get("RUNS_SWEEP_INTERVAL_S", "10"))
RUNS_MAX_ATTEMPTS = int(os.environ.get("RUNS_MAX_ATTEMPTS", "3"))
# The queue a run's rollout jobs (rollout.backend: remote) go to; a pool of rollout workers of its own
# (say per cluster) consumes it with -Q. Its rollout workers are the live workers that consume it.
RUNS_ROLLOUT_QUEUE = os.environ.get("WORKBENCH_ROLLOUT_QUEUE", "rollout")
# A gpu-queue worker without the GPUs a run asks for (resources.gpus) sends the run back, to be tried
# again after RUNS_GPU_WAIT_S by whichever worker then has them (workbench/jobs/gpus.py).
RUNS_GPU_WAIT_S = float(os.environ.get("RUNS_GPU_WAIT_S", "10"))
# The services a newly recorded checkpoint is handed to (runs/ingest.py, once it is committed, on the
# training worker): the evaluations app schedules those of `evaluation.runner: jobs` runs. Named here, not
# imported by runs, because evaluations builds on runs.
RUNS_CHECKPOINT_SERVICES = ["workbench.evaluations.scheduling.evaluations_schedule"]
# Run artifacts (checkpoints, published weights) every worker reads: a local directory, file://... or
# s3://bucket/prefix (MinIO, S3; needs s3fs, endpoint in WORKBENCH_ARTIFACTS_S3_ENDPOINT).
ARTIFACTS_URL = os.environ.get("WORKBENCH_ARTIFACTS_URL", str(VAR_DIR / "artifacts"))

# Operator bounds on runs launched from the workbench (workbench/runs/config/bounds.py: checked at launch and
# again on the worker). Each setting is named after its variable; `python -m trainers` is not bounded.
WORKBENCH_SANDBOX_MAX_WALL_S = float(os.environ.get("WORKBENCH_SANDBOX_MAX_WALL_S", "60"))
WORKBENCH_SANDBOX_MAX_CPU_S = float(os.environ.get("WORKBENCH_SANDBOX_MAX_CPU_S", "60"))
WORKBENCH_SANDBOX_MAX_MEMORY_MB = float(os.environ.get("WORKBENCH_SANDBOX_MAX_MEMORY_MB", "4096"))
WORKBENCH_SANDBOX_MAX_SCRATCH_MB = float(os.environ.get("WORKBENCH_SANDBOX_MAX_SCRATCH_MB", "512"))
WORKBENCH_SANDBOX_MAX_PROCESSES = float(os.environ.get("WORKBENCH_SANDBOX_MAX_PROCESSES", "64"))
WORKBENCH_SANDBOX_MAX_OUTPUT_BYTES = float(os.environ.get("WORKBENCH_SANDBOX_MAX_OUTPUT_BYTES", "1048576"))
WORKBENCH_SANDBOX_MAX_POOL_SIZE = float(os.environ.get("WORKBENCH_SANDBOX_MAX_POOL_SIZE", "8"))
WORKBENCH_SANDBOX_ALLOW_NETWORK = env_bool("WORKBENCH_SANDBOX_ALLOW_NETWORK", default=False)
# Modules a python tool's `limits.preload` may name (the sandbox imports them before isolating a call).
WORKBENCH_SANDBOX_PRELOAD = env_list("WORKBENCH_SANDBOX_PRELOAD", "")
# A calculator tool's result size and nesting (its work grows with both; each call runs in a child process
# killed at the tool's timeout).
WORKBENCH_CALCULATOR_MAX_BITS = int(os.environ.get("WORKBENCH_CALCULATOR_MAX_BITS", "8192"))
WORKBENCH_CALCULATOR_MAX_DEPTH = int(os.environ.get("WORKBENCH_CALCULATOR_MAX_DEPTH", "100"))
# An agent program's episode (rollout.agent): its wall-clock limit, memory, and programs running at once.
WORKBENCH_AGENT_MAX_WALL_S = float(os.environ.get("WORKBENCH_AGENT_MAX_WALL_S", "300"))
WORKBENCH_AGENT_MAX_MEMORY_MB = int(os.environ.get("WORKBENCH_AGENT_MAX_MEMORY_MB", "4096"))
WORKBENCH_AGENT_MAX_CONCURRENCY = int(os.environ.get("WORKBENCH_AGENT_MAX_CONCURRENCY", "16"))
WORKBENCH_AGENT_MAX_CONTEXT_TOKENS = int(os.environ.get("WORKBENCH_AGENT_MAX_CONTEXT_TOKENS", "32768"))
# 1 where the rollout workers have GPUs set aside for rollouts and evaluations (in no gpu-queue worker's
# WORKBENCH_GPUS): only then may remote rollouts and evaluations use model.device cuda (they claim no GPU).
WORKBENCH_ROLLOUT_CUDA = env_bool("WORKBENCH_ROLLOUT_CUDA", default=False)
# DeepSpeed ranks a run may start (processes on one worker; a CPU run's also within the worker's cores).
WORKBENCH_MAX_RANKS = int(os.environ.get("WORKBENCH_MAX_RANKS", "8"))
# Rollouts a step may sample (rollout.prompts_per_step x samples_per_prompt): each is generated, scored and
# held in memory for the step's update. The largest preset asks for 2048.
WORKBENCH_MAX_ROLLOUTS_PER_STEP = int(os.environ.get("WORKBENCH_MAX_ROLLOUTS_PER_STEP", "4096"))
WORKBENCH_MODEL_ROOTS = os.environ.get("WORKBENCH_MODEL_ROOTS", str(VAR_DIR / "models")).split(":")
# Dataset files of the run's own team under MEDIA_ROOT are allowed besides these.
WORKBENCH_DATA_ROOTS = os.environ.get("WORKBENCH_DATA_ROOTS", str(BASE_DIR / "trainers" / "data")).split(":")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("DJANGO_LOG_LEVEL", "INFO")},
}

if PRODUCTION:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # load balancers probe over plain HTTP
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", default=True)
    SECURE_CONTENT_TYPE_NOSNIFF = True
    SECURE_REFERRER_POLICY = "same-origin"
    X_FRAME_OPTIONS = "DENY"
    SESSION_COOKIE_HTTPONLY = True
