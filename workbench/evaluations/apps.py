from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "workbench.evaluations"
    label = "evaluations"
    verbose_name = "Evaluations"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from workbench.runs.models import Checkpoint

        from .scheduling import on_checkpoint_saved

        post_save.connect(on_checkpoint_saved, sender=Checkpoint, dispatch_uid="evaluations_on_checkpoint")
