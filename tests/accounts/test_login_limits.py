"""Login limits on the site login and the admin login: per username and per client address."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.support.actors import Actors

pytestmark = pytest.mark.django_db

LOGIN_PAGES = [reverse("login"), reverse("admin:login")]


def attempt(url: str, username: str, password: str, *, address: str = "198.51.100.7") -> int:
    response = Client(REMOTE_ADDR=address).post(url, {"username": username, "password": password})
    return response.status_code


def fail_ten_times(url: str, username: str) -> None:
    statuses = [attempt(url, username, "wrong-password") for _ in range(10)]
    assert statuses == [200] * 9 + [429]  # the form again, until the tenth failure locks


@pytest.mark.parametrize("url", LOGIN_PAGES)
def test_ten_failures_for_a_username_lock_it_from_every_address_with_a_429_saying_when(
    actors: Actors, url: str
) -> None:
    fail_ten_times(url, "owner")

    response = Client(REMOTE_ADDR="203.0.113.99").post(
        url, {"username": "owner", "password": "password-owner"}
    )

    assert response.status_code == 429
    assert response["Retry-After"] == "900"
    content = response.content.decode()
    assert "failed 10 times" in content
    assert "Try again in 15 minutes" in content
    assert "_auth_user_id" not in response.client.session  # the right password did not sign in


@pytest.mark.parametrize("url", LOGIN_PAGES)
def test_ten_failures_from_one_address_lock_that_address_for_every_username(actors: Actors, url: str) -> None:
    statuses = [attempt(url, f"guess-{number}", "wrong-password") for number in range(10)]

    assert statuses == [200] * 9 + [429]
    assert attempt(url, "teammate", "password-teammate") == 429
    assert (
        attempt(url, "teammate", "password-teammate", address="203.0.113.99") != 429
    )  # elsewhere: not locked


def test_nine_failures_still_let_the_right_password_in(actors: Actors) -> None:
    for _ in range(9):
        attempt(reverse("login"), "owner", "wrong-password")

    assert attempt(reverse("login"), "owner", "password-owner") == 302
