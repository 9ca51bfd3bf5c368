from __future__ import annotations

from django.urls import URLPattern, path

from playground.analytics import views

app_name = "analytics"
urlpatterns: list[URLPattern] = [
    path("", views.dashboard_view, name="dashboard"),
    path("headline/", views.headline_view, name="headline"),
    path("charts/<slug:name>/", views.chart_view, name="chart"),
    path("log/", views.log_view, name="log"),
    path("log/totals/", views.log_totals_view, name="log-totals"),
    path("log/<uuid:request_id>/", views.record_detail_view, name="record-detail"),
    path("export.<slug:fmt>", views.export_view, name="export"),
]
