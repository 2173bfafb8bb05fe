from django.urls import path

from workbench.prompts import api, views

app_name = "prompts"
urlpatterns = [
    path("", views.prompt_template_list, name="list"),
    path("new/", views.prompt_template_create, name="create"),
    path("preview/", views.prompt_template_preview, name="preview"),
    path("<int:pk>/", views.prompt_template_detail, name="detail"),
    path("<int:pk>/edit/", views.prompt_template_edit, name="edit"),
    path("api/", api.prompt_template_list, name="api_list"),
    path("api/<int:pk>/", api.prompt_template_detail, name="api_detail"),
]
