from django.apps import AppConfig


class PromptsConfig(AppConfig):
    name = "workbench.prompts"
    label = "prompts"
