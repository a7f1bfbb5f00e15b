"""The annotation app's pages, one module per area: ``corpus`` (datasets, items, imports),
``projects`` (creating and running projects, the lead's dashboard) and ``workbench``
(annotating). Each module lists its own ``urlpatterns``."""
