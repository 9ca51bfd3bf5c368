"""A Django test client signed in as someone, or as nobody."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client


def client_for(user: User | None) -> Client:
    """A client with `user`'s session (force_login: no password, no login limits), anonymous for None."""
    client = Client()
    if user is not None:
        client.force_login(user)
    return client
