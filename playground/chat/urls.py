from __future__ import annotations

from django.urls import URLPattern, path

from playground.chat import views

app_name = "chat"
urlpatterns: list[URLPattern] = [
    path("", views.conversation_list_view, name="conversation-list"),
    path("new/", views.conversation_create_view, name="conversation-create"),
    path("models/", views.model_options_view, name="model-options"),
    path("<int:conversation_id>/", views.conversation_detail_view, name="conversation-detail"),
    path("<int:conversation_id>/affinity/", views.conversation_affinity_view, name="conversation-affinity"),
]
