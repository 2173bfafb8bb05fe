from django.urls import path

from workbench.datasets import api, views

app_name = "datasets"
urlpatterns = [
    path("", views.dataset_list, name="list"),
    path("new/", views.dataset_create, name="create"),
    path("<int:pk>/", views.dataset_detail, name="detail"),
    path("<int:pk>/edit/", views.dataset_edit, name="edit"),
    path("<int:pk>/v/<int:number>/rows/", views.dataset_rows, name="rows"),
    path("uploads/<int:pk>/", views.upload_detail, name="upload"),
    path("uploads/<int:pk>/status/", views.upload_status, name="upload_status"),
    path("api/", api.dataset_list, name="api_list"),
    path("api/<int:pk>/", api.dataset_detail, name="api_detail"),
]
