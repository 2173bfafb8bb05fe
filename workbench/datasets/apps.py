from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "workbench.datasets"
    label = "datasets"
