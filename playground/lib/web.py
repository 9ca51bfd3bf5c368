"""The view layer's shared plumbing: the typed request every view takes, and service errors
shown on a form.

On no floor (it imports no app), so every feature's views use the same two things instead of
each declaring its own request class and its own way of copying a `ValidationError`.
"""

from __future__ import annotations

from django import forms
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """A request through django-htmx's middleware, behind `login_required` (django-htmx's
    pattern, with the signed-in user typed). Views open to visitors take `HttpRequest`."""

    user: User
    htmx: HtmxDetails


def form_errors_add(form: forms.BaseForm, exc: ValidationError) -> None:
    """Show a service's `ValidationError` on `form`: a field's message beside that field, any
    other (a plain message, or a field the form does not have) above the form."""
    if hasattr(exc, "error_dict"):
        for field, messages in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, messages)
    else:
        form.add_error(None, exc.messages)
