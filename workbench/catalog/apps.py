from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "workbench.catalog"
    label = "catalog"
