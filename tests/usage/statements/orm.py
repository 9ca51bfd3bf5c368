"""What the ORM loads, to compare the hand-written statements with."""

from __future__ import annotations

from django.db.models import Model


def column_values(instance: Model) -> dict[str, object]:
    """Every column's value as loaded, non-editable ones included."""
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields}
