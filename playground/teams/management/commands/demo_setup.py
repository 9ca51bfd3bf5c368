"""`make run` calls this: a demo team and its owner, created once, the login printed once."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand

from playground.lib.env import env_secret, env_str
from playground.teams.creation import team_create

DEMO_TEAM = "Demo team"


class Command(BaseCommand):
    help = "Create the demo team and its owner account if they do not exist."

    def handle(self, *args: Any, **options: Any) -> None:
        username = env_str("PLAYGROUND_DEMO_USER", "demo")
        if User.objects.filter(username=username).exists():
            self.stdout.write(
                f"Log in as {username!r} (the password was printed on the first run; "
                f"reset it with: .venv/bin/python manage.py changepassword {username})"
            )
            return
        password = env_secret("PLAYGROUND_DEMO_PASSWORD") or secrets.token_urlsafe(12)
        # Not staff: the owner manages the team on the team pages; the admin is for superusers.
        owner = User.objects.create_user(username, password=password)
        team_create(name=DEMO_TEAM, owner=owner)
        self.stdout.write(
            self.style.SUCCESS(
                f"Created {DEMO_TEAM!r} (its owner manages it on the Team pages, /teams/). "
                f"Log in as {username!r} / {password}"
            )
        )
