from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm

from accounts.models import User


class _LowercaseEmailMixin:
    cleaned_data: dict[str, str]

    def clean_email(self) -> str:
        # allauth finds people by the lower-cased address they type at sign-in.
        return self.cleaned_data["email"].strip().lower()


class UserCreationForm(_LowercaseEmailMixin, AdminUserCreationForm):
    class Meta(AdminUserCreationForm.Meta):
        model = User
        fields = ("username", "email")


class UserEditForm(_LowercaseEmailMixin, UserChangeForm):
    class Meta(UserChangeForm.Meta):
        model = User


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    add_form = UserCreationForm
    form = UserEditForm
    # People sign in with their email address, so it is asked for when adding them.
    add_fieldsets = (
        (None, {"classes": ("wide",), "fields": ("username", "email", "usable_password", "password1", "password2")}),
    )
    fieldsets = (
        *(BaseUserAdmin.fieldsets or ()),
        ("Quire", {"fields": ("display_name",)}),
    )
    list_display = ("username", "email", "display_name", "is_staff", "is_active", "last_login")
    search_fields = ("username", "email", "display_name")
