"""The browser check (tools/check_book.py) finds a browser where learners have one, and catches each
fault it promises to, in a tiny fake book."""
import importlib.util
import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

# tools/ is not a package: load the checker from its file (sys.path would expose every tool).
TOOLS = Path(__file__).resolve().parent.parent / "tools"
_spec = importlib.util.spec_from_file_location("check_book", TOOLS / "check_book.py")
check_book = sys.modules["check_book"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_book)

MATHJAX = TOOLS.parent / "book" / "_static" / "mathjax"
HEAD = '<html><head><meta charset="utf-8"><script defer src="/mathjax/tex-svg.js"></script></head><body>'
GOOD = HEAD + """
<h1 id="top">Attention</h1>
<p>Inline math <span class="math">\\(x^2\\)</span> and a <a href="other.html#here">link</a>.</p>
<figure id="fig-dot"><img src="dot.svg" alt="a dot">
<figcaption><p><span class="caption-text">A dot.</span></p></figcaption></figure>
<a href="nb.ipynb">download</a>
</body></html>"""
VIEWPORT = '<meta name="viewport" content="width=device-width, initial-scale=1">'
BAD = f'<html><head><meta charset="utf-8">{VIEWPORT}</head><body>' + """
<p>Raw $$x^2$$ and \\begin{align} left over; <span class="math">\\(y\\)</span> never typeset.</p>
<img src="missing.png" alt="gone"><img src="https://cdn.example.net/x.png" alt="remote">
<a href="other.html#nowhere">bad anchor</a><a href="gone.html">bad page</a>
<a href="https://github.com/YOUR-ORG/gpt2-course">placeholder</a><a href="broken.ipynb">bad download</a>
<div style="width:900px">too wide for a phone</div><pre style="width:900px">wide code is fine</pre>
<script>console.error("boom")</script>
</body></html>"""
SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><circle r="2" cx="2" cy="2"/></svg>'


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("html")
    (root / "mathjax").symlink_to(MATHJAX)
    (root / "chapters").mkdir()
    (root / "chapters" / "good.html").write_text(GOOD.replace('"dot.svg"', '"../dot.svg"')
                                                 .replace('"other.html', '"../other.html')
                                                 .replace('"nb.ipynb"', '"../nb.ipynb"'))
    (root / "bad.html").write_text(BAD)
    (root / "other.html").write_text(HEAD + '<p id="here">here</p></body></html>')
    (root / "dot.svg").write_text(SVG)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    (root / "nb.ipynb").write_text(nbformat.writes(nb))
    (root / "broken.ipynb").write_text(json.dumps({"cells": "not a notebook"}))
    return root


@pytest.fixture(scope="module")
def report(site: Path, tmp_path_factory: pytest.TempPathFactory) -> check_book.Report:
    shots = tmp_path_factory.mktemp("shots")
    return check_book.check_book(site, shots, phone="bad.html", query=None)


def problems_of(report: check_book.Report, page: str) -> str:
    return "\n".join(p for p in report.problems if p.startswith(page))


def test_a_clean_page_passes_and_is_photographed(report: check_book.Report) -> None:
    assert problems_of(report, "chapters/good.html") == ""
    assert [p.name for p in report.screenshots] == ["good.jpg", "phone-bad.jpg"]
    assert all(p.stat().st_size > 1000 for p in report.screenshots)


@pytest.mark.parametrize("expected", [
    "console error: boom",
    "image did not load: missing.png",
    "image did not load: https://cdn.example.net/x.png",
    "raw TeX in the text: 'Raw $$x^2$$",
    "math not typeset by MathJax: '\\\\(y\\\\)'",
    "anchor #nowhere not found in other.html",
    "broken link: gone.html",
    "link to a placeholder: https://github.com/YOUR-ORG/gpt2-course",
    "at 390 px, div sticks out",
    "at 390 px the page scrolls sideways",
])
def test_each_fault_is_reported(report: check_book.Report, expected: str) -> None:
    assert expected in problems_of(report, "bad.html"), report.problems


def test_requests_to_other_hosts_are_blocked_and_counted(report: check_book.Report) -> None:
    assert report.blocked["cdn.example.net"] >= 2  # the desktop visit and the phone visit
    assert any(p.startswith("cdn.example.net: ") and "blocked" in p for p in report.problems)


def test_a_download_that_is_not_a_notebook_fails(report: check_book.Report) -> None:
    assert any("broken.ipynb: download is not a valid notebook" in p for p in report.problems)
    assert not any("/nb.ipynb" in p for p in report.problems)


def test_wide_code_at_phone_width_is_not_blamed(report: check_book.Report) -> None:
    assert "pre sticks out" not in problems_of(report, "bad.html")


