"""The Django project: teams, the versioned catalog, jobs and (later) runs."""

# Celery's app must be loaded with Django so that @shared_task binds to it.
from workbench.celery_app import app as celery_app

__all__ = ("celery_app",)
