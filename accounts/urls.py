from __future__ import annotations

from django.urls import path

from accounts import token_views, views

urlpatterns = [
    path("invite/", views.invite, name="user_invite"),
    path("api-token/", token_views.api_token, name="api_token"),
]
