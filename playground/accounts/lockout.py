"""The answer to a login refused by the login limits (django-axes calls `lockout_response`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from axes.helpers import get_cool_off
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

LOCKED_OUT_STATUS = 429


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    """429 with `Retry-After`, on a page that says when to try again.

    The lock lasts the cool-off time from the last failed attempt, and this attempt is one.
    """
    wait = get_cool_off(request) or timedelta(0)
    context = {
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "wait_minutes": max(1, round(wait.total_seconds() / 60)),
        "retry_at": timezone.now() + wait,
    }
    response = render(request, "registration/locked_out.html", context, status=LOCKED_OUT_STATUS)
    response["Retry-After"] = str(int(wait.total_seconds()))
    return response
