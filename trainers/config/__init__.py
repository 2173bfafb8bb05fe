"""The typed run configuration, its JSON Schema, loading from files, and the recipes as presets."""

from trainers.config.loader import ConfigError, load_config, validate_config
from trainers.config.presets import PRESETS, preset_config
from trainers.config.schema import RunConfig

__all__ = ["PRESETS", "ConfigError", "RunConfig", "load_config", "preset_config", "validate_config"]
