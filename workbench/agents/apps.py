from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "workbench.agents"
    label = "agents"
