"""What the dashboard, the request log and the exports are asked for: one form, one `Filters`.

The team is always one of the acting user's teams (another team's id, or another team's API key
or preset version, is a 404, never an empty page), and the period always has an end, a start
and a bucket size: hours up to seven days, days beyond (a 90-day range is 90 points, not
2,160). A preset starts at the start of its first bucket (the UTC hour for 24 h and 7 d, the
UTC day for 30 d and 90 d), so the rollups' whole buckets hold exactly the records the log
lists: the log's totals, the dashboard's headline figures and its charts count the same requests.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django import forms
from django.http import Http404, QueryDict
from django.utils import timezone

from playground.accounts.models import Team
from playground.accounts.selectors import AnyUser, team_list_for_user
from playground.presets.selectors import preset_version_labels
from playground.usage.models import RATING_MAX, RATING_MIN, ApiKey, RequestPath, UsageStatus
from playground.usage.rollups import day_start, hour_start

PRESETS = {
    "24h": dt.timedelta(hours=24),
    "7d": dt.timedelta(days=7),
    "30d": dt.timedelta(days=30),
    "90d": dt.timedelta(days=90),
}
HOURLY_UP_TO = dt.timedelta(days=7)
LONGEST_CUSTOM = dt.timedelta(days=400)
GROUPS = {"model": "Model", "user": "User", "connection": "Connection"}
CACHED_SHARES = {
    "none": "No cached tokens (0 %)",
    "some": "Under half cached",
    "most": "Half or more cached",
    "unknown": "Not reported",
}
ROUTE_OUTCOMES = {"fell_back": "Fell back", "downgraded": "Downgraded"}
# The log's filter by the scores records were given (`usage.models.Score`): any score, a thumb,
# or a rating at most N ("rating_le_5": any rating).
SCORE_FILTERS = {
    "any": "Has a score",
    "up": "Thumbs up",
    "down": "Thumbs down",
    **{f"rating_le_{n}": f"Rating ≤ {n}" for n in range(RATING_MIN, RATING_MAX)},
    f"rating_le_{RATING_MAX}": "Any rating",
}
SORTS = {
    "newest": "Newest first",
    "oldest": "Oldest first",
    "cost": "Highest cost",
    "latency": "Slowest",
    "ttft": "Slowest first token",
    "prompt": "Largest prompt",
}


@dataclass(frozen=True)
class Period:
    start: dt.datetime
    end: dt.datetime
    preset: str  # a PRESETS key or "custom"
    hourly: bool  # hourly buckets (else daily)


@dataclass(frozen=True)
class Filters:
    team: Team
    period: Period
    model_id: str = ""
    user_id: int | None = None
    connection_id: int | None = None
    path: str = ""
    status: str = ""
    affinity: str = ""  # "", "on" or "off"
    conversation_id: int | None = None
    preset_version_id: int | None = None  # one of the team's preset versions (see `filters_from_query`)
    cached_share: str = ""  # "" or a CACHED_SHARES key
    # What a gateway request said about itself: its API key (one of the team's: see
    # `filters_from_query`), the caller's end user, one of its tags, its session.
    api_key_id: int | None = None
    end_user: str = ""
    tag: str = ""
    session: str = ""
    # What a routing policy decided (issue 35): the rule that matched, and "fell_back" or "downgraded".
    route_rule: str = ""
    route_outcome: str = ""
    score: str = ""  # "" or a SCORE_FILTERS key
    group: str = "model"
    sort: str = "newest"

    def column_lookups(self) -> dict[str, str | int]:
        """The equality filters that records and rollups both carry as columns (those set)."""
        return _set(
            model_id=self.model_id,
            user_id=self.user_id,
            connection_id=self.connection_id,
            path=self.path,
            status=self.status,
        )

    def attribution_lookups(self) -> dict[str, str | int]:
        """The key and end-user filters (those set): columns of the records and of the rollups
        by key and end user (`usage.models.UsageEndUserHourly`), not of the others."""
        return _set(api_key_id=self.api_key_id, end_user=self.end_user)

    def beyond_attribution(self) -> list[str]:
        """The filters chosen (by name) that the rollups by key and end user do not hold: those
        hold the period, key, end user and path only."""
        chosen = {
            "model": self.model_id,
            "user": self.user_id,
            "connection": self.connection_id,
            "status": self.status,
            "affinity": self.affinity,
        }
        return [name for name, value in chosen.items() if value]

    @property
    def by_attribution(self) -> bool:
        """Whether a key or an end user is chosen: then the dashboard reads the rollups by key."""
        return bool(self.attribution_lookups())


def _set(**lookups: str | int | None) -> dict[str, str | int]:
    return {column: value for column, value in lookups.items() if value}


def _choices(options: dict[str, str], any_label: str) -> list[tuple[str, str]]:
    return [("", any_label), *options.items()]


class FilterForm(forms.Form):
    team = forms.IntegerField(required=False, min_value=1)
    range = forms.ChoiceField(
        required=False, choices=[*((k, k) for k in PRESETS), ("custom", "custom")], initial="7d"
    )
    start = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    model = forms.CharField(required=False, max_length=200)
    user = forms.IntegerField(required=False, min_value=1)
    connection = forms.IntegerField(required=False, min_value=1)
    path = forms.ChoiceField(required=False, choices=_choices(dict(RequestPath.choices), "Any path"))
    status = forms.ChoiceField(required=False, choices=_choices(dict(UsageStatus.choices), "Any status"))
    affinity = forms.ChoiceField(
        required=False, choices=[("", "Affinity on or off"), ("on", "Affinity on"), ("off", "Affinity off")]
    )
    conversation = forms.IntegerField(required=False, min_value=1)
    preset_version = forms.IntegerField(required=False, min_value=1)
    cached_share = forms.ChoiceField(required=False, choices=_choices(CACHED_SHARES, "Any cached share"))
    key = forms.IntegerField(required=False, min_value=1)
    # As the gateway records them (at most 1 KiB each); an exact match, case included.
    end_user = forms.CharField(required=False, max_length=1024)
    tag = forms.CharField(required=False, max_length=1024)
    session = forms.CharField(required=False, max_length=1024)
    route = forms.CharField(required=False, max_length=100)
    routed = forms.ChoiceField(required=False, choices=_choices(ROUTE_OUTCOMES, "Routed or not"))
    score = forms.ChoiceField(required=False, choices=_choices(SCORE_FILTERS, "Scored or not"))
    group = forms.ChoiceField(required=False, choices=list(GROUPS.items()))
    sort = forms.ChoiceField(required=False, choices=list(SORTS.items()))

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if data.get("range") == "custom":
            start, end = data.get("start"), data.get("end")
            if start is None or end is None:
                raise forms.ValidationError("A custom range needs a start and an end date.")
            if end < start:
                raise forms.ValidationError("The end date is before the start date.")
            if end - start > LONGEST_CUSTOM:
                raise forms.ValidationError(f"A custom range spans at most {LONGEST_CUSTOM.days} days.")
        if "," in (data.get("tag") or ""):
            self.add_error("tag", "One tag, without a comma.")
        return data


class FilterError(Exception):
    """The query string was not valid: `form` holds the errors to show."""

    def __init__(self, form: FilterForm) -> None:
        super().__init__("invalid filters")
        self.form = form


def filters_from_query(*, user: AnyUser, query: QueryDict, now: dt.datetime | None = None) -> Filters | None:
    """The filters the query asks for; None when the user has no team; Http404 for a foreign team,
    or for an API key that is not the team's.

    Raises FilterError (with the bound form) for input that does not validate.
    """
    form = FilterForm(query)
    if not form.is_valid():
        raise FilterError(form)
    data = form.cleaned_data
    teams = team_list_for_user(user=user)
    if data["team"]:
        team = teams.filter(pk=data["team"]).first()
        if team is None:
            raise Http404("No such team.")
    else:
        team = teams.first()
        if team is None:
            return None
    if data["key"] and not ApiKey.objects.filter(team=team, pk=data["key"]).exists():
        raise Http404("No such API key in this team.")
    if data["preset_version"] and not preset_version_labels(team_id=team.pk, ids=[data["preset_version"]]):
        raise Http404("No such preset version in this team.")
    return Filters(
        team=team,
        period=_period(data, now or timezone.now()),
        model_id=data["model"] or "",
        user_id=data["user"],
        connection_id=data["connection"],
        path=data["path"] or "",
        status=data["status"] or "",
        affinity=data["affinity"] or "",
        conversation_id=data["conversation"],
        preset_version_id=data["preset_version"],
        cached_share=data["cached_share"] or "",
        api_key_id=data["key"],
        end_user=data["end_user"] or "",
        tag=data["tag"] or "",
        session=data["session"] or "",
        route_rule=data["route"] or "",
        route_outcome=data["routed"] or "",
        score=data["score"] or "",
        group=data["group"] or "model",
        sort=data["sort"] or "newest",
    )


def _period(data: dict[str, object], now: dt.datetime) -> Period:
    preset = str(data.get("range") or "7d")
    if preset == "custom":
        start_day, end_day = data["start"], data["end"]
        assert isinstance(start_day, dt.date) and isinstance(end_day, dt.date)
        start = dt.datetime.combine(start_day, dt.time.min, tzinfo=dt.UTC)
        end = dt.datetime.combine(end_day + dt.timedelta(days=1), dt.time.min, tzinfo=dt.UTC)
        return Period(start=start, end=end, preset=preset, hourly=end - start <= HOURLY_UP_TO)
    start = now - PRESETS[preset]
    hourly = PRESETS[preset] <= HOURLY_UP_TO
    return Period(
        start=hour_start(start) if hourly else day_start(start), end=now, preset=preset, hourly=hourly
    )
