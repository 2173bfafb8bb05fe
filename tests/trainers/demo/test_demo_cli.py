"""`python -m trainers demo` with settings that cannot run: one line naming them, exit 2, nothing written.

Every case fails before any work (the SFT takes minutes), so these run in the test process.
"""

import pytest

from trainers.cli import main

REFUSED = [
    (["--env", "frozenlake", "--size", "1"], "FrozenLake's side must be from 3 to 6, not 1"),
    (["--env", "frozenlake", "--size", "7"], "FrozenLake's side must be from 3 to 6, not 7"),
    (["--env", "sokoban", "--size", "6"], "--size applies only to frozenlake (Sokoban rooms are 5x5)"),
    (["--estimator", "grpo"], "--estimator applies only to frozenlake and sokoban, not to the calculator"),
    (["--env", "sokoban", "--tool-fraction", "0.3", "--eval-every", "2"],
     "--eval-every, --tool-fraction apply only to the calculator demo"),
    (["--env", "sokoban", "--sft-steps", "-3"], "invalid multi-turn settings: sft_steps must be at least 0"),
    (["--env", "frozenlake", "--kl-coef", "inf"], "kl_coef must be a finite number from 0 up, not inf"),
    (["--rl-steps", "0", "--sft-lr", "-1"],
     "invalid demo settings: rl_steps must be at least 1, not 0; sft_lr must be positive, not -1.0"),
    (["--samples-per-prompt", "1", "--tool-fraction", "2"], "samples_per_prompt must be at least 2, not 1"),
    (["--env-server", "http://127.0.0.1:9"],
     "--env-server applies only to frozenlake and sokoban, not to the calculator demo"),
]  # fmt: skip


@pytest.mark.parametrize(("flags", "message"), REFUSED)
def test_settings_that_cannot_run_are_one_line_naming_them(flags, message, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["demo", *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m trainers demo: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


def test_the_calculator_demo_names_every_impossible_setting_at_once(capsys):
    assert main(["demo", "--samples-per-prompt", "1", "--tool-fraction", "2", "--threads", "0"]) == 2
    err = capsys.readouterr().err
    for named in ("samples_per_prompt", "tool_fraction must be between 0 and 1, not 2.0", "threads"):
        assert named in err