def test_search_that_finds_nothing_fails(site: Path) -> None:
    from playwright.sync_api import sync_playwright

    (site / "search.html").write_text(HEAD + '<div id="search-results"></div></body></html>')
    report = check_book.Report()
    with check_book.serve(site) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(check_book.find_browser()), args=check_book.FLAGS)
        check_book._check_search(check_book._new_context(browser, report), base, "attention", report, 2000)
        browser.close()
    assert report.problems == ["search.html: search for 'attention' found nothing"]


REAL = check_book.find_browser()  # the browser this machine has (the check fails here without one)


@pytest.fixture
def bare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine without Debian's Chromium, macOS's apps or Playwright's own browser; returns an empty
    folder, to be put first on PATH."""
    monkeypatch.setattr(check_book, "CHROMIUM", tmp_path / "usr-bin-chromium")
    monkeypatch.setattr(check_book, "MACOS_APPS", ())
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path / "ms-playwright"))
    (tmp_path / "bin").mkdir()
    return tmp_path / "bin"


def test_a_chromium_on_path_is_found_and_drives_the_check(bare: Path, site: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (bare / "chromium").symlink_to(REAL)
    monkeypatch.setenv("PATH", f"{bare}{os.pathsep}{os.environ['PATH']}")
    assert check_book.find_browser() == bare / "chromium"
    report = check_book.check_book(site, None, phone=None, query=None)
    assert report.browser == bare / "chromium"
    assert report.pages == len(check_book.pages_of(site)) and problems_of(report, "chapters/good.html") == ""


def test_playwrights_own_browser_comes_after_path(bare: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = bare.parent / "ms-playwright" / "chrome"
    own.parent.mkdir()
    own.symlink_to(REAL)
    monkeypatch.setenv("PATH", str(bare))
    assert check_book.find_browser(str(own)) == own
    (bare / "google-chrome").symlink_to(REAL)
    assert check_book.find_browser(str(own)) == bare / "google-chrome"


def test_no_browser_is_one_line_that_says_how_to_install_one(bare: Path, site: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(bare))
    with pytest.raises(SystemExit) as failed:
        check_book.check_book(site, None, phone=None, query=None)  # Playwright's own: not installed
    message = str(failed.value)
    assert "\n" not in message and message.startswith("check_book: no Chromium or Chrome found")
    assert check_book.install_hint() in message


@pytest.mark.parametrize(("system", "distro", "advice"), [
    ("Linux", {"debian"}, "apt-get install chromium"),
    ("Linux", {"ubuntu", "debian"}, ".venv/bin/playwright install --with-deps chromium"),
    ("Linux", {"fedora"}, "dnf install chromium"),
    ("Linux", {"nixos"}, ".venv/bin/playwright install --with-deps chromium"),
    ("Darwin", None, "install Google Chrome, or run .venv/bin/playwright install chromium"),
])
def test_each_platform_gets_its_own_advice(system: str, distro: set[str] | None, advice: str) -> None:
    assert advice in check_book.install_hint(system, distro)


# Figures: an <img> of an SVG, an inline SVG and a PNG, in a content column as wide as the book's.
# The caption text is 16 px (the browser's default); a label's rendered size is its font size times
# the SVG's scale: the image below is drawn 100 units wide and shown 400 px wide (x4).
LABELLED = ('<svg xmlns="http://www.w3.org/2000/svg" width="100pt" height="50pt" viewBox="0 0 100 50">'
            '<text x="5" y="20" style="font-size: {big}px">a big label</text>'
            '<text x="5" y="40" font-size="{small}">{small_text}</text></svg>')
COLUMN = f'<article class="bd-article" style="width:{check_book.COLUMN}px">'
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360f8cfc0f01f0005fe02fea73581e40000000049454e44ae426082")


def figure(img: str, caption: str = "What to look at.", fig_id: str = "") -> str:
    ident = f' id="{fig_id}"' if fig_id else ""
    return (f'<figure{ident}>{img}<figcaption><p><span class="caption-number">Fig. 1 </span>'
            f'<span class="caption-text">{caption}</span></p></figcaption></figure>')


def page(*body: str, column: str = COLUMN) -> str:
    return f'<html><head><meta charset="utf-8"></head><body>{column}{"".join(body)}</article></body></html>'


@pytest.fixture(scope="module")
def figures_report(tmp_path_factory: pytest.TempPathFactory) -> check_book.Report:
    root = tmp_path_factory.mktemp("figures")
    (root / "chapters").mkdir()
    (root / "legible.svg").write_text(LABELLED.format(big=8, small=4.5, small_text="just legible"))
    (root / "tiny.svg").write_text(LABELLED.format(big=8, small=2.5, small_text="a tiny label"))
    (root / "plot.png").write_bytes(PNG)
    (root / "paths.svg").write_text(  # matplotlib's svg.fonttype "path": glyphs, no <text>
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="100pt" '
        'height="50pt" viewBox="0 0 100 50"><defs><path id="DejaVuSans-61" d="M 0 0 L 9 9"/></defs>'
        '<use xlink:href="#DejaVuSans-61" x="5" y="5"/></svg>')
    legible = figure('<img src="../legible.svg" alt="a legible drawing" style="width:400px">',
                     fig_id="fig-ok")
    inline = figure('<svg width="300" height="100" viewBox="0 0 300 100" aria-label="an inline drawing">'
                    '<g transform="scale(2)"><text x="10" y="40" font-size="9">inline '
                    '<tspan font-size="8">still legible</tspan></text></g></svg>')
    maths = ('<p>Some maths <mjx-container><svg width="20" height="10"><text font-size="2">x</text></svg>'
             '</mjx-container></p>')
    (root / "chapters" / "01_legible.html").write_text(page(legible, inline, maths))
    (root / "chapters" / "02_tiny.html").write_text(page(
        figure('<img src="../tiny.svg" alt="a drawing with a tiny label" style="width:400px">'),
        figure('<svg width="300" height="100" viewBox="0 0 300 100"><title>inline, shrunk</title>'
               '<g transform="scale(0.5)"><text x="10" y="40" font-size="24">shrunk to twelve</text></g>'
               '</svg>', fig_id="fig-inline")))
    (root / "chapters" / "03_unlabelled.html").write_text(page(
        '<img src="../legible.svg" alt="a drawing without a caption" style="width:400px">',
        figure('<img src="../legible.svg" style="width:400px">', fig_id="fig-no-alt"),
        figure('<img src="../legible.svg" alt="../legible.svg" style="width:400px">', fig_id="fig-path-alt"),
        figure('<img src="../plot.png" alt="a plot saved as PNG" style="width:400px">'),
        figure('<img src="../paths.svg" alt="text drawn as paths" style="width:400px">')))
    (root / "chapters" / "04_copy.html").write_text(page(figure(
        '<img src="../legible.svg" alt="the same picture again" style="width:400px">')))
    (root / "narrow.html").write_text(page(legible.replace("../", ""),
                                           column='<article class="bd-article" style="width:700px">'))
    return check_book.check_book(root, None, phone=None, query=None)


def figure_problems(report: check_book.Report, page: str) -> list[str]:
    return [p for p in report.problems if p.startswith(page) and "download link" not in p]


def test_legible_figures_pass_and_are_measured(figures_report: check_book.Report) -> None:
    assert figure_problems(figures_report, "chapters/01_legible.html") == []
    sizes = {f["figure"]: (round(f["smallest_px"], 1), f["smallest"], f["caption_px"])
             for f in figures_report.figures if f["page"] == "chapters/01_legible.html"}
    assert sizes == {'fig-ok "a legible drawing"': (18.0, "just legible", 16.0),  # 4.5 units x 4
                     # a tspan is named with its text; 8 units x 2: as large as the caption
                     '"an inline drawing"': (16.0, "still legible' in 'inline still legible", 16.0)}


def test_a_label_smaller_than_the_caption_fails_naming_it(figures_report: check_book.Report) -> None:
    assert figure_problems(figures_report, "chapters/02_tiny.html") == [
        'chapters/02_tiny.html: figure "a drawing with a tiny label": label \'a tiny label\' is 10.0 px, '
        "smaller than the caption text's 16.0 px, at a 800 px column (1 of its 2 labels)",
        'chapters/02_tiny.html: figure fig-inline "inline, shrunk": label \'shrunk to twelve\' is 12.0 px, '
        "smaller than the caption text's 16.0 px, at a 800 px column (1 of its 1 labels)"]


def test_a_figure_without_alt_text_or_caption_fails(figures_report: check_book.Report) -> None:
    found = "\n".join(figure_problems(figures_report, "chapters/03_unlabelled.html"))
    assert 'figure "a drawing without a caption" has no caption' in found
    assert "figure fig-no-alt has no alt text" in found
    assert "figure fig-path-alt has no alt text" in found  # Sphinx's default alt: the image's path
    assert ('figure "a plot saved as PNG" is a raster image (png): its labels cannot be measured' in found)
    assert 'figure "text drawn as paths": its text is drawn as paths; its labels cannot be measured' in found
    assert "smaller than the caption" not in found  # every SVG here is legible


def test_a_chapter_opening_with_the_last_ones_picture_fails(figures_report: check_book.Report) -> None:
    assert figure_problems(figures_report, "chapters/04_copy.html") == [
        "chapters/04_copy.html: opens with the same picture as chapters/03_unlabelled.html (legible.svg)"]


def test_a_theme_that_moves_the_column_fails(figures_report: check_book.Report) -> None:
    assert figure_problems(figures_report, "narrow.html") == [
        "narrow.html: the content column is 700 px wide in a 1080 px window, not 800: the theme changed; "
        "set DESKTOP in tools/check_book.py to the window width that gives 800 px"]
