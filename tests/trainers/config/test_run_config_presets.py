import pytest

from trainers.config import PRESETS, ConfigError, RunConfig, preset_config
from trainers.config.presets import deep_merge, expand_dotted

RECIPES = [
    "torl",
    "toolrl",
    "starpo",
    "starpo_s",
    "otc_grpo",
    "gigpo",
    "tool_n1",
    "artist",
    "zerotir",
    "sft_then_grpo",
]


def test_every_recipe_of_the_brief_is_a_preset():
    assert set(RECIPES) <= set(PRESETS.names())


@pytest.mark.parametrize("name", RECIPES)
def test_every_preset_validates_and_round_trips(name):
    config = preset_config(name)
    assert config.name == name
    assert RunConfig.model_validate_json(config.model_dump_json()) == config


def test_torl_follows_the_paper():
    config = preset_config("torl")
    assert (config.loss.kl, config.loss.kl_coef) == ("none", 0.0)
    assert config.sampling.temperature == 1.0
    assert config.limits.on_tool_limit == "continue_text"
    assert (config.rollout.prompts_per_step, config.rollout.samples_per_prompt) == (128, 16)
    assert [c.name for c in config.reward.components] == ["torl"]


def test_starpo_s_filters_by_variance_with_clip_higher_and_no_kl():
    config = preset_config("starpo_s")
    assert config.filters[0].name == "starpo_s" and config.filters[0].keep_fraction == 0.25
    assert (config.loss.clip_low, config.loss.clip_high, config.loss.kl) == (0.2, 0.28, "none")
    assert config.algorithm.estimator == "ppo"


def test_zerotir_band_and_limit_notice():
    config = preset_config("zerotir")
    band = config.filters[0]
    assert (band.name, band.low, band.high) == ("zerotir_band", 0.2, 0.8)
    assert config.limits.on_tool_limit == "notice"


def test_toolrl_schedules_format_and_correctness_apart():
    weights = preset_config("toolrl").reward.weights_at(0, 150)
    assert weights == pytest.approx({"toolrl_format": 2.0, "toolrl_correct": 2 / 3})


def test_overrides_merge_nested_and_dotted_keys():
    config = preset_config("torl", loss={"clip_high": 0.28}, **{"training.steps": 7})
    assert config.loss.clip_high == 0.28
    assert config.loss.kl == "none"  # the preset's other loss keys stay
    assert config.training.steps == 7


def test_overrides_are_validated():
    with pytest.raises(ConfigError, match="loss.clip_hihg"):
        preset_config("torl", loss={"clip_hihg": 0.28})


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(KeyError, match="torl"):
        preset_config("alphazero")


def test_merge_helpers():
    assert deep_merge({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": 3}, "l": [2]}) == {
        "a": {"b": 3, "c": 2},
        "l": [2],
    }
    assert expand_dotted({"a.b.c": 1, "d": 2}) == {"a": {"b": {"c": 1}}, "d": 2}
