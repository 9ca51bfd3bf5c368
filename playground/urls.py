from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from django.views.generic import RedirectView

from playground.teams.views.joining import LoginView

urlpatterns = [
    # Public so that "/" leads to the list (and from there to the login with next=/chat/).
    path("", login_not_required(RedirectView.as_view(pattern_name="chat:conversation-list")), name="home"),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Single sign-on with OpenID Connect (docs/sso.md); 404 unless OIDC_ISSUER is set.
    path("sso/", include("playground.teams.sso.urls")),
    path("admin/", admin.site.urls),
    path("chat/", include("playground.chat.urls")),
    path("batches/", include("playground.batches.urls")),
    path("evals/", include("playground.evals.urls")),
    path("teams/", include("playground.teams.urls")),
    path("presets/", include("playground.presets.urls")),
    # The Usage pages are the `analytics` app (namespace "analytics"), not the `usage` floor.
    path("usage/", include("playground.analytics.urls")),
]
