"""The view layer's shared plumbing: the typed request every view takes, service errors shown
on a form, and a refusal answered as the app's own error page.

On no floor (it imports no app), so every feature's views use the same things instead of each
declaring its own request class, its own way of copying a `ValidationError` and its own bare
plain-text 400.
"""

from __future__ import annotations

from django import forms
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
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


def refusal(request: HttpRequest, message: str, *, status: int = 400) -> HttpResponse:
    """A request refused with its reason: plain text to htmx (the page shows it where it asked),
    else the app's own error page for `status` (`400.html`, `403.html`) with the reason on it,
    never a bare line of text in a browser tab."""
    if getattr(request, "htmx", False):
        return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
    return render(request, f"{status}.html", {"message": message}, status=status)
