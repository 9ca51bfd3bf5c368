"""The chat's pages; each view module is one family of them (`views/__init__`), compare its own."""

from __future__ import annotations

from django.urls import URLPattern, path

from playground.chat.compare import views as compare
from playground.chat.views import (
    attachments,
    branches,
    code,
    conversation_json,
    conversation_page,
    conversations,
    presets,
    variables,
)

app_name = "chat"
urlpatterns: list[URLPattern] = [
    path("", conversation_page.conversation_list_view, name="conversation-list"),
    path("new/", conversation_page.conversation_create_view, name="conversation-create"),
    path("models/", conversation_page.model_options_view, name="model-options"),
    path("switch/", conversations.conversation_switch_view, name="conversation-switch"),
    path("import/", conversation_json.conversation_import_view, name="conversation-import"),
    path("compare/", compare.comparison_new_view, name="comparison-new"),
    path("compare/new/", compare.comparison_create_view, name="comparison-create"),
    path("compare/preflight/", compare.comparison_draft_preflight_view, name="comparison-draft-preflight"),
    path("compare/<int:comparison_id>/", compare.comparison_detail_view, name="comparison-detail"),
    path(
        "compare/<int:comparison_id>/preflight/",
        compare.comparison_preflight_view,
        name="comparison-preflight",
    ),
    path(
        "compare/<int:comparison_id>/columns/<int:column_id>/continue/",
        compare.comparison_continue_view,
        name="comparison-continue",
    ),
    path(
        "from-preset/<int:version_id>/",
        presets.conversation_from_preset_view,
        name="conversation-from-preset",
    ),
    path("<int:conversation_id>/preset/", presets.conversation_preset_save_view, name="preset-save"),
    path("<int:conversation_id>/", conversation_page.conversation_detail_view, name="conversation-detail"),
    path(
        "<int:conversation_id>/export/",
        conversation_json.conversation_export_view,
        name="conversation-export",
    ),
    path(
        "<int:conversation_id>/rename/",
        conversations.conversation_rename_view,
        name="conversation-rename",
    ),
    path(
        "<int:conversation_id>/delete/",
        conversations.conversation_delete_view,
        name="conversation-delete",
    ),
    path("<int:conversation_id>/model/", conversations.conversation_model_view, name="conversation-model"),
    path(
        "<int:conversation_id>/affinity/",
        conversation_page.conversation_affinity_view,
        name="conversation-affinity",
    ),
    path(
        "<int:conversation_id>/composer/",
        conversation_page.conversation_composer_view,
        name="conversation-composer",
    ),
    path(
        "<int:conversation_id>/tools/", conversation_page.conversation_tools_view, name="conversation-tools"
    ),
    path(
        "<int:conversation_id>/variables/",
        variables.conversation_variables_view,
        name="conversation-variables",
    ),
    path("<int:conversation_id>/code/", code.next_request_code_view, name="next-request-code"),
    path("<int:conversation_id>/preflight/", code.preflight_view, name="preflight"),
    path(
        "<int:conversation_id>/attachments/",
        attachments.attachment_upload_view,
        name="attachment-upload",
    ),
    path("attachments/<int:attachment_id>/", attachments.attachment_view, name="attachment"),
    path(
        "attachments/<int:attachment_id>/remove/",
        attachments.attachment_remove_view,
        name="attachment-remove",
    ),
    path(
        "<int:conversation_id>/messages/<int:message_id>/delete/",
        branches.turn_delete_view,
        name="turn-delete",
    ),
    path("<int:conversation_id>/messages/write/", branches.message_write_view, name="message-write"),
    path(
        "<int:conversation_id>/messages/<int:message_id>/switch/",
        branches.branch_switch_view,
        name="branch-switch",
    ),
    path(
        "<int:conversation_id>/messages/<int:message_id>/fork/",
        branches.conversation_fork_view,
        name="conversation-fork",
    ),
    path(
        "<int:conversation_id>/messages/<int:message_id>/request/",
        conversation_page.message_request_view,
        name="message-request",
    ),
    path(
        "<int:conversation_id>/messages/<int:message_id>/code/",
        code.message_code_view,
        name="message-code",
    ),
]
