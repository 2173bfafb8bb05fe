"""The `algorithm` section is the union of the registered estimators' parameters, and the flat layout
written before it (every estimator's parameters side by side) still loads to the same estimators."""

import json
import pickle
from pathlib import Path

import pytest

from trainers.advantages import ESTIMATORS
from trainers.config import ConfigError, load_config, validate_config

# a RunConfig dump made before the union: ppo, with every estimator's parameters
STORED = Path(__file__).with_name("stored_config_flat_algorithm.json")

# every parameter the flat section had, none at its default
FLAT = {
    "eps": 1e-5, "unbiased_std": False, "gamma": 0.9, "gae_lambda": 0.8, "whiten_advantages": False,
    "kl_in_reward": 0.05, "normalize": False, "history_baseline": True, "history_momentum": 0.5,
    "group_baseline": False, "gigpo_omega": 0.5, "gigpo_gamma": 0.7, "gigpo_norm": "none",
    "gigpo_similarity": 0.9,
}  # fmt: skip
# the constructor arguments the flat section gave for FLAT before the union (its estimator_kwargs)
KWARGS_BEFORE = {
    "grpo": {"eps": 1e-05, "unbiased_std": False},
    "dr_grpo": {},
    "rloo": {},
    "reinforce_pp": {
        "gamma": 0.9, "kl_coef": 0.05, "normalize": False, "history_baseline": True,
        "history_momentum": 0.5, "group_baseline": False,
    },
    "remax": {},
    "ppo": {"gamma": 0.9, "lam": 0.8, "kl_coef": 0.05, "whiten": False},
    "gigpo": {
        "gamma": 0.7, "omega": 0.5, "norm": "none", "eps": 1e-05, "unbiased_std": False,
        "similarity_threshold": 0.9,
    },
}  # fmt: skip


@pytest.mark.parametrize("estimator", sorted(KWARGS_BEFORE))
def test_a_flat_section_gives_the_constructor_arguments_it_gave_before(estimator):
    algorithm = validate_config({"algorithm": {"estimator": estimator, **FLAT}}).algorithm
    assert algorithm.estimator_kwargs() == KWARGS_BEFORE[estimator]
    assert type(algorithm.build()) is ESTIMATORS.get(estimator)


def stored_values(config: dict, prefix: str = "") -> set[tuple[str, str]]:
    """Every leaf of a config as (dotted path, JSON value): what a later schema must keep as it was."""
    leaves: set[tuple[str, str]] = set()
    for key, value in config.items():
        if isinstance(value, dict):
            leaves |= stored_values(value, f"{prefix}{key}.")
        else:
            leaves.add((f"{prefix}{key}", json.dumps(value, sort_keys=True)))
    return leaves


def test_a_stored_config_loads_unchanged_but_for_other_estimators_parameters():
    stored = json.loads(STORED.read_text(encoding="utf-8"))
    loaded = validate_config(stored).model_dump(mode="json")
    stored_rest = {k: v for k, v in stored.items() if k != "algorithm"}
    assert stored_values(loaded) >= stored_values(stored_rest)  # new sections' defaults may be added
    assert loaded["algorithm"] == {
        "estimator": "ppo", "gamma": 0.99, "gae_lambda": 0.9, "whiten_advantages": True, "kl_in_reward": 0.0,
    }  # fmt: skip
    assert validate_config(loaded) == validate_config(stored)


def test_flat_yaml_as_users_write_it(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("algorithm:\n  estimator: gigpo\n  gigpo_omega: 0.5\n  eps: 0.001\n", encoding="utf-8")
    algorithm = load_config(path).algorithm
    assert algorithm.estimator_kwargs()["omega"] == 0.5 and algorithm.estimator_kwargs()["eps"] == 0.001


def test_without_an_estimator_the_section_is_grpos():
    assert validate_config({"algorithm": {"eps": 0.01}}).algorithm.model_dump() == {
        "estimator": "grpo", "eps": 0.01, "unbiased_std": True,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("algorithm", "path"),
    [
        ({"estimator": "a2c"}, "algorithm.estimator"),
        ({"estimator": "grpo", "eps": 0}, "algorithm.eps"),
        ({"estimator": "ppo", "gae_lambda": 2}, "algorithm.gae_lambda"),
        ({"estimator": "ppo", "gae_lamda": 0.9}, "algorithm.gae_lamda"),
        ({"estimator": "gigpo", "gigpo_norm": "max"}, "algorithm.gigpo_norm"),
    ],
)
def test_errors_name_the_field(algorithm, path):
    with pytest.raises(ConfigError) as info:
        validate_config({"algorithm": algorithm})
    assert [p for p, _ in info.value.errors] == [path]


def test_another_estimators_parameter_is_ignored_as_before():
    # the flat layout accepted any estimator's parameters; only the chosen estimator's are read
    algorithm = validate_config({"algorithm": {"estimator": "grpo", "gae_lambda": 0.5}}).algorithm
    assert algorithm.estimator_kwargs() == {"eps": 1e-6, "unbiased_std": True}


def test_a_config_with_any_estimator_pickles():
    # the registry makes each estimator's tagged parameters class; pickle finds it as `<Estimator>.Params`
    for name in ESTIMATORS.names():
        config = validate_config({"algorithm": {"estimator": name}, "rollout": {"samples_per_prompt": 2}})
        assert pickle.loads(pickle.dumps(config)) == config
