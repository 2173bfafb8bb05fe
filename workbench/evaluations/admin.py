from django.contrib import admin

from .models import Evaluation


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "model_label", "dataset_version", "split", "status", "created_at")
    list_filter = ("status", "source")
    readonly_fields = ("config", "metrics")
