"""Every route needs a signed-in user, except the ones listed in PUBLIC.

The test walks the whole URL resolver (the admin included), builds a URL for each route
and sends it anonymously, as GET and as POST: each must answer with a redirect to a login
page. A new route is covered the moment it is added; one that answers anonymous visitors
fails here until it is added to PUBLIC, on purpose. A route whose URL this test cannot
build fails too: give it a sample in SAMPLES.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.converters import IntConverter, PathConverter, SlugConverter, StringConverter, UUIDConverter
from django.urls.resolvers import RegexPattern, RoutePattern

pytestmark = pytest.mark.django_db

# name -> why anyone may open it
PUBLIC = {
    "home": "only redirects to the conversation list, which needs a signed-in user",
    "login": "the login form",
    "logout": "logging out needs no session",
    "admin:login": "the admin's login form",
    "admin:logout": "logging out needs no session",
    "teams:join": "an invitation link: whoever has it sees the team and may sign up or log in to join",
    "teams:join-signup": "creates an account from a valid invitation link (its visitor has none yet)",
    "sso:start": "starts a single sign-on at the provider (404 unless OIDC_ISSUER is set)",
    "sso:callback": "the provider's answer to a single sign-on, checked against the session's state",
}
SAMPLES = {IntConverter: "1", StringConverter: "x", SlugConverter: "x", PathConverter: "x/y"}
LOGIN_PAGES = ("/login/", "/admin/login/")


@dataclass(frozen=True)
class Route:
    name: str
    path: str
    view: Callable[..., Any]


def routes(
    patterns: list[URLPattern | URLResolver], prefix: str = "", namespace: str = ""
) -> Iterator[Route]:
    for entry in patterns:
        piece = _sample(entry.pattern)
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from routes(entry.url_patterns, prefix + piece, inner)
        else:
            name = f"{namespace}{entry.name}" if entry.name else f"{namespace}<unnamed {entry.pattern}>"
            yield Route(name=name, path="/" + prefix + piece, view=entry.callback)


def _sample(pattern: object) -> str:
    """A URL piece that the pattern matches: converters get SAMPLES, regex groups their first option."""
    if isinstance(pattern, RoutePattern):
        route = str(pattern)
        for name, converter in pattern.converters.items():
            sample = "00000000-0000-0000-0000-000000000000" if isinstance(converter, UUIDConverter) else None
            sample = sample or SAMPLES[type(converter)]
            route = re.sub(rf"<(?:\w+:)?{name}>", sample, route)
        return route
    assert isinstance(pattern, RegexPattern)
    regex = str(pattern).lstrip("^").rstrip("$").replace("\\Z", "")
    regex = re.sub(
        r"\(\?P<\w+>([^)]*)\)", lambda group: group.group(1).split("|")[0].replace(".*", "x"), regex
    )
    return regex.replace("\\", "")


ROUTES = sorted(set(routes(get_resolver().url_patterns)), key=lambda route: route.path)


def test_the_walk_found_the_apps_and_the_admins_routes() -> None:
    names = {route.name for route in ROUTES}
    assert {"chat:conversation-detail", "admin:index", "admin:accounts_team_change", "home"} <= names
    assert set(PUBLIC) <= names, "PUBLIC names a route that no longer exists"


@pytest.mark.parametrize("route", ROUTES, ids=lambda route: f"{route.name} {route.path}")
def test_every_route_needs_a_signed_in_user_unless_it_is_public(route: Route) -> None:
    assert resolve(route.path).func is route.view, f"{route.path} reaches another route: add a sample"
    if route.name in PUBLIC:
        return

    for method in ("get", "post"):
        response = getattr(Client(), method)(route.path)
        location = response.headers.get("Location", "")
        assert response.status_code == 302 and location.startswith(LOGIN_PAGES), (
            f"{method.upper()} {route.path} ({route.name}) answered {response.status_code} to an anonymous "
            "visitor: protect it, or add it to PUBLIC with the reason"
        )
