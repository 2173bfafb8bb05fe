from django.urls import path

from workbench.catalog import views

app_name = "catalog"
urlpatterns = [
    path("<str:kind>/<int:pk>/history/", views.history, name="history"),
    path("<str:kind>/<int:pk>/diff/<int:a>/<int:b>/", views.diff, name="diff"),
    path("<str:kind>/<int:pk>/delete/", views.delete, name="delete"),
]
