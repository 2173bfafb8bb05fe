from django.apps import AppConfig


class RewardsConfig(AppConfig):
    name = "workbench.rewards"
    label = "rewards"
