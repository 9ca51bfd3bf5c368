from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from playground.lib.web import form_errors_add


class NameForm(forms.Form):
    name = forms.CharField()


def _bound() -> NameForm:
    form = NameForm({"name": "x"})
    assert form.is_valid()
    return form


def test_a_fields_message_lands_beside_that_field() -> None:
    form = _bound()

    form_errors_add(form, ValidationError({"name": "Taken."}))

    assert form.errors == {"name": ["Taken."]}


def test_a_field_the_form_lacks_and_a_plain_message_land_above_the_form() -> None:
    form = _bound()

    form_errors_add(form, ValidationError({"connection_id": "Gone."}))
    form_errors_add(form, ValidationError(["Not allowed.", "Ask an owner."]))

    assert form.non_field_errors() == ["Gone.", "Not allowed.", "Ask an owner."]
    assert "name" not in form.errors
