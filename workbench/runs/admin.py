"""Staff views of runs; metric points and trajectories are left to the pages (millions of rows)."""

from django.contrib import admin

from .models import Alert, Checkpoint, Run, Tag


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "status", "last_step", "created_by", "created_at"]
    list_filter = ["status", "team"]
    search_fields = ["name", "notes"]
    readonly_fields = ["config", "celery_task_id", "worker", "attempts", "log_tail", "error"]


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    list_display = ["name", "team"]


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ["run", "step", "rule", "severity"]
    list_filter = ["rule", "severity"]


@admin.register(Checkpoint)
class CheckpointAdmin(admin.ModelAdmin):
    list_display = ["run", "step", "path"]
