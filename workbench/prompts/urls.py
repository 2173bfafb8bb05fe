"""URLs of the prompts app (filled in by the catalog issue)."""

app_name = "prompts"
urlpatterns: list = []
