from django.urls import path

from .web import api, views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("new/", views.run_create, name="create"),
    path("new/config.yaml", views.run_config_yaml, name="config_yaml"),
    path("compare/", views.run_compare, name="compare"),
    path("compare/series/", api.compare_series, name="compare_series"),
    path("<int:pk>/", views.run_detail, name="detail"),
    path("<int:pk>/status/", views.run_status, name="status"),
    path("<int:pk>/cancel/", views.run_cancel, name="cancel"),
    path("<int:pk>/edit/", views.run_edit, name="edit"),
    path("<int:pk>/series/", api.run_series, name="series"),
    path("<int:pk>/trajectories/", views.trajectory_list, name="trajectories"),
    path("<int:pk>/trajectories/<int:tid>/", views.trajectory_detail, name="trajectory"),
    path("<int:pk>/steps/<int:step>/groups/<path:group>/", views.trajectory_group, name="group"),
    path("<int:pk>/export/metrics.csv", api.metrics_csv, name="export_metrics"),
    path("<int:pk>/export/trajectories.jsonl", api.trajectories_jsonl, name="export_trajectories"),
]
