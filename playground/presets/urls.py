from __future__ import annotations

from django.urls import URLPattern, path

from playground.presets import views

app_name = "presets"
urlpatterns: list[URLPattern] = [
    path("", views.preset_list_view, name="preset-list"),
    path("<int:preset_id>/", views.preset_detail_view, name="preset-detail"),
    path("<int:preset_id>/diff/", views.version_diff_view, name="version-diff"),
    path("<int:preset_id>/v<int:number>/export/", views.version_export_view, name="version-export"),
]
