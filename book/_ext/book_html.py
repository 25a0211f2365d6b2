"""Sphinx extension for the book's HTML: `_config.yml` loads it (`sphinx.local_extensions`), and
tools/check_book.py checks what it does in every built page.

- One setting, `repository.url` in `_config.yml`, turns on the buttons that point at the
  repository: whoever publishes the book sets it, and every page gets the repository, issue
  and edit-page buttons and the launch buttons listed under `launch_buttons` (Binder, Colab).
  Left empty, the default, the built book has none of them, so it never links to a
  placeholder. Download buttons (.ipynb and source) are files of the book: always shown.
- Each script once: sphinx-thebe and sphinx-togglebutton register their inline scripts twice
  under Sphinx 7, and the second `const THEBE_JS_URL` is a SyntaxError in every page's console.
"""
from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config

REPOSITORY_BUTTONS = ("use_repository_button", "use_issues_button", "use_edit_page_button")
LAUNCH_URLS = ("binderhub_url", "colab_url", "jupyterhub_url", "deepnote_url", "jupyterlite_url")


def set_buttons(app: Sphinx, config: Config) -> None:
    options: dict[str, Any] = config.html_theme_options
    url = str(options.get("repository_url") or "").strip()
    options["repository_url"] = url
    for key in REPOSITORY_BUTTONS:
        options[key] = bool(url)
    launch = dict(options.get("launch_buttons") or {})
    for key in LAUNCH_URLS:
        # Colab opens notebooks from GitHub only; the theme warns (an error here) for other hosts.
        if not url or (key == "colab_url" and "github.com" not in url):
            launch[key] = ""
    options["launch_buttons"] = launch


def unique_scripts(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any],
                   doctree: Any) -> None:
    """Render each distinct <script> tag once per page."""
    js_tag = context.get("js_tag")
    if js_tag is None:
        return
    emitted: set[str] = set()

    def once(js: Any) -> str:
        tag = js_tag(js)
        if tag in emitted:
            return ""
        emitted.add(tag)
        return tag

    context["js_tag"] = once


def setup(app: Sphinx) -> dict[str, bool]:
    app.connect("config-inited", set_buttons)
    app.connect("html-page-context", unique_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
