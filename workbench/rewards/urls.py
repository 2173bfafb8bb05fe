"""URLs of the rewards app (filled in by the catalog issue)."""

app_name = "rewards"
urlpatterns: list = []
