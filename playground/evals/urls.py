from __future__ import annotations

from django.urls import URLPattern, path

from playground.evals import compare_views, log_views, views

app_name = "evals"
urlpatterns: list[URLPattern] = [
    path("", views.evals_home_view, name="home"),
    path("datasets/<int:dataset_id>/", views.dataset_detail_view, name="dataset-detail"),
    path("datasets/<int:dataset_id>/upload/", views.dataset_upload_view, name="dataset-upload"),
    path(
        "datasets/<int:dataset_id>/uploads/<int:upload_id>/<str:action>/",
        views.dataset_upload_action_view,
        name="dataset-upload-action",
    ),
    path("datasets/<int:dataset_id>/items/", views.dataset_item_add_view, name="dataset-item-add"),
    path(
        "datasets/<int:dataset_id>/items/<int:item_id>/remove/",
        views.dataset_item_remove_view,
        name="dataset-item-remove",
    ),
    path("datasets/<int:dataset_id>/experiments/", views.experiment_create_view, name="experiment-create"),
    path("experiments/<int:experiment_id>/", views.experiment_detail_view, name="experiment-detail"),
    path(
        "experiments/<int:experiment_id>/progress/",
        views.experiment_progress_view,
        name="experiment-progress",
    ),
    path(
        "experiments/<int:experiment_id>/<str:action>/",
        views.experiment_action_view,
        name="experiment-action",
    ),
    path(
        "experiments/<int:experiment_id>/results.<str:fmt>",
        views.experiment_export_view,
        name="experiment-export",
    ),
]
urlpatterns += [
    path("from-log/", log_views.add_from_log_view, name="from-log"),
    path("compare/", compare_views.compare_view, name="compare"),
]
