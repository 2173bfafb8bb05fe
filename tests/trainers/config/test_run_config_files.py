import json

import jsonschema
import pytest

from trainers.config import ConfigError, RunConfig, load_config, preset_config


def walk_properties(schema):
    """Every (object name, property name, property schema) of the schema and its $defs."""
    objects = [("RunConfig", schema), *schema.get("$defs", {}).items()]
    for name, obj in objects:
        for prop, spec in obj.get("properties", {}).items():
            yield name, prop, spec


def test_json_schema_exports_with_a_description_on_every_field():
    schema = RunConfig.json_schema()
    json.dumps(schema)  # serialisable as is
    missing = [f"{obj}.{prop}" for obj, prop, spec in walk_properties(schema) if not spec.get("description")]
    assert missing == []


def test_json_schema_accepts_a_preset_and_rejects_unknown_keys():
    schema = RunConfig.json_schema()
    data = json.loads(preset_config("gigpo").model_dump_json())
    jsonschema.validate(data, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**data, "typo": 1}, schema)


def test_load_json_file(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"training": {"steps": 5}, "loss": {"clip_high": 0.28}}))
    config = load_config(path)
    assert (config.training.steps, config.loss.clip_high) == (5, 0.28)


def test_load_yaml_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(
        "algorithm:\n  estimator: rloo\nfilters:\n  - name: dapo_dynamic\n    max_refill_rounds: 2\n"
    )
    config = load_config(path)
    assert config.algorithm.estimator == "rloo"
    assert config.filters[0].max_refill_rounds == 2


def test_a_saved_config_loads_back_equal(tmp_path):
    config = preset_config("toolrl")
    path = tmp_path / "saved.json"
    path.write_text(config.model_dump_json(indent=2))
    assert load_config(path) == config


def test_file_errors_name_the_file_and_the_key(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"optimizer": {"lr": 0.001, "momentum": 0.9}}))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)
    assert [p for p, _ in info.value.errors] == ["optimizer.momentum"]


def test_malformed_json_is_a_config_error(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(path)
