"""URLs of the toolschemas app (filled in by the catalog issue)."""

app_name = "toolschemas"
urlpatterns: list = []
