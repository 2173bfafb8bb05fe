"""Tasks of the jobs app: a queue check that proves a queue has a live worker end to end."""

from celery import shared_task
from django.utils import timezone

from workbench.jobs import services
from workbench.jobs.models import JobProgress


@shared_task(bind=True, acks_late=True)
def queue_check(self, *, job_id: str) -> None:
    with services.job_failure_recorded(job_id=job_id):
        job = JobProgress.objects.get(pk=job_id)
        queue = (self.request.delivery_info or {}).get("routing_key", "?")
        services.job_update(job_id=job_id, progress=0.5, message=f"Picked up by {self.request.hostname}")
        waited = (timezone.now() - job.created_at).total_seconds()
        services.job_succeed(
            job_id=job_id, message=f"Queue {queue} answered by {self.request.hostname} after {waited:.1f} s"
        )
