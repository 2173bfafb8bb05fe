from django.contrib import admin

from workbench.jobs.models import JobProgress, WorkerHeartbeat


@admin.register(JobProgress)
class JobProgressAdmin(admin.ModelAdmin):
    list_display = ["kind", "team", "status", "progress", "created_at"]
    list_filter = ["status", "kind"]


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["hostname", "pid", "last_seen"]
