"""Usage records name their conversation by a plain id: no foreign key to chat, in the
database or in the migrations that come after it."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

FREED = ("usage", "0012_record_conversation_id_without_foreign_key")
BEFORE = ("usage", "0011_budget_models_from_accounts")


def test_no_usage_migration_from_the_freeing_one_on_depends_on_chat() -> None:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    later = [key for key in loader.graph.nodes if key[0] == "usage" and key[1] >= FREED[1]]

    assert FREED in later
    for key in later:
        assert all(app != "chat" for app, _ in loader.graph.nodes[key].dependencies), key


def test_the_usage_models_refer_to_no_chat_model() -> None:
    """So the autodetector never again gives a usage migration a dependency on chat."""
    state = MigrationLoader(None, ignore_no_migrations=True).project_state()
    related = {
        field.related_model.lower() if isinstance(field.related_model, str) else field.related_model
        for model in state.models.values()
        if model.app_label == "usage"
        for field in model.fields.values()
        if field.is_relation
    }

    assert related and not any(str(model).startswith("chat.") for model in related)


@pytest.mark.django_db
def test_the_conversation_column_has_its_index_and_no_foreign_key() -> None:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "usage_usagerecord")
    on_column = [c for c in constraints.values() if c["columns"] == ["conversation_id"]]

    assert any(c["index"] for c in on_column)
    assert not any(c["foreign_key"] for c in on_column)


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_every_records_conversation_id(actors: Any) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    old = executor.loader.project_state([BEFORE]).apps
    conversation = old.get_model("chat", "Conversation").objects.create(
        team_id=actors.team.pk, user_id=actors.owner.pk, model_id="m"
    )
    record = old.get_model("usage", "UsageRecord").objects.create(
        team_id=actors.team.pk, model_id="m", status="ok", conversation_id=conversation.pk
    )

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    new = executor.loader.project_state().apps

    assert new.get_model("usage", "UsageRecord").objects.get(pk=record.pk).conversation_id == conversation.pk
