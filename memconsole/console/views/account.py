"""Changing one's own password, in the console's own look (Django's views, console templates),
audited without the password."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import update_session_auth_hash
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import PasswordChangeForm
from django.http import HttpResponse, HttpResponseRedirect

from memconsole.memory import accounts


class PasswordChangeView(auth_views.PasswordChangeView):
    template_name = "console/password_change.html"

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "label_suffix": ""}  # a field's accessible name is its label

    def form_valid(self, form: PasswordChangeForm) -> HttpResponse:
        accounts.change_password(form.user, form.cleaned_data["new_password1"])
        update_session_auth_hash(self.request, form.user)  # this session stays logged in
        return HttpResponseRedirect(self.get_success_url())

    def form_invalid(self, form: PasswordChangeForm) -> HttpResponse:
        response = super().form_invalid(form)
        response.status_code = 400  # the form again, with the reasons beside the fields
        return response


password_change = PasswordChangeView.as_view()
password_change_done = auth_views.PasswordChangeDoneView.as_view(template_name="console/password_change_done.html")
