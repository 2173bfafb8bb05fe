"""The workbench uses the trainers library only through `trainers.workbench_api`, a narrow documented
surface that stays cheap to import, and its Celery task trains with the same `run_config` as the CLI."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import trainers.workbench_api as api
from tests.workbench.support.worker import REPO_ROOT
from trainers.training import run

SURFACE = "trainers.workbench_api"
WORKBENCH = REPO_ROOT / "workbench"


def trainers_imports(path: Path) -> list[tuple[int, str]]:
    """Every import of a trainers module in the file (lazy ones inside functions too), with its line;
    `from trainers import x` counts as trainers.x, and import_module("trainers...") as well."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "trainers":
                found += [(node.lineno, f"trainers.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return [(line, module) for line, module in found if module.split(".")[0] == "trainers"]


def test_workbench_imports_trainers_only_through_the_surface():
    files = sorted(WORKBENCH.rglob("*.py"))
    assert len(files) > 50
    outside = {
        f"{path.relative_to(REPO_ROOT)}:{line}": module
        for path in files
        for line, module in trainers_imports(path)
        if module != SURFACE
    }
    assert outside == {}, f"the workbench may import trainers only through {SURFACE}"
    assert any(module == SURFACE for path in files for _, module in trainers_imports(path))


def test_the_checker_sees_every_form_of_import(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text(
        "import trainers.config\nfrom trainers import rewards\nfrom trainers.tools import TOOLS\n"
        "def lazy():\n    from trainers.training.build import build_trainer\n"
        "    importlib.import_module('trainers.models.tiny')\n"
        "from trainers.workbench_api import RunConfig\nfrom .models import Run\nimport json\n"
    )
    assert sorted(trainers_imports(source)) == [
        (1, "trainers.config"), (2, "trainers.rewards"), (3, "trainers.tools"),
        (5, "trainers.training.build"), (6, "trainers.models.tiny"), (7, "trainers.workbench_api"),
    ]  # fmt: skip


@pytest.mark.slow
def test_the_surface_is_documented_and_light():
    assert api.__doc__ is not None
    for name in api.__all__:
        assert name in api.__doc__, f"{name} is exported but not documented"
        assert hasattr(api, name)
    done = subprocess.run(
        [sys.executable, "-c", f"import sys, {SURFACE}; print(sorted(m for m in ('torch', 'transformers')"
         " if m in sys.modules))"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


def test_the_task_trains_with_the_clis_run_config(monkeypatch):
    from workbench.runs import tasks

    assert api.run_config is run.run_config
    seen = {}

    def fake_execute(*, run_id, worker, train):
        seen.update(run_id=run_id, train=train)
        return "succeeded"

    monkeypatch.setattr(tasks, "run_execute", fake_execute)
    assert tasks.train_run.apply(args=(7,)).get() == "succeeded"
    assert seen["run_id"] == 7 and seen["train"].func is run.run_config
    # the same function, given the rollout queue's workers for a config with rollout.backend: remote
    assert set(seen["train"].keywords) == {"dispatcher"}
