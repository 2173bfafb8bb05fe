import pytest

from trainers.config import ConfigError, RunConfig, validate_config
from trainers.config.algorithm import filter_kwargs


def errors_of(data):
    with pytest.raises(ConfigError) as info:
        validate_config(data)
    return dict(info.value.errors)


def test_defaults_validate():
    config = RunConfig()
    assert config.algorithm.estimator == "grpo"
    assert [c.name for c in config.reward.components] == ["correctness"]


def test_unknown_top_level_key_is_named():
    assert "trainng" in errors_of({"trainng": {"steps": 3}})


def test_unknown_nested_key_names_its_path():
    errors = errors_of({"loss": {"clip_hihg": 0.3}})
    assert list(errors) == ["loss.clip_hihg"]
    assert "not permitted" in errors["loss.clip_hihg"]


def test_unknown_key_in_a_list_item_names_the_index():
    assert "filters.0.keep_fraktion" in errors_of({"filters": [{"name": "starpo_s", "keep_fraktion": 0.5}]})


def test_unknown_key_in_reused_sections_is_named():
    assert "limits.max_calls" in errors_of({"limits": {"max_calls": 3}})
    assert "sampling.temp" in errors_of({"sampling": {"temp": 0.5}})


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"loss": {"clip_low": 1.5}}, "loss.clip_low"),
        ({"loss": {"kl": "k4"}}, "loss.kl"),
        ({"loss": {"dual_clip": 0.5}}, "loss.dual_clip"),
        ({"algorithm": {"estimator": "a2c"}}, "algorithm.estimator"),
        ({"sampling": {"top_p": 0}}, "sampling.top_p"),
        ({"optimizer": {"lr": -1}}, "optimizer.lr"),
        ({"optimizer": {"betas": [0.9, 1.5]}}, "optimizer.betas"),
        ({"model": {"device": "tpu"}}, "model.device"),
        ({"template": {"name": "nope"}}, "template.name"),
        ({"tools": [{"name": "teleport"}]}, "tools.0.name"),
        ({"filters": [{"name": "zerotir_band", "low": 2}]}, "filters.0.low"),
        ({"filters": [{"name": "magic"}]}, "filters.0.name"),
        ({"rollout": {"samples_per_prompt": 0}}, "rollout.samples_per_prompt"),
    ],
)
def test_bad_values_are_errors_naming_the_key(data, path):
    assert path in errors_of(data)


def test_bad_reward_params_name_the_component():
    errors = errors_of({"reward": {"components": [{"name": "overlong", "params": {"max_length": 0}}]}})
    assert "params.max_length" in errors["reward.components.0"]


def test_group_estimators_need_several_samples():
    assert "samples_per_prompt" in " ".join(errors_of({"rollout": {"samples_per_prompt": 1}}).values())
    config = validate_config({"rollout": {"samples_per_prompt": 1}, "algorithm": {"estimator": "ppo"}})
    assert config.rollout.samples_per_prompt == 1


def test_kl_weight_needs_a_kl_estimator():
    assert "kl" in " ".join(errors_of({"loss": {"kl_coef": 0.1}}).values())


def test_minibatch_must_fit_the_batch_and_the_accumulation():
    assert "exceeds" in " ".join(errors_of({"training": {"minibatch_size": 65}}).values())  # batch 8 x 8
    assert "training" in errors_of({"training": {"minibatch_size": 10, "grad_accumulation": 3}})


def test_a_filter_may_appear_once():
    assert errors_of({"filters": [{"name": "starpo_s"}, {"name": "starpo_s"}]})


def test_constructor_arguments_for_the_registries():
    config = validate_config(
        {
            "algorithm": {"estimator": "gigpo", "gigpo_omega": 0.5, "gigpo_similarity": 0.9},
            "filters": [{"name": "dapo_dynamic", "max_refill_rounds": 2}],
            "loss": {"clip_high": 0.28, "kl": "k3", "kl_coef": 0.01},
        }
    )
    assert config.algorithm.estimator_kwargs()["omega"] == 0.5
    assert config.algorithm.estimator_kwargs()["similarity_threshold"] == 0.9
    assert filter_kwargs(config.filters[0]) == {"tolerance": 1e-6}
    assert config.loss.policy_loss_kwargs()["eps_high"] == 0.28


def test_echo_trap_section_takes_the_detectors_thresholds():
    config = validate_config({"echo_trap": {"on_alert": "starpo_s", "detector": {"std_collapse_ratio": 0.2}}})
    assert config.echo_trap.detector.std_collapse_ratio == 0.2
    assert "echo_trap.detector.std_colapse_ratio" in errors_of(
        {"echo_trap": {"detector": {"std_colapse_ratio": 1}}}
    )
