"""Changing one's own password, in the console's own look (Django's views, console templates),
audited without the password. A wrong current password counts as a failed login."""

from __future__ import annotations

from typing import Any

from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_lockout_response
from django.contrib.auth import logout, update_session_auth_hash
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.signals import user_login_failed
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from memconsole.memory import accounts


class PasswordChangeView(auth_views.PasswordChangeView):
    template_name = "console/password_change.html"

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "label_suffix": ""}  # a field's accessible name is its label

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # The current password is checked here, not by a login: guesses count as failed logins
        # (django-axes), so a stolen session cannot try them without limit.
        credentials = {"username": request.user.get_username()}
        if AxesProxyHandler.is_locked(request, credentials):
            logout(request)
            locked: HttpResponse = get_lockout_response(request, None, credentials)
            return locked
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: PasswordChangeForm) -> HttpResponse:
        accounts.change_password(form.user, form.cleaned_data["new_password1"])
        update_session_auth_hash(self.request, form.user)  # this session stays logged in
        return HttpResponseRedirect(self.get_success_url())

    def form_invalid(self, form: PasswordChangeForm) -> HttpResponse:
        if "old_password" in form.errors:
            credentials = {"username": form.user.get_username()}
            user_login_failed.send(sender=type(self), credentials=credentials, request=self.request)
            if getattr(self.request, "axes_locked_out", False):
                logout(self.request)
                locked: HttpResponse = get_lockout_response(self.request, None, credentials)
                return locked
        response = super().form_invalid(form)
        response.status_code = 400  # the form again, with the reasons beside the fields
        return response


password_change = PasswordChangeView.as_view()
password_change_done = auth_views.PasswordChangeDoneView.as_view(template_name="console/password_change_done.html")
