from __future__ import annotations

from django.urls import URLPattern, path

from playground.chat import (
    attachment_views,
    branch_views,
    code_views,
    compare_views,
    conversation_views,
    preset_views,
    views,
)

app_name = "chat"
urlpatterns: list[URLPattern] = [
    path("", views.conversation_list_view, name="conversation-list"),
    path("new/", views.conversation_create_view, name="conversation-create"),
    path("models/", views.model_options_view, name="model-options"),
    path("switch/", conversation_views.conversation_switch_view, name="conversation-switch"),
    path("compare/", compare_views.comparison_new_view, name="comparison-new"),
    path("compare/new/", compare_views.comparison_create_view, name="comparison-create"),
    path("compare/<int:comparison_id>/", compare_views.comparison_detail_view, name="comparison-detail"),
    path(
        "compare/<int:comparison_id>/columns/<int:column_id>/continue/",
        compare_views.comparison_continue_view,
        name="comparison-continue",
    ),
    path(
        "from-preset/<int:version_id>/",
        preset_views.conversation_from_preset_view,
        name="conversation-from-preset",
    ),
    path("<int:conversation_id>/preset/", preset_views.conversation_preset_save_view, name="preset-save"),
    path("<int:conversation_id>/", views.conversation_detail_view, name="conversation-detail"),
    path(
        "<int:conversation_id>/rename/",
        conversation_views.conversation_rename_view,
        name="conversation-rename",
    ),
    path(
        "<int:conversation_id>/delete/",
        conversation_views.conversation_delete_view,
        name="conversation-delete",
    ),
    path(
        "<int:conversation_id>/model/", conversation_views.conversation_model_view, name="conversation-model"
    ),
    path("<int:conversation_id>/affinity/", views.conversation_affinity_view, name="conversation-affinity"),
    path("<int:conversation_id>/composer/", views.conversation_composer_view, name="conversation-composer"),
    path("<int:conversation_id>/tools/", views.conversation_tools_view, name="conversation-tools"),
    path("<int:conversation_id>/code/", code_views.next_request_code_view, name="next-request-code"),
    path("<int:conversation_id>/preflight/", code_views.preflight_view, name="preflight"),
    path(
        "<int:conversation_id>/attachments/",
        attachment_views.attachment_upload_view,
        name="attachment-upload",
    ),
    path("attachments/<int:attachment_id>/", attachment_views.attachment_view, name="attachment"),
    path(
        "attachments/<int:attachment_id>/remove/",
        attachment_views.attachment_remove_view,
        name="attachment-remove",
    ),
    path(
        "<int:conversation_id>/messages/<int:message_id>/delete/",
        branch_views.turn_delete_view,
        name="turn-delete",
    ),
    path(
        "<int:conversation_id>/messages/<int:message_id>/switch/",
        branch_views.branch_switch_view,
        name="branch-switch",
    ),
    path(
        "<int:conversation_id>/messages/<int:message_id>/fork/",
        branch_views.conversation_fork_view,
        name="conversation-fork",
    ),
    path(
        "<int:conversation_id>/messages/<int:message_id>/request/",
        views.message_request_view,
        name="message-request",
    ),
    path(
        "<int:conversation_id>/messages/<int:message_id>/code/",
        code_views.message_code_view,
        name="message-code",
    ),
]
