"""The API keys pages: the team's keys, a new key (its secret shown once), a key changed or revoked.

Every member reads the list, as every team page: it holds names, prefixes, limits and spend,
never a secret, and a member whose application breaks needs to see that its key was revoked
or over its budget. Owners and admins create, change and revoke.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from playground.accounts.models import ROLES_THAT_CAN_MANAGE, Membership
from playground.catalog.selectors import model_preselected
from playground.lib.web import HtmxHttpRequest, form_errors_add
from playground.providers.models import ProviderConnection
from playground.teams import selectors
from playground.teams.api_key_selectors import ModelOptions, api_key_for, api_key_rows, model_options
from playground.teams.forms import FOLLOWS_TEAM, ApiKeyForm
from playground.teams.services.api_keys import api_key_create, api_key_revoke, api_key_update
from playground.teams.views.page import redirect_done, redirect_failed, team_page, team_view
from playground.usage.models import ApiKey

# The secret of a key just made waits in the session (server-side) for the page the POST
# redirects to, which shows it once and drops it: a reload makes no second key and shows no
# secret, and the secret is never in a URL (nor, so, in an access log).
NEW_KEY_SESSION = "teams:new-api-key"


@require_GET
@team_view()
def api_keys_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    context = {
        "rows": api_key_rows(team=membership.team),
        "new_key": _new_key_pop(request, membership),
    }
    return team_page(request, membership, "teams/api_keys.html", context)


@dataclass(frozen=True)
class NewKey:
    key: ApiKey
    secret: str
    base_url: str
    snippet: str


def _new_key_pop(request: HttpRequest, membership: Membership) -> NewKey | None:
    kept = request.session.get(NEW_KEY_SESSION)
    if not isinstance(kept, dict) or kept.get("team_id") != membership.team_id:
        return None
    del request.session[NEW_KEY_SESSION]
    key = api_key_for(team_id=membership.team_id, key_id=int(kept.get("key_id", 0)))
    if key is None:
        return None
    base_url = request.build_absolute_uri("/").rstrip("/")
    return NewKey(
        key, str(kept["secret"]), base_url, curl_snippet(base_url=base_url, model_id=_example_model(key))
    )


def _example_model(key: ApiKey) -> str:
    if key.allowed_models:
        return str(key.allowed_models[0])
    options = model_options(key.connection) if key.connection else ModelOptions([], "")
    return model_preselected(options.ids, served=options.served) or "MODEL_ID"


def curl_snippet(*, base_url: str, model_id: str) -> str:
    """A request a person pastes into a shell that has `PLAYGROUND_API_KEY` set (quoted for it)."""
    body = json.dumps({"model": model_id, "messages": [{"role": "user", "content": "Hello!"}]})
    return "\n".join(
        [
            f"curl -sS {shlex.quote(base_url + '/v1/chat/completions')} \\",
            '  -H "Authorization: Bearer $PLAYGROUND_API_KEY" \\',
            "  -H 'Content-Type: application/json' \\",
            f"  -d {shlex.quote(body)}",
        ]
    )


@require_http_methods(["GET", "POST"])
@team_view(read=ROLES_THAT_CAN_MANAGE)
def api_key_create_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    connection = _chosen_connection(request, membership, default=_default_connection(membership))
    options = _options(connection)
    if request.method == "GET":
        form = _form(request, membership, options, initial={"connection": connection})
        return _form_response(request, membership, form, options, key=None)
    form = _form(request, membership, options, data=request.POST)
    if form.is_valid():
        try:
            key, secret = api_key_create(actor=membership, settings=form.key_settings())
        except ValidationError as exc:
            form_errors_add(form, exc)
        else:
            request.session[NEW_KEY_SESSION] = {
                "team_id": membership.team_id,
                "key_id": key.pk,
                "secret": secret,
            }
            return redirect("teams:api-keys", team_id=membership.team_id)
    return _form_response(request, membership, form, options, key=None, status=400)


@require_http_methods(["GET", "POST"])
@team_view(read=ROLES_THAT_CAN_MANAGE)
def api_key_edit_view(request: HtmxHttpRequest, membership: Membership, key_id: int) -> HttpResponse:
    key = _key(membership, key_id)
    connection = _chosen_connection(request, membership, default=key.connection)
    options = _options(connection)
    initial = {
        "name": key.name,
        "connection": key.connection,
        # Another connection serves other models: its list starts unticked.
        "allowed_models": list(key.allowed_models) if connection == key.connection else [],
        "monthly_budget_usd": key.monthly_budget_usd,
        "requests_per_minute": key.requests_per_minute,
        "tokens_per_minute": key.tokens_per_minute,
        "expires_at": key.expires_at,
        "follows_policy": key.follows_policy,
        "store_mode": key.store_mode or FOLLOWS_TEAM,
    }
    if request.method == "GET":
        form = _form(request, membership, options, initial=initial)
        return _form_response(request, membership, form, options, key=key)
    form = _form(request, membership, options, data=request.POST, initial=initial)
    if form.is_valid():
        try:
            key = api_key_update(actor=membership, key_id=key.pk, settings=form.key_settings())
        except ValidationError as exc:
            form_errors_add(form, exc)
        else:
            return redirect_done(request, f"Saved {key.name}.", "teams:api-keys", membership.team_id)
    return _form_response(request, membership, form, options, key=key, status=400)


@require_POST
@team_view()
def api_key_revoke_view(request: HtmxHttpRequest, membership: Membership, key_id: int) -> HttpResponse:
    """Revoke; from the page's htmx button the answer is the key's row, now revoked."""
    try:
        key = api_key_revoke(actor=membership, key_id=_key(membership, key_id).pk)
    except ValidationError as exc:
        response = redirect_failed(request, exc, "teams:api-keys", membership.team_id)
        return HttpResponseClientRedirect(response["Location"]) if request.htmx else response
    if request.htmx:
        (row,) = api_key_rows(team=membership.team, key_id=key.pk)
        return team_page(request, membership, "teams/api_keys.html#key_row", {"row": row})
    return redirect_done(
        request,
        f"Revoked {key.name}: its next request is refused.",
        "teams:api-keys",
        membership.team_id,
    )


def _key(membership: Membership, key_id: int) -> ApiKey:
    key = api_key_for(team_id=membership.team_id, key_id=key_id)
    if key is None:
        raise Http404("No such API key.")
    return key


def _default_connection(membership: Membership) -> ProviderConnection | None:
    return selectors.connection_list(team_id=membership.team_id).first()  # the default first


def _chosen_connection(
    request: HtmxHttpRequest, membership: Membership, *, default: ProviderConnection | None
) -> ProviderConnection | None:
    """The connection whose models the form offers: the one posted or picked (`?connection=`),
    else `default`."""
    raw = request.POST.get("connection") if request.method == "POST" else request.GET.get("connection")
    if raw and raw.isdigit():
        chosen = selectors.connection_for(team_id=membership.team_id, connection_id=int(raw))
        if chosen is not None:
            return chosen
    return default


def _options(connection: ProviderConnection | None) -> ModelOptions:
    return model_options(connection) if connection else ModelOptions([], "")


def _form(
    request: HtmxHttpRequest, membership: Membership, options: ModelOptions, **kwargs: Any
) -> ApiKeyForm:
    """The form, posted to the page's own URL, which also answers htmx with its models field."""
    return ApiKeyForm(
        connections=selectors.connection_list(team_id=membership.team_id),
        model_ids=options.ids,
        models_url=request.path,
        **kwargs,
    )


def _form_response(
    request: HtmxHttpRequest,
    membership: Membership,
    form: ApiKeyForm,
    options: ModelOptions,
    *,
    key: ApiKey | None,
    status: int = 200,
) -> HttpResponse:
    """The form page; only its models field when htmx asks for it after the connection changed."""
    context = {
        "form": form,
        "key": key,
        "source": options.source,
        "action": request.path,
    }
    if request.htmx and request.htmx.trigger_name == "connection":
        return render(request, "teams/api_key_form.html#key_models", context)
    return team_page(request, membership, "teams/api_key_form.html", context, status=status)
