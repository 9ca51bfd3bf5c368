"""Error pages (404, 403, 400, 500, the CSRF failure and the login lockout) have the app's look
and a way back, with DEBUG off as in production."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import path

from playground.urls import urlpatterns as app_urlpatterns
from tests.support.actors import Actors
from tests.support.clients import client_for

if TYPE_CHECKING:
    from tests.support.clients import TestResponse

pytestmark = pytest.mark.django_db


@login_not_required
def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug")


# The app's routes plus one that fails, for the 500 page (`pytest.mark.urls`).
urlpatterns = [path("boom/", boom), *app_urlpatterns]


def broken_context_processor(request: HttpRequest) -> dict[str, Any]:
    raise RuntimeError("the database is down")


@pytest.fixture(autouse=True)
def production_debug(settings: Any) -> None:
    settings.DEBUG = False


def assert_app_look(response: TestResponse, status: int, heading: str, back: str = 'href="/"') -> str:
    assert response.status_code == status
    page = response.content.decode()
    assert '<link rel="stylesheet" href="/static/css/app.css">' in page
    assert '<header class="topbar">' in page and "error-card" in page
    assert heading in page
    assert back in page, "a link back"
    return page


def test_a_page_that_does_not_exist_is_a_styled_404_with_the_apps_navigation(actors: Actors) -> None:
    client = client_for(actors.teammate)

    page = assert_app_look(client.get("/no-such-page/"), 404, "There is nothing here")

    assert "<code>/no-such-page/</code>" in page
    assert 'aria-label="Main"' in page, "a signed-in user keeps the top navigation"


def test_a_refused_action_is_a_styled_403_saying_why(actors: Actors) -> None:
    client = client_for(actors.viewer)

    response = client.post(f"/teams/{actors.team.pk}/invitations/", {"role": "member"})

    assert_app_look(response, 403, "Your role in this team does not allow that.")


def test_a_request_for_a_host_the_site_does_not_serve_is_a_styled_400() -> None:
    response = Client().get("/login/", HTTP_HOST="evil.example")

    assert_app_look(response, 400, "That request could not be read")


@pytest.mark.urls(__name__)
def test_a_failure_is_a_styled_500_that_needs_no_context_processor(settings: Any) -> None:
    """A 500 may come from the database the context processors read: the page uses none."""
    processors = settings.TEMPLATES[0]["OPTIONS"]["context_processors"]
    settings.TEMPLATES = [
        {
            **settings.TEMPLATES[0],
            "OPTIONS": {"context_processors": [*processors, f"{__name__}.broken_context_processor"]},
        }
    ]

    with pytest.raises(RuntimeError, match="the database is down"):
        Client().get("/login/")  # an ordinary page runs the processors

    response = Client(raise_request_exception=False).get("/boom/")

    page = assert_app_look(response, 500, "Something went wrong on our side")
    assert "a bug" not in page, "no detail of the error leaks"


def test_an_expired_form_is_a_styled_403_that_says_to_reload() -> None:
    response = Client(enforce_csrf_checks=True).post("/login/", {"username": "x", "password": "y"})

    assert_app_look(response, 403, "This form has expired")


def test_the_login_lockout_is_a_styled_429_with_a_way_back(actors: Actors) -> None:
    client = Client(REMOTE_ADDR="198.51.100.7")
    for _ in range(10):
        response = client.post("/login/", {"username": "owner", "password": "wrong"})

    assert_app_look(response, 429, "Too many failed logins", back='href="/login/"')
