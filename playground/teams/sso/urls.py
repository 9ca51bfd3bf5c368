from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.urls import path

from playground.teams.sso.views import SsoCallbackView, SsoStartView

app_name = "sso"

urlpatterns = [
    path("login/", login_not_required(SsoStartView.as_view()), name="start"),
    path("callback/", login_not_required(SsoCallbackView.as_view()), name="callback"),
]
