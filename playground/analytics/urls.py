"""The Usage pages (dashboard, charts, request log, exports): public paths under `/usage/`,
URL namespace `analytics`, the app that serves them.

The paths say what a user sees ("Usage" in the top bar; bookmarks keep working); the
namespace and the code say which app it is, since `playground.usage` is the metering floor
below every feature, not a page. `playground/urls.py` mounts this module at `usage/`.
"""

from __future__ import annotations

from django.urls import URLPattern, path

from playground.analytics import score_views, views

app_name = "analytics"
urlpatterns: list[URLPattern] = [
    path("", views.dashboard_view, name="dashboard"),
    path("headline/", views.headline_view, name="headline"),
    path("charts/<slug:name>/", views.chart_view, name="chart"),
    path("conformance/", views.conformance_view, name="conformance"),
    path("routing/", views.routing_outcomes_view, name="routing"),
    path("sessions/hit-ratio/", views.hit_ratio_view, name="hit-ratio"),
    path("sessions/runway/", views.runway_view, name="runway"),
    path("log/", views.log_view, name="log"),
    path("log/totals/", views.log_totals_view, name="log-totals"),
    path("log/<uuid:request_id>/", views.record_detail_view, name="record-detail"),
    path("log/<uuid:request_id>/score/", score_views.record_score_view, name="record-score"),
    path("export.<slug:fmt>", views.export_view, name="export"),
    path("focus.csv", views.focus_export_view, name="focus-export"),
]
