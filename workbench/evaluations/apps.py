from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "workbench.evaluations"
    label = "evaluations"
    verbose_name = "Evaluations"
