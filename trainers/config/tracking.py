"""`tracking:` of a run config: the experiment trackers its metrics are mirrored to, by name and tags only.

Credentials, server URLs and local roots are the operator's (environment variables read by the worker,
see docs/configuration.md): a run config naming one is refused with the field named.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"  # one path component: no separators, no "..", no leading dot

# keys that would carry a secret, a server or a local root: they belong to the operator's environment
_OPERATOR_KEYS = ("url", "uri", "host", "key", "token", "secret", "password", "dir", "root", "entity")


def _refuse_operator_keys(data: Any, section: str) -> Any:
    if isinstance(data, dict):
        for key in data:
            if any(word in str(key).lower() for word in _OPERATOR_KEYS):
                raise ValueError(
                    f"tracking.{section}.{key}: credentials, server URLs and local roots come from the "
                    "operator's environment (WORKBENCH_* variables), never from a run config"
                )
    return data


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")
    section: ClassVar[str] = ""

    @model_validator(mode="before")
    @classmethod
    def _no_operator_keys(cls, data: Any) -> Any:
        return _refuse_operator_keys(data, cls.section)


class WandbTracking(_Section):
    """A Weights & Biases run (offline unless the operator sets WORKBENCH_WANDB_MODE=online)."""

    section: ClassVar[str] = "wandb"
    project: str = Field(..., min_length=1, description="W&B project")
    name: str | None = Field(None, description="W&B run name; none = the run's name")
    tags: list[str] = Field(default_factory=list, description="W&B run tags")


class MlflowTracking(_Section):
    """An MLflow run, in the operator's tracking server (WORKBENCH_MLFLOW_TRACKING_URI)."""

    section: ClassVar[str] = "mlflow"
    experiment: str = Field(..., min_length=1, description="MLflow experiment name")
    tags: dict[str, str] = Field(default_factory=dict, description="MLflow run tags")


class TensorBoardTracking(_Section):
    """TensorBoard event files under WORKBENCH_TENSORBOARD_ROOT (default: the run directory)."""

    section: ClassVar[str] = "tensorboard"
    name: str = Field("tensorboard", pattern=_NAME, description="subdirectory of the TensorBoard root")

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"name": data}
        return {} if data is None else data


class TrackioTracking(_Section):
    """A Trackio run, stored in WORKBENCH_TRACKIO_DIR (default: Trackio's own)."""

    section: ClassVar[str] = "trackio"
    project: str = Field(..., pattern=_NAME, description="Trackio project (its database file's name)")


class TrackingConfig(BaseModel):
    """The trackers a run's metrics are mirrored to; none set = no mirror."""

    model_config = ConfigDict(extra="forbid")

    wandb: WandbTracking | None = Field(None, description="mirror to Weights & Biases")
    mlflow: MlflowTracking | None = Field(None, description="mirror to MLflow")
    tensorboard: TensorBoardTracking | None = Field(
        None, description="mirror to TensorBoard: {} or a subdirectory name"
    )
    trackio: TrackioTracking | None = Field(None, description="mirror to Trackio")

    def enabled(self) -> dict[str, BaseModel]:
        """The configured trackers by name."""
        sections = {"wandb": self.wandb, "mlflow": self.mlflow, "tensorboard": self.tensorboard,
                    "trackio": self.trackio}  # fmt: skip
        return {name: section for name, section in sections.items() if section is not None}
