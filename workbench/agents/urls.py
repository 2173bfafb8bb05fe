from django.urls import path

from workbench.agents import api, views

app_name = "agents"
urlpatterns = [
    path("", views.agent_program_list, name="list"),
    path("new/", views.agent_program_create, name="create"),
    path("<int:pk>/", views.agent_program_detail, name="detail"),
    path("<int:pk>/edit/", views.agent_program_edit, name="edit"),
    path("api/", api.agent_program_list, name="api_list"),
    path("api/<int:pk>/", api.agent_program_detail, name="api_detail"),
]
