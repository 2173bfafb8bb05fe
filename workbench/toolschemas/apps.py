from django.apps import AppConfig


class ToolSchemasConfig(AppConfig):
    name = "workbench.toolschemas"
    label = "toolschemas"
