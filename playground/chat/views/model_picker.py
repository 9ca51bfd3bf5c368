"""The model picker (a connection's catalogue models, or a typed id where the kind takes any),
shared by the new-conversation form and the chat page's Model drawer."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from playground.catalog.seed import ENGINE_QUALITY_ID
from playground.catalog.selectors import catalog_models_for_kind, model_preselected
from playground.chat.forms import ModelChoiceForm
from playground.chat.presenters.conversations import listed_model_choices, model_choices
from playground.providers.kinds import ConnectionKind
from playground.providers.models import ProviderConnection
from playground.providers.selectors import connection_models_listed


def model_field_context(
    connection: ProviderConnection, *, form: ModelChoiceForm | None = None, current: str = ""
) -> dict[str, Any]:
    """What `conversation_list.html#model_field` shows for `connection`. `current`: the model
    to preselect when no form says otherwise (a conversation's own)."""
    catalogue = catalog_models_for_kind(kind=connection.kind)
    listed = connection_models_listed(connection)
    if listed is not None:  # what the endpoint said it serves
        choices = listed_model_choices(listed, catalogue)
    else:
        if connection.kind == ConnectionKind.ENGINE:  # not answering: what every engine serves, not
            # the quality model, which it serves only where it was installed
            catalogue = catalogue.exclude(model_id=ENGINE_QUALITY_ID)
        choices = model_choices(catalogue, today=timezone.now().date())
    values = [choice.value for choice in choices]
    # An endpoint that serves any id and never listed its own: the catalogue's are offered, none
    # preselected (it may serve none of them); the user picks one or types the id.
    unlisted = listed is None and connection.spec.free_model_id and connection.kind != ConnectionKind.ENGINE
    selected = (form["model_id"].value() if form is not None else "") or ""
    custom = (form["custom_model_id"].value() if form is not None else "") or ""
    if not selected and not custom and current:
        if current in values:
            selected = current
        elif connection.spec.free_model_id:
            custom = current
    if not selected and choices and not unlisted:
        selected = model_preselected(values, served=listed is not None) or ""
    return {
        "model_choices": choices,
        "selected_model": selected,
        "model_unlisted": unlisted,
        "custom_model_id": custom,
        "allows_custom_model": connection.spec.free_model_id,
        "kind_help": connection.spec.help,
        "model_errors": form.errors.get("model_id", []) if form is not None else [],
        "custom_model_errors": form.errors.get("custom_model_id", []) if form is not None else [],
    }


def model_drawer_context(
    conversation_connection_id: int | None,
    current_model: str,
    connections: list[ProviderConnection],
    *,
    form: ModelChoiceForm | None = None,
) -> dict[str, Any]:
    """The chat page's Model drawer: its team's connections, the conversation's preselected."""
    if form is None:
        initial = {"connection": conversation_connection_id} if conversation_connection_id else {}
        form = ModelChoiceForm(connections=connections, initial=initial)
    chosen = form["connection"].value()
    selected = next(
        (c for c in connections if str(c.pk) == str(chosen)), connections[0] if connections else None
    )
    context: dict[str, Any] = {"model_form": form, "model_connections": bool(connections)}
    if selected is not None:
        same = selected.pk == conversation_connection_id
        context.update(
            model_field_context(
                selected, form=form if form.is_bound else None, current=current_model if same else ""
            )
        )
    return context
