from django.urls import path

from workbench.toolschemas import api, views

app_name = "toolschemas"
urlpatterns = [
    path("", views.tool_schema_list, name="list"),
    path("new/", views.tool_schema_create, name="create"),
    path("import-mcp/", views.tool_schema_mcp_import, name="mcp_import"),
    path("<int:pk>/", views.tool_schema_detail, name="detail"),
    path("<int:pk>/edit/", views.tool_schema_edit, name="edit"),
    path("<int:pk>/v/<int:number>/try/", views.tool_schema_try, name="try"),
    path("api/", api.tool_schema_list, name="api_list"),
    path("api/<int:pk>/", api.tool_schema_detail, name="api_detail"),
]
