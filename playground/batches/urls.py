from __future__ import annotations

from django.urls import URLPattern, path

from playground.batches import views

app_name = "batches"
urlpatterns: list[URLPattern] = [
    path("", views.batch_list_view, name="batch-list"),
    path("<int:batch_id>/", views.batch_detail_view, name="batch-detail"),
    path("<int:batch_id>/progress/", views.batch_progress_view, name="batch-progress"),
    path("<int:batch_id>/<str:action>/", views.batch_action_view, name="batch-action"),
    path("<int:batch_id>/items/<int:index>/", views.batch_item_view, name="batch-item"),
    # Usage records name an item by its id (source "batch-item:<id>:<attempt>"): the request log links here.
    path("items/<int:item_id>/", views.batch_item_by_id_view, name="item-detail"),
    path("<int:batch_id>/results.<str:fmt>", views.batch_results_view, name="batch-results"),
]
