"""A rollout worker trusts nothing in a job's payload (it comes off the broker): a hostile payload naming
weights outside the deployment's artifact store, another run's weights, tools past the operator's bounds
or a GPU the worker does not hand out is refused before anything is fetched; a good one runs with its
tools bound as the trainer's are."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trainers.config import RunConfig
from trainers.config.limits import RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.rollout.remote.wire import RolloutJob, rollout_spec
from workbench.runs.execution.rollout_dispatch import rollout_weights_url
from workbench.runs.execution.rollout_job_bounds import RolloutJobRefused, rollout_job_bound
from workbench.runs.models import Run, RunStatus
from workbench.runs.tasks import rollout_chunk


@pytest.fixture
def running(team, member, settings, tmp_path) -> Run:
    settings.ARTIFACTS_URL = str(tmp_path / "artifacts")
    config = RunConfig().model_dump(mode="json")
    return Run.objects.create(
        team=team, created_by=member, name="r", config=config, queue="cpu", status=RunStatus.RUNNING
    )


@pytest.fixture
def weights_server() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server standing in for wherever a hostile payload points; it records every request."""
    requests: list[str] = []

    class Record(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            self.send_response(404)
            self.end_headers()

        do_HEAD = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Record)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", requests
    server.shutdown()


def payload(run: Run, *, tools=("calculator",), device: str = "cpu", **fields) -> dict:
    spec = rollout_spec("chatml_tools", None, list(tools), RolloutLimits(), SamplingParams(), device)
    job = RolloutJob(
        job_id="j1", run_key=f"run{run.pk}", weights_url=rollout_weights_url(run.pk),
        weights_prefix="weights", weight_version=1, rows=[], samples_per_prompt=1, seed=0, spec=spec,
    )  # fmt: skip
    return {**job.to_dict(), **fields}


def refusal(data: dict) -> str:
    with pytest.raises(RolloutJobRefused) as caught:
        rollout_job_bound(data)
    return str(caught.value)


def test_the_task_refuses_weights_from_any_other_url_before_fetching(running, weights_server):
    url, requests = weights_server
    result = rollout_chunk.apply(args=[payload(running, weights_url=f"{url}/weights")])
    assert isinstance(result.result, RolloutJobRefused)
    assert "WORKBENCH_ARTIFACTS_URL" in str(result.result) and requests == []


@pytest.mark.parametrize("where", ["other_run", "dotdot", "file"])
def test_only_the_runs_own_weights_in_the_store(running, tmp_path, where):
    own = rollout_weights_url(running.pk)
    url = {
        "other_run": own.replace(f"runs/{running.pk}/", f"runs/{running.pk + 1}/"),
        "dotdot": f"{own}/../../{running.pk + 1}/rollout",
        "file": (tmp_path / "elsewhere").as_uri(),
    }[where]
    assert "weights_url" in refusal(payload(running, weights_url=url))
    assert "weights_prefix" in refusal(payload(running, weights_prefix="../../etc"))


def test_a_run_that_is_not_running_has_no_jobs(running):
    data = payload(running)
    Run.objects.filter(pk=running.pk).update(status=RunStatus.SUCCEEDED)
    assert "run_key" in refusal(data)
    assert "run_key" in refusal({**data, "run_key": "../run1"})
    assert "not a rollout job" in refusal({**data, "hostname": "x"})


@pytest.mark.parametrize(
    ("tool", "field", "setting"),
    [
        (
            {"name": "python", "config": {"limits": {"memory_mb": 100_000}}},
            "limits.memory_mb",
            "MAX_MEMORY_MB",
        ),
        ({"name": "python", "config": {"limits": {"network": True}}}, "limits.network", "ALLOW_NETWORK"),
        ({"name": "python", "config": {"limits": {"preload": ["ctypes"]}}}, "limits.preload", "PRELOAD"),
        ({"name": "python", "config": {"pool_size": 500}}, "pool_size", "MAX_POOL_SIZE"),
        ({"name": "calculator", "config": {"max_bits": 10**9}}, "max_bits", "CALCULATOR_MAX_BITS"),
        ({"name": "search", "config": {"corpus_path": "/etc/passwd"}}, "corpus_path", "DATA_ROOTS"),
    ],
)
def test_tools_past_the_operators_bounds_are_refused(running, tool, field, setting):
    message = refusal(payload(running, tools=[tool]))
    assert f"tools.0.config.{field}" in message and setting in message


def test_cuda_and_vllm_only_where_the_operator_set_gpus_aside(running, settings):
    assert "WORKBENCH_ROLLOUT_CUDA" in refusal(payload(running, device="cuda"))
    vllm = payload(running)
    vllm["spec"]["generation"] = {"backend": "vllm"}
    assert "WORKBENCH_ROLLOUT_CUDA" in refusal(vllm)
    assert rollout_job_bound(payload(running, device="auto")).spec["device"] == "cpu"
    settings.WORKBENCH_ROLLOUT_CUDA = True
    assert rollout_job_bound(payload(running, device="cuda")).spec["device"] == "cuda"


def test_a_good_job_runs_with_its_tools_bound(running, settings):
    settings.WORKBENCH_SANDBOX_MAX_MEMORY_MB = 512  # below the sandbox's default of 1024 MB
    job = rollout_job_bound(payload(running, tools=["python", "calculator"]))
    assert job.weights_url == rollout_weights_url(running.pk)
    assert job.spec["tools"] == [
        {"name": "python", "config": {"limits": {"memory_mb": 512}}},
        {"name": "calculator", "config": {}},
    ]
