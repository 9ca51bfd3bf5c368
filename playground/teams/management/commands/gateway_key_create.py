"""`manage.py gateway_key_create --team TEAM --name NAME [--connection NAME] [--policy] [--store MODE]`:
a team API key for automation, made through the same service as the API keys page; the key alone
on the last line."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from playground.accounts.commands import team_named
from playground.accounts.models import StoreMode, Team
from playground.providers.models import ProviderConnection
from playground.teams.forms import FOLLOWS_TEAM
from playground.teams.services.api_keys import KeySettings, api_key_create_by_operator
from playground.usage.models import TEAM_STORE_MODE


class Command(BaseCommand):
    help = (
        "Create a team API key for the gateway and print it (shown this once) alone on the last line. "
        "Its connection is --connection, else the team's default connection, else its only one."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="The team's id or name")
        parser.add_argument("--name", required=True, help="The key's name: what uses it")
        parser.add_argument("--connection", help="The name of one of the team's connections")
        parser.add_argument(
            "--policy",
            action="store_true",
            help="Follow the team's routing policy (the connection takes the requests no rule matches)",
        )
        parser.add_argument(
            "--store",
            choices=[*StoreMode.values, FOLLOWS_TEAM],
            default=StoreMode.REDACTED,
            help="What its requests' records keep of their text (default redacted; team: the team's mode)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        team = team_named(str(options["team"]))
        connection = connection_named(team, options["connection"])
        try:
            key, secret = api_key_create_by_operator(
                team=team,
                settings=KeySettings(
                    name=str(options["name"]),
                    connection_id=connection.pk,
                    follows_policy=bool(options["policy"]),
                    store_mode=TEAM_STORE_MODE if options["store"] == FOLLOWS_TEAM else str(options["store"]),
                ),
            )
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stderr.write(
            f"Created the API key {key.name!r} ({key.prefix}…) of {team.name} (#{team.pk}) on "
            f"{connection.name}{', following the team routing policy' if key.follows_policy else ''}, "
            f"its records keeping {key.store_mode or 'what the team keeps'}. "
            "It is shown this once; only its hash is stored."
        )
        self.stdout.write(secret)


def connection_named(team: Team, name: str | None) -> ProviderConnection:
    """The team's connection named `name`; without a name its default one, else its only one."""
    connections = list(ProviderConnection.objects.filter(team=team).order_by("name"))
    names = ", ".join(repr(connection.name) for connection in connections) or "none"
    if name is not None:
        chosen = [connection for connection in connections if connection.name == name]
        if not chosen:
            raise CommandError(f"{team.name} has no connection named {name!r}: its connections are {names}.")
        return chosen[0]
    default = [connection for connection in connections if connection.is_default]
    if default:
        return default[0]
    if len(connections) == 1:
        return connections[0]
    if not connections:
        raise CommandError(f"{team.name} has no connection: add one on its Connections page first.")
    raise CommandError(
        f"{team.name} has {len(connections)} connections and none is the default: "
        f"pass --connection with one of {names}."
    )
