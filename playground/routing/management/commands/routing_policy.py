"""`manage.py routing_policy --team TEAM (--show | --file FILE [--note NOTE] | --dry-run FILE)`.

--show prints the version in force; --file puts a document in force as the next version (every
problem printed at its JSON path, exit code 1, nothing saved); --dry-run takes a sample request
(JSON: model, tags, metadata, end_user, session, prompt_tokens, completion_tokens, stream,
budget_used) and prints what the policy in force would do with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from playground.accounts.commands import team_named
from playground.accounts.models import Team
from playground.providers.models import ProviderConnection
from playground.routing.dry_run import DryRun, SampleRequest, TargetEstimate, routing_dry_run
from playground.routing.plan import Target
from playground.routing.problems import PolicyInvalid, RouteUnavailable
from playground.routing.selectors import routing_policy_current, routing_policy_flags
from playground.routing.services import routing_policy_save
from playground.usage.money import money


class Command(BaseCommand):
    help = "Show, change or dry-run a team's routing policy (the gateway's rules, targets and fallbacks)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="The team's id or name")
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument("--show", action="store_true", help="Print the version in force")
        action.add_argument("--file", type=Path, help="A policy document (JSON) to put in force")
        action.add_argument("--dry-run", type=Path, help="A sample request (JSON) to route without sending")
        parser.add_argument("--note", default="", help="With --file: what changed and why")

    def handle(self, *args: Any, **options: Any) -> None:
        team = team_named(str(options["team"]))
        if options["show"]:
            self._show(team)
        elif options["file"] is not None:
            self._save(team, _read(options["file"]), str(options["note"]))
        else:
            self._dry_run(team, _read(options["dry_run"]))

    def _show(self, team: Team) -> None:
        current = routing_policy_current(team.pk)
        if current is None:
            self.stderr.write(f"{team.name} has no routing policy: every key sends to its own connection.")
            return
        who = current.created_by.get_username() if current.created_by else "manage.py"
        self.stderr.write(
            f"Version {current.version} of {team.name}, by {who} on {current.created_at:%Y-%m-%d %H:%M} UTC."
        )
        for flag in routing_policy_flags(team.pk):
            self.stderr.write(f"warning: {flag}")
        self.stdout.write(json.dumps(current.document, indent=2))

    def _save(self, team: Team, text: str, note: str) -> None:
        try:
            policy = routing_policy_save(team=team, document=text, user=None, note=note)
        except PolicyInvalid as invalid:
            for problem in invalid.problems:
                self.stderr.write(str(problem))
            previous = routing_policy_current(team.pk)
            kept = f"version {previous.version} stays in force" if previous else "no policy is in force"
            raise CommandError(f"{len(invalid.problems)} problem(s): nothing saved, {kept}.") from None
        self.stdout.write(f"Version {policy.version} of {team.name}'s routing policy is in force.")

    def _dry_run(self, team: Team, text: str) -> None:
        try:
            value = json.loads(text)
            sample = SampleRequest(**{**value, "tags": tuple(value.get("tags", ()))})
        except (ValueError, TypeError) as exc:
            raise CommandError(f"Not a sample request: {exc}") from None
        try:
            run = routing_dry_run(team_id=team.pk, default=_default_target(team, sample.model), sample=sample)
        except RouteUnavailable as exc:
            raise CommandError(str(exc)) from None
        for line in dry_run_lines(run):
            self.stdout.write(line)


def dry_run_lines(run: DryRun) -> list[str]:
    """The dry run as text, money in decimals."""
    if run.plan is None:
        return ["No routing policy: the request goes to its key's connection."]
    plan = run.plan
    lines = [
        f"Policy version {run.policy_version}: "
        + (
            f"rule {plan.rule!r} matches."
            if plan.rule
            else "no rule matches: the key's connection (or an alias)."
        )
    ]
    lines += [f"  {n}. {_estimate(estimate)}" for n, estimate in enumerate(run.estimates, 1)]
    if plan.downgrade is not None and plan.downgrade.requested is not None:
        lines.append(f"Downgraded ({plan.downgrade.reason}) from {plan.downgrade.requested.label}.")
    if run.budget_fallback is not None:
        lines.append(f"When the budget cannot cover a target: {_estimate(run.budget_fallback)}")
    if run.session_move is not None:
        move = run.session_move
        lines.append(
            f"The session last ran on {move.previous}: moving loses its cached prefix of {move.tokens:,} "
            f"tokens, {money(move.usd)} more at the new target's fresh-input price."
        )
    return lines


def _estimate(estimate: TargetEstimate) -> str:
    cost = money(estimate.cost) if estimate.cost is not None else "unpriced (no price card)"
    return f"{estimate.target.label}: {cost}"


def _default_target(team: Team, model: str) -> Target:
    connection = ProviderConnection.objects.filter(team=team).order_by("-is_default", "name").first()
    if connection is None:
        raise CommandError(f"{team.name} has no connection.")
    return Target(connection.pk, connection.name, model)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise CommandError(f"Cannot read {path}: {exc.strerror}") from None
