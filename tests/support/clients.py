"""A Django test client signed in as someone, or as nobody."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth.models import User
from django.test import Client

if TYPE_CHECKING:
    # What the test client's get/post return (a response plus the client's extras), as django-stubs names it.
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

__all__ = ["TestResponse", "client_for"]


def client_for(user: User | None) -> Client:
    """A client with `user`'s session (force_login: no password, no login limits), anonymous for None."""
    client = Client()
    if user is not None:
        client.force_login(user)
    return client
