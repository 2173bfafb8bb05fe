from django.urls import path

from workbench.rewards import api, views

app_name = "rewards"
urlpatterns = [
    path("", views.reward_definition_list, name="list"),
    path("new/", views.reward_definition_create, name="create"),
    path("<int:pk>/", views.reward_definition_detail, name="detail"),
    path("<int:pk>/edit/", views.reward_definition_edit, name="edit"),
    path("<int:pk>/v/<int:number>/test/", views.reward_definition_test, name="test"),
    path("api/", api.reward_definition_list, name="api_list"),
    path("api/<int:pk>/", api.reward_definition_detail, name="api_detail"),
]
