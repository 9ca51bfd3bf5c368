"""The targets a user may pick where a feature compares models (Compare's columns, an
experiment's connection targets): every model of every connection they may run."""

from __future__ import annotations

from django.utils import timezone

from playground.catalog.selectors import catalog_models_for_kind
from playground.chat.compare.forms import target_value
from playground.chat.forms import connection_label
from playground.chat.presenters.conversations import listed_model_choices, model_choices
from playground.providers.models import ProviderConnection
from playground.providers.selectors import connection_models_listed

# Option groups for a select: (connection label, [(target value, model label)]).
TargetChoices = list[tuple[str, list[tuple[str, str]]]]


def target_choices(connections: list[ProviderConnection]) -> TargetChoices:
    """Every model of every connection the user may run, grouped by connection: the catalogue's,
    or what an OpenAI-compatible endpoint listed at its last test."""
    today = timezone.now().date()
    by_kind = {
        kind: model_choices(catalog_models_for_kind(kind=kind), today=today)
        for kind in {connection.kind for connection in connections}
    }
    groups: TargetChoices = []
    for connection in connections:
        listed = connection_models_listed(connection)
        models = (
            listed_model_choices(listed, catalog_models_for_kind(kind=connection.kind))
            if listed is not None
            else by_kind[connection.kind]
        )
        label = connection_label(connection)
        if len({c.team_id for c in connections}) > 1:
            label = f"{connection.team.name}: {label}"
        groups.append((label, [(target_value(connection.pk, m.value), m.label) for m in models]))
    return groups
