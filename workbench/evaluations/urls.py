from django.urls import path

from . import views

app_name = "evaluations"
urlpatterns = [
    path("", views.evaluation_list, name="list"),
    path("new/", views.evaluation_create, name="create"),
    path("<int:pk>/", views.evaluation_detail, name="detail"),
    path("<int:pk>/trajectories/<int:tid>/", views.trajectory_detail, name="trajectory"),
    path("leaderboard/<int:version_pk>/", views.leaderboard, name="leaderboard"),
]
