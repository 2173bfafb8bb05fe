from django.urls import path

from workbench.status import views

app_name = "status"
urlpatterns = [
    path("status/", views.status, name="page"),
    path("status/panel/", views.status_panel, name="panel"),
]
