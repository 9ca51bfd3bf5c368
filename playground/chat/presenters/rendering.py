"""Model output to safe HTML: markdown rendered once on the server, then sanitized.

Model output is untrusted (a prompt injection can make a model write anything), so two
independent layers stand between it and the page:

1. markdown-it-py with raw HTML off: `<script>` or `<svg onload>` in the text come out as
   visible, escaped text, and its link validator drops `javascript:`, `vbscript:`, `file:`
   and `data:` destinations. Images are rendered as their alt text: a remote image would
   let the model's author track who reads the answer (and leak data in the URL).
2. nh3 (ammonia) with a short allow-list of tags and attributes: only http(s) and mailto
   links, no relative URLs, no `<img>`, no event handlers or styles, and every link gets
   `rel="noopener noreferrer nofollow"`. This layer holds even if the first one has a bug.

See docs/reference/lessons.md (Open WebUI's stored XSS through markdown links and SVG
data URIs).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

ALLOWED_TAGS = frozenset(
    {
        "a",
        "blockquote",
        "br",
        "code",
        "del",
        "em",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "li",
        "ol",
        "p",
        "pre",
        "s",
        "strong",
        "table",
        "tbody",
        "td",
        "th",
        "thead",
        "tr",
        "ul",
    }
)
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"
# Fenced code keeps its language as a class (for styling); nothing else may carry classes.
LANGUAGE_CLASS = re.compile(r"language-[A-Za-z0-9_+#.-]{1,40}")


def _render_image(self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    """An image becomes its alt text: no remote fetch from the reader's browser."""
    alt = self.renderInlineAsText(tokens[idx].children or [], options, env)
    return escapeHtml(f"[image: {alt}]" if alt else "[image]")


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "breaks": True})
    md.enable(["table", "strikethrough"])
    md.add_render_rule("image", _render_image)
    return md


_MD = _markdown()


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    if tag == "code" and attribute == "class":
        return value if LANGUAGE_CLASS.fullmatch(value) else None
    return value


_CLEANER = nh3.Cleaner(
    tags=set(ALLOWED_TAGS),
    clean_content_tags={"script", "style", "iframe", "object", "embed", "svg", "math", "template"},
    attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()} | {"code": {"class"}},
    attribute_filter=_attribute_filter,
    url_schemes=set(URL_SCHEMES),
    url_relative="deny",
    link_rel=LINK_REL,
    set_tag_attribute_values={"a": {"target": "_blank"}},
)


def sanitize_html(html: str) -> str:
    """The allow-listed subset of `html`; the last line of defence for anything rendered."""
    return _CLEANER.clean(html)


def render_markdown(text: str) -> SafeString:
    """Render model output (markdown) to sanitized HTML that is safe to put in a page."""
    if not text:
        return mark_safe("")
    return mark_safe(sanitize_html(_MD.render(text)))  # noqa: S308 (sanitized just above)
