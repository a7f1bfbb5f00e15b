from __future__ import annotations

from django.urls import path

from accounts import views

urlpatterns = [
    path("invite/", views.invite, name="user_invite"),
]
