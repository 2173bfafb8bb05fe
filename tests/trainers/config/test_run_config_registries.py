"""The config's names and constructor arguments fit the registries the training loop looks them up in."""

import pytest

from trainers.advantages import ESTIMATORS
from trainers.config import PRESETS, preset_config, validate_config
from trainers.config.algorithm import filter_kwargs
from trainers.filters import FILTERS
from trainers.losses.objective import PolicyLossConfig


@pytest.mark.parametrize("estimator", ESTIMATORS.names())
def test_every_estimator_builds_from_its_parameters(estimator):
    config = validate_config({"algorithm": {"estimator": estimator}})
    assert type(config.algorithm.build()) is ESTIMATORS.get(estimator)


@pytest.mark.parametrize("name", ["zerotir_band", "starpo_s", "dapo_dynamic"])
def test_every_filter_builds_from_its_kwargs(name):
    config = validate_config({"filters": [{"name": name}]})
    FILTERS.get(name)(**filter_kwargs(config.filters[0]))


@pytest.mark.parametrize("name", PRESETS.names())
def test_every_presets_loss_builds(name):
    PolicyLossConfig(**preset_config(name).loss.policy_loss_kwargs())
