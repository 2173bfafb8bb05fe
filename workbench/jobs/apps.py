from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "workbench.jobs"
    label = "jobs"

    def ready(self) -> None:
        from workbench.jobs import heartbeat  # noqa: F401  (connects the worker signals)
