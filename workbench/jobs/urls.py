from django.urls import path

from workbench.jobs import views

app_name = "jobs"
urlpatterns = [
    path("status/check/<str:queue>/", views.queue_check_start, name="queue_check"),
    path("jobs/<uuid:pk>/progress/", views.progress, name="progress"),
    path("healthz", views.health, name="health"),
]
