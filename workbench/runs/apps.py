from django.apps import AppConfig


class RunsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "workbench.runs"
    label = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        from workbench.runs.execution import sweeper  # noqa: F401  (connects the worker signals)
