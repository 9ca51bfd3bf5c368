"""Start a sign-in at the provider, and take its answer; a refused sign-in gets a page saying why."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.generic import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from playground.teams.sso.discovery import SsoRefused, endpoints, sso_enabled

STALE = (
    "This sign-in is not one this browser started, or it was already used. Start again from the login page."
)
NO_ACCOUNT = "The sign-in did not lead to one active account here. Ask an administrator."


def refusal_page(request: HttpRequest, message: str, *, status: int) -> HttpResponse:
    context = {"message": message, "provider_name": settings.OIDC_PROVIDER_NAME, "status": status}
    return render(request, "registration/sso_refused.html", context, status=status)


class SsoStartView(OIDCAuthenticationRequestView):  # type: ignore[misc]  # the library ships no types
    """Sends the browser to the provider (state, nonce and PKCE verifier kept in the session)."""

    def __init__(self, **kwargs: Any) -> None:
        View.__init__(self, **kwargs)  # not the library's: it reads the endpoint, discovered here on demand

    @property
    def OIDC_OP_AUTH_ENDPOINT(self) -> str:
        return endpoints().authorization

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return str(settings.OIDC_RP_CLIENT_ID)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not sso_enabled():
            raise Http404("Single sign-on is not configured.")
        try:
            response: HttpResponse = super().get(request)
        except SsoRefused as refused:
            return refusal_page(request, refused.message, status=refused.status)
        return response


class SsoCallbackView(OIDCAuthenticationCallbackView):  # type: ignore[misc]
    """The redirect URL registered at the provider (`/sso/callback/`)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not sso_enabled():
            raise Http404("Single sign-on is not configured.")
        try:
            response: HttpResponse = super().get(request)
        except SsoRefused as refused:
            return refusal_page(request, refused.message, status=refused.status)
        except SuspiciousOperation:  # a state this session never started, or already used
            return refusal_page(request, STALE, status=400)
        return response

    def login_failure(self) -> HttpResponse:
        request: HttpRequest = self.request
        if error := request.GET.get("error"):
            detail = request.GET.get("error_description") or error
            message = f"The sign-in provider refused the sign-in: {detail[:200]}"
            return refusal_page(request, message, status=403)
        if "code" in request.GET and "oidc_states" not in request.session:
            return refusal_page(request, STALE, status=400)
        return refusal_page(request, NO_ACCOUNT, status=403)
