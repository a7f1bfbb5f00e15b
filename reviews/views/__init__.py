"""The reviews app's pages; each module keeps its own ``urlpatterns`` (collected in reviews/urls.py)."""
