"""Check the built book in a real browser: every page of `_build/html` in Chromium or Chrome.

Usage:
    python tools/check_book.py                 # after `make book`; exit 1 listing every problem
    python tools/check_book.py --figures       # also print every figure's smallest label and caption size
    python tools/check_book.py --html DIR --screenshots DIR --phone chapters/04_self_attention.html
    python tools/check_book.py --which-browser # the browser it would drive, or how to get one

The book is served on 127.0.0.1 and driven with Playwright's Python package, which ships its
own driver and launches the first browser found (`find_browser`): Debian's /usr/bin/chromium
(`apt-get install chromium`, what CI uses), a Chromium or Chrome on PATH or in macOS's
/Applications, the one `.venv/bin/playwright install chromium` downloads, and last a snap's
(Ubuntu's Chromium, which Playwright often cannot start). With none, the check fails with one line
saying how to install one on this system: it is part of `make test`, never skipped. Every page
fails the check on:

- a request to any host but 127.0.0.1 (blocked, and counted by host): the book works offline;
- a console error or uncaught exception;
- an image that did not load;
- math left unrendered: a `.math` element MathJax did not typeset, or raw TeX (`$$`, `\\(`,
  `\\begin`...) in the text outside code;
- an internal link to a missing file, or to an anchor the target page does not have;
- a link to a placeholder (YOUR-ORG, example.org): the book was published unconfigured;
- a download link (`.ipynb`) that does not return a valid notebook; a chapter without one;
- a figure a reader cannot read at the book's width. Pages are loaded in a 1080 px window
  (`DESKTOP`), where sphinx-book-theme 1.3 lays the text out 800 px wide (`COLUMN`: the content
  box of `article.bd-article`, a paragraph's width; the left sidebar is folded away below 1200 px,
  and with it shown the text is at most 790 px wide). A theme that moves it fails the check.
  Every image and inline SVG in the column (not MathJax's SVG, not icons) is a figure, and fails
  when
  - one of its text labels renders smaller than the page's caption text (the computed font size
    of `figcaption .caption-text`: 16 px in this theme, the body text's size). A label's size is measured as
    drawn: its computed font size times the scale of its `getScreenCTM()`; an `<img>` of an SVG
    (how MyST-NB shows a glued matplotlib figure) is measured on a copy of the SVG file attached
    at the image's rendered size, so viewBox, transforms and the theme's shrinking of wide
    figures all count. A raster image, or an SVG whose text is drawn as paths, cannot be
    measured, and fails saying so (the course's figures are SVG with text as text);
  - it has no alt text (Sphinx's default alt, the image's own path, counts as none), or no
    caption (a `figcaption`: what `{glue:figure}` and `{figure}` make from their body);
- a chapter whose first figure is the same image file as the previous chapter's first figure
  (MyST-NB names an output's file by its content): no chapter opens with a copy of the last one's
  picture.

Then: the search page must find "attention"; and one chapter at phone width (390 px) must not
scroll sideways: only code blocks and tables may overflow, each inside its own scroll box.
A full-page screenshot of every chapter (and of the phone view) goes to `--screenshots` for
humans to look at.
"""
from __future__ import annotations

import argparse
import functools
import os
import platform
import re
import shutil
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

import nbformat

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")  # Debian's, first: CI's browser
ON_PATH = ("chromium", "chromium-browser", "google-chrome", "chrome")
MACOS_APPS = (Path("/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"),
              Path("/Applications/Chromium.app/Contents/MacOS/Chromium"))
PLAYWRIGHT_INSTALL = ".venv/bin/playwright install --with-deps chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]
HOST = "127.0.0.1"
PHONE = {"width": 390, "height": 844}
# In a 1080 px window sphinx-book-theme 1.3 lays the text out 800 px wide (the content box of
# article.bd-article: a paragraph's width). Below 1200 px the left sidebar folds away; with it
# shown the text is narrower (736 px at 1340, at most 790 from 1408 on). _check_figures fails if a
# theme update moves it.
DESKTOP = {"width": 1080, "height": 900}
COLUMN = 800
REFRESH = re.compile(r'<meta http-equiv="refresh" content="\d+;\s*url=([^"]+)"', re.IGNORECASE)
PLACEHOLDER = re.compile(r"YOUR-ORG|(^|\.)example\.(org|com|net)$", re.IGNORECASE)
SKIP_DIRS = ("_static", "_sources", "_downloads", "_images")
TIMEOUT_MS = 20_000

# Runs in each page: wait for MathJax, then report what the page shows.
PAGE_JS = r"""
async () => {
  if (document.querySelector('.math')) {
    for (let i = 0; i < 40 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++)
      await new Promise(r => setTimeout(r, 50));
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  }
  const brokenImages = [];
  await Promise.all([...document.images].map(async img => {
    img.loading = 'eager';
    try { await img.decode(); } catch (e) { brokenImages.push(img.getAttribute('src')); }
    if (img.naturalWidth === 0 && !brokenImages.includes(img.getAttribute('src')))
      brokenImages.push(img.getAttribute('src'));
  }));
  const untypeset = [...document.querySelectorAll('.math')]
    .filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.trim().slice(0, 60));
  const raw = /\$\$|\\[()[\]]|\\(begin|end|frac|sqrt|mathrm|mathbf|text|sum|cdot|times|operatorname)\b/;
  const rawTex = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const skip = 'pre, code, script, style, textarea, mjx-container, .highlight, .math';
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const m = n.textContent.match(raw);
    if (m && !n.parentElement.closest(skip)) rawTex.push(n.textContent.trim().slice(0, 80));
  }
  return {
    brokenImages, untypeset, rawTex,
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    ids: [...document.querySelectorAll('[id]')].map(e => e.id)
      .concat([...document.querySelectorAll('a[name]')].map(a => a.name)),
  };
}
"""

# Runs at phone width: the outermost elements that stick out to the right of the viewport
# without an ancestor that clips or scrolls them; and whether the page itself scrolls sideways.
PHONE_JS = r"""
() => {
  const W = document.documentElement.clientWidth;
  const clipped = el => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.position === 'fixed') return true;
      if (s.overflowX !== 'visible' && a.getBoundingClientRect().right <= W + 1) return true;
    }
    return false;
  };
  const offenders = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    const s = getComputedStyle(el);
    if (r.width === 0 || r.height === 0 || s.visibility === 'hidden' || s.position === 'fixed') continue;
    if (r.right <= W + 1 || clipped(el)) continue;
    if (offenders.some(o => o.el.contains(el))) continue;
    const name = el.tagName.toLowerCase() + (el.className && typeof el.className === 'string'
      ? '.' + el.className.trim().split(/\s+/).join('.') : '');
    offenders.push({el, name, right: Math.round(r.right),
                    exempt: !!el.closest('pre, table, .highlight')});
  }
  return {width: W, scrollWidth: document.documentElement.scrollWidth,
          offenders: offenders.map(({el, ...o}) => o)};
}
"""

# Runs in each page at DESKTOP, after PAGE_JS: every figure in the content column, with the rendered
# size of its smallest text label, its alt text and its caption. Labels are measured as drawn: a
# <text>/<tspan>'s computed font size (user units) times the scale its getScreenCTM() applies.
# An <img> of an SVG is measured on a copy: the SVG file, fetched and parsed, attached in place of
# the image at the image's rendered content size (so its viewBox maps the way the <img> maps it),
# measured, and removed. MathJax's SVG and icons are not figures.
FIGURES_JS = r"""
async () => {
  const root = document.querySelector('article.bd-article') || document.querySelector('main')
    || document.body;
  for (const d of root.querySelectorAll('details')) d.open = true;
  let cap = root.querySelector('figcaption .caption-text') || root.querySelector('figcaption');
  let probe = null;
  if (!cap) {  // a page without a caption: measure the one a caption would get here
    probe = document.createElement('figure');
    probe.innerHTML = '<figcaption><p><span class="caption-number">Fig. 1 </span>'
      + '<span class="caption-text">probe</span></p></figcaption>';
    root.appendChild(probe);
    cap = probe.querySelector('.caption-text');
  }
  const captionPx = parseFloat(getComputedStyle(cap).fontSize);
  if (probe) probe.remove();
  const article = document.querySelector('article.bd-article');
  const pad = article && getComputedStyle(article);
  const column = article && article.clientWidth - parseFloat(pad.paddingLeft) - parseFloat(pad.paddingRight);
  const scale = m => Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
  const unseen = 'defs, clipPath, mask, symbol, pattern, marker, metadata, title, desc';
  const labelsOf = svg => {
    const out = [];
    for (const t of svg.querySelectorAll('text, tspan')) {
      if (t.closest(unseen)) continue;
      const own = [...t.childNodes].filter(n => n.nodeType === Node.TEXT_NODE)
        .map(n => n.textContent).join('').trim();
      const s = getComputedStyle(t);
      if (!own || s.display === 'none' || s.visibility === 'hidden') continue;
      const m = (t.closest('text') || t).getScreenCTM();
      if (!m) continue;
      const whole = (t.closest('text') || t).textContent.replace(/\s*\n\s*/g, '').trim();
      out.push({px: parseFloat(s.fontSize) * scale(m),  // a tspan (an exponent): named with its text
                text: (own === whole ? whole : `${own}' in '${whole}`).slice(0, 60)});
    }
    return out;
  };
  const glyphs = svg => !svg.querySelector('text')
    && !!svg.querySelector('defs path[id], symbol[id], use[href^="#"], use[*|href^="#"]');
  const lengthPx = v => {
    const m = /^\s*([\d.]+)\s*(px|pt|in|cm|mm|pc)?\s*$/.exec(v || '');
    if (!m) return null;
    const unit = {px: 1, pt: 4 / 3, in: 96, cm: 96 / 2.54, mm: 96 / 25.4, pc: 16};
    return parseFloat(m[1]) * unit[m[2] || 'px'];
  };
  const captionOf = el => {
    const fig = el.closest('figure');
    const c = fig && fig.querySelector('figcaption');
    if (!c) return '';
    const text = c.querySelector('.caption-text');
    return (text ? text.textContent : c.textContent).trim();
  };
  const candidates = [...root.querySelectorAll('img, svg')].filter(el => {
    if (el.tagName.toLowerCase() === 'svg' && el.parentElement.closest('svg')) return false;
    if (el.closest('mjx-container, button, nav, .headerlink, .sd-octicon, .fa, i')) return false;
    return true;
  });
  const figures = [];
  for (const el of candidates) {
    const r = el.getBoundingClientRect();
    const isImg = el.tagName.toLowerCase() === 'img';
    if (!isImg && r.width < 48 && r.height < 48) continue;  // an inline icon
    const src = isImg ? (el.getAttribute('src') || '') : '';
    const file = src.split(/[?#]/)[0].split('/').pop();
    const title = el.querySelector(':scope > title');
    let alt = (isImg ? el.getAttribute('alt') : el.getAttribute('aria-label') || (title && title.textContent))
      || '';
    alt = alt.trim();
    if (isImg && (alt === src || alt.split('/').pop() === file)) alt = '';  // Sphinx's default: the path
    const fig = {id: el.id || (el.closest('figure') || {}).id || '', alt, caption: captionOf(el), src,
                 width: r.width, kind: isImg ? 'img' : 'inline svg', labels: [], problem: ''};
    figures.push(fig);
    if (isImg && !el.naturalWidth) continue;  // reported as an image that did not load
    if (r.width === 0 || r.height === 0) { fig.problem = 'not shown (zero size)'; continue; }
    if (!isImg) {
      fig.labels = labelsOf(el);
      if (!fig.labels.length && glyphs(el)) fig.problem = 'its text is drawn as paths';
      continue;
    }
    const url = el.currentSrc || el.src;
    const svgData = /^data:image\/svg\+xml/i.test(url) || /\.svg$/i.test(new URL(url).pathname);
    if (!svgData) { fig.kind = 'raster'; continue; }
    let text;
    try { text = await (await fetch(url)).text(); }
    catch (e) { fig.problem = `could not fetch ${src}: ${e}`; continue; }
    const parsed = new DOMParser().parseFromString(text, 'image/svg+xml').documentElement;
    if (parsed.namespaceURI !== 'http://www.w3.org/2000/svg' || parsed.localName !== 'svg') {
      fig.problem = `${src} is not an SVG document`; continue;
    }
    const svg = document.importNode(parsed, true);
    if (!svg.getAttribute('viewBox')) {  // an <img> scales the SVG's own size to its box
      const w = lengthPx(svg.getAttribute('width')), h = lengthPx(svg.getAttribute('height'));
      if (w && h) svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
    }
    const s = getComputedStyle(el);
    const px = k => parseFloat(s[k]) || 0;
    const cw = r.width - px('paddingLeft') - px('paddingRight') - px('borderLeftWidth')
      - px('borderRightWidth');
    const ch = r.height - px('paddingTop') - px('paddingBottom') - px('borderTopWidth')
      - px('borderBottomWidth');
    svg.setAttribute('width', cw);
    svg.setAttribute('height', ch);
    const box = document.createElement('div');
    box.style.cssText = `position:absolute;left:${r.left + scrollX}px;top:${r.top + scrollY}px;`
      + 'opacity:0;pointer-events:none;margin:0;padding:0;border:0';
    box.appendChild(svg);
    document.body.appendChild(box);
    fig.labels = labelsOf(svg);
    if (!fig.labels.length && glyphs(svg)) fig.problem = 'its text is drawn as paths';
    box.remove();
  }
  for (const f of figures) {
    f.labels.sort((a, b) => a.px - b.px);
    f.smallest = f.labels.length ? f.labels[0] : null;
    f.below = f.labels.filter(l => l.px < captionPx - 0.05).length;
    f.count = f.labels.length;
    delete f.labels;
  }
  return {captionPx, column, figures};
}
"""


def install_hint(system: str | None = None, distro: set[str] | None = None) -> str:
    """How to get a browser the check can drive, on this system (or the one named)."""
    system = system or platform.system()
    if system == "Darwin":
        return "install Google Chrome, or run .venv/bin/playwright install chromium"
    if system == "Windows":
        return r"install Google Chrome, or run .venv\Scripts\playwright install chromium"
    if distro is None:
        try:
            release = platform.freedesktop_os_release()
            distro = {release.get("ID", ""), *release.get("ID_LIKE", "").split()}
        except OSError:
            distro = set()
    if "ubuntu" in distro:  # before debian: Ubuntu's ID_LIKE is debian, its chromium package a snap
        return f"run {PLAYWRIGHT_INSTALL} (Ubuntu's apt-get install chromium gives a snap)"
    if "debian" in distro:
        return "run apt-get install chromium as root"
    if distro & {"fedora", "rhel", "centos"}:
        return "run dnf install chromium as root"
    if "arch" in distro:
        return "run pacman -S chromium as root"
    return f"run {PLAYWRIGHT_INSTALL}"


def find_browser(playwright_browser: str | None = None) -> Path:
    """The browser to drive: the first of Debian's Chromium, a Chromium or Chrome on PATH or in
    /Applications, Playwright's own (`playwright_browser`: where Playwright keeps it), then one a
    snap runs. With none, exit with one line that says how to install one here."""
    found = [CHROMIUM, *(shutil.which(name) for name in ON_PATH), *MACOS_APPS, playwright_browser]
    found = [Path(p) for p in found if p and os.path.isfile(p) and os.access(p, os.X_OK)]
    snaps = [p for p in found if Path(os.path.realpath(p)).parts[1:2] == ("snap",)]
    if found:
        return ([p for p in found if p not in snaps] + snaps)[0]
    raise SystemExit(f"check_book: no Chromium or Chrome found (looked for {CHROMIUM}, "
                     f"{', '.join(ON_PATH)} on PATH, and Playwright's own): {install_hint()}, "
                     f"then run make test again")


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    browser: Path | None = None
    blocked: Counter[str] = field(default_factory=Counter)
    external_links: Counter[str] = field(default_factory=Counter)
    pages: int = 0
    figures: list[dict] = field(default_factory=list)  # every figure measured: page, name, sizes
    search_hits: int = 0
    screenshots: list[Path] = field(default_factory=list)

    def fail(self, page: str, what: str) -> None:
        self.problems.append(f"{page}: {what}")


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # Chromium closes connections it no longer needs (a page left mid-download): not a problem.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def serve(html: Path) -> Iterator[str]:
    """Serve `html` on 127.0.0.1 (a free port) for as long as the block runs; yields the base URL."""
    server = _QuietServer((HOST, 0), functools.partial(_QuietHandler, directory=str(html)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def pages_of(html: Path) -> list[str]:
    """Every HTML page of the built book, as paths relative to `html`."""
    return sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html")
                  if p.relative_to(html).parts[0] not in SKIP_DIRS)


def valid_notebook(data: bytes) -> str | None:
    """None if `data` is a notebook nbformat accepts, with cells; else what is wrong."""
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
        nbformat.validate(nb)
    except Exception as e:  # any parse or schema error means the learner gets no notebook
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return None if nb.cells else "a notebook without cells"


def _new_context(browser, report: Report, **options):
    """A browser context in which any request to another host is blocked and counted."""
    context = browser.new_context(service_workers="block", **options)
    context.set_default_timeout(TIMEOUT_MS)

    def block(route) -> None:
        host = urlsplit(route.request.url).hostname or route.request.url[:40]
        if host == HOST:
            route.continue_()
        else:
            report.blocked[host] += 1
            route.abort()

    context.route(re.compile(r"^(https?|wss?)://"), block)
    return context


def _visit(context, url: str, name: str, report: Report) -> dict:
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught {e}"))
    try:
        page.goto(url, wait_until="load")
        seen = page.evaluate(PAGE_JS)
        seen["page"] = page
    except Exception as e:  # a page that does not load is one problem, not the end of the check
        report.fail(name, f"did not load: {str(e).splitlines()[0]}")
        page.close()
        return {"links": [], "ids": [], "page": None}
    for text in errors:
        report.fail(name, f"console error: {text[:200]}")
    for src in seen["brokenImages"]:
        report.fail(name, f"image did not load: {src}")
    for text in seen["untypeset"]:
        report.fail(name, f"math not typeset by MathJax: {text!r}")
    for text in seen["rawTex"]:
        report.fail(name, f"raw TeX in the text: {text!r}")
    return seen


def _figure_name(fig: dict) -> str:
    alt = fig["alt"] if len(fig["alt"]) <= 60 else fig["alt"][:57] + "..."
    name = fig["id"] or (fig["src"].rsplit("/", 1)[-1] if not alt else "")
    return " ".join(filter(None, [name, f'"{alt}"' if alt else ""])) or fig["kind"]


def _check_figures(page, name: str, report: Report, opening: dict[str, str]) -> None:
    """Every figure of a page at DESKTOP: no label smaller than the caption text, alt text, a caption."""
    seen = page.evaluate(FIGURES_JS)
    if seen["column"] is not None and abs(seen["column"] - COLUMN) > 1:
        report.fail(name, f"the content column is {seen['column']:.0f} px wide in a {DESKTOP['width']} px "
                          f"window, not {COLUMN}: the theme changed; set DESKTOP in tools/check_book.py "
                          f"to the window width that gives {COLUMN} px")
    caption = seen["captionPx"]
    for fig in seen["figures"]:
        what = f"figure {_figure_name(fig)}"
        small = fig["smallest"]
        report.figures.append({"page": name, "figure": _figure_name(fig), "kind": fig["kind"],
                               "width": fig["width"], "labels": fig["count"], "below": fig["below"],
                               "smallest_px": small["px"] if small else None,
                               "smallest": small["text"] if small else None, "caption_px": caption})
        if not fig["alt"]:
            report.fail(name, f"{what} has no alt text")
        if not fig["caption"]:
            report.fail(name, f"{what} has no caption")
        if fig["problem"]:
            report.fail(name, f"{what}: {fig['problem']}; its labels cannot be measured")
        elif fig["kind"] == "raster":
            report.fail(name, f"{what} is a raster image ({fig['src'].rsplit('.', 1)[-1]}): its labels "
                              f"cannot be measured; draw it as SVG with text kept as text "
                              f"(figures.use_svg())")
        elif fig["below"]:
            report.fail(name, f"{what}: label '{small['text']}' is {small['px']:.1f} px, smaller than the "
                              f"caption text's {caption:.1f} px, at a {COLUMN} px column "
                              f"({fig['below']} of its {fig['count']} labels)")
    opening[name] = seen["figures"][0]["src"].rsplit("/", 1)[-1] if seen["figures"] else ""


def _check_openings(opening: dict[str, str], chapter_dir: str, report: Report) -> None:
    """No chapter opens with the picture the chapter before it opened with (the same image file:
    MyST-NB names an output's file by a hash of its content)."""
    chapters = sorted(n for n in opening if n.startswith(chapter_dir))
    for before, name in zip(chapters, chapters[1:]):
        if opening[name] and opening[name] == opening[before]:
            report.fail(name, f"opens with the same picture as {before} ({opening[name]})")


def _check_links(base: str, html: Path, links: dict[str, list[str]], ids: dict[str, set[str]],
                 report: Report) -> set[str]:
    """Internal links resolve to a file and an anchor; returns the local .ipynb URLs linked."""
    notebooks = set()
    for name, hrefs in links.items():
        for href in set(hrefs):
            scheme = urlsplit(href).scheme
            if scheme not in ("http", "https"):
                continue
            target, anchor = urldefrag(href)
            if not target.startswith(base):
                host = urlsplit(target).hostname or ""
                report.external_links[host] += 1
                if PLACEHOLDER.search(host) or PLACEHOLDER.search(target):
                    report.fail(name, f"link to a placeholder: {href}")
                continue
            rel = unquote(urlsplit(target).path.removeprefix(urlsplit(base).path))
            path = html / rel
            if path.is_dir():
                rel, path = f"{rel.rstrip('/')}/index.html".lstrip("/"), path / "index.html"
            if not path.is_file():
                report.fail(name, f"broken link: {rel}")
                continue
            if rel.endswith(".ipynb"):
                notebooks.add(target)
            if anchor and rel.endswith(".html"):
                known = ids.get(rel)
                if known is None:  # a page the crawl did not visit: read its ids from the file
                    known = set(re.findall(r'\bid="([^"]+)"', path.read_text(encoding="utf-8")))
                    ids[rel] = known
                if unquote(anchor) not in known:
                    report.fail(name, f"anchor #{anchor} not found in {rel}")
    return notebooks


def _check_downloads(notebooks: set[str], report: Report) -> None:
    for url in sorted(notebooks):
        with urllib.request.urlopen(url, timeout=30) as response:
            problem = valid_notebook(response.read())
        if problem:
            report.fail(url, f"download is not a valid notebook: {problem}")


def _check_search(context, base: str, query: str, report: Report, timeout_ms: int = TIMEOUT_MS) -> None:
    page = context.new_page()
    try:
        page.goto(f"{base}search.html?q={query}", wait_until="load")
        page.wait_for_function("() => document.querySelectorAll('#search-results li').length > 0",
                               timeout=timeout_ms)
        report.search_hits = page.evaluate("() => document.querySelectorAll('#search-results li').length")
    except Exception:  # timed out: the search found nothing (or the page broke)
        report.fail("search.html", f"search for {query!r} found nothing")
    finally:
        page.close()


def _check_phone(browser, base: str, name: str, shots: Path | None, report: Report) -> None:
    context = _new_context(browser, report, viewport=PHONE, is_mobile=True, has_touch=True)
    seen = _visit(context, base + name, f"{name} at {PHONE['width']} px", report)
    if page := seen["page"]:
        layout = page.evaluate(PHONE_JS)
        if layout["width"] != PHONE["width"]:  # no <meta name="viewport">: the phone zooms out
            report.fail(name, f"at {PHONE['width']} px the page lays out {layout['width']} px wide")
        for o in layout["offenders"]:
            if not o["exempt"]:
                report.fail(name, f"at {layout['width']} px, {o['name']} sticks out to x={o['right']}")
        if layout["scrollWidth"] > layout["width"]:
            culprits = ", ".join(o["name"] for o in layout["offenders"]) or "unknown"
            report.fail(name, f"at {layout['width']} px the page scrolls sideways to "
                              f"{layout['scrollWidth']} px ({culprits})")
        if shots:
            path = shots / f"phone-{Path(name).stem}.jpg"
            page.screenshot(path=str(path), full_page=True, type="jpeg", quality=70)
            report.screenshots.append(path)
    context.close()


def launch(p, path: Path):
    """`path` started headless by Playwright `p`; a browser that will not start is one line."""
    try:
        return p.chromium.launch(executable_path=str(path), headless=True, args=FLAGS)
    except Exception as e:  # Playwright's error names the browser's own complaint on its first line
        raise SystemExit(f"check_book: {path} did not start ({str(e).splitlines()[0][:200]}): "
                         f"{install_hint()}") from None


def check_book(html: Path, shots: Path | None, phone: str | None, query: str | None = "attention",
               chapter_dir: str = "chapters/") -> Report:
    """Drive the browser over every page of `html`; every problem found is in the returned report."""
    from playwright.sync_api import sync_playwright

    if shots:
        shots.mkdir(parents=True, exist_ok=True)
        for old in shots.glob("*.jpg"):
            old.unlink()
    report = Report()
    names = pages_of(html)
    with sync_playwright() as p, serve(html) as base:
        report.browser = find_browser(p.chromium.executable_path)
        browser = launch(p, report.browser)
        context = _new_context(browser, report, viewport=DESKTOP)
        links, ids, opening = {}, {}, {}
        for name in names:
            if redirect := REFRESH.search((html / name).read_text(encoding="utf-8")):
                links[name], ids[name] = [urljoin(base + name, redirect[1])], set()
                continue  # a redirect page (index.html): its target must exist, nothing to render
            seen = _visit(context, base + name, name, report)
            links[name], ids[name] = seen["links"], set(seen["ids"])
            if page := seen["page"]:
                _check_figures(page, name, report, opening)
                if name.startswith(chapter_dir):
                    if not any(h.startswith(base) and h.endswith(".ipynb") for h in seen["links"]):
                        report.fail(name, "no download link to the chapter's .ipynb")
                    if shots:
                        path = shots / f"{Path(name).stem}.jpg"  # JPEG: a third faster than PNG
                        page.screenshot(path=str(path), full_page=True, type="jpeg", quality=70)
                        report.screenshots.append(path)
                page.close()
        report.pages = len(names)
        _check_openings(opening, chapter_dir, report)
        _check_downloads(_check_links(base, html, links, ids, report), report)
        if query:
            _check_search(context, base, query, report)
        context.close()
        if phone:
            _check_phone(browser, base, phone, shots, report)
        browser.close()
    for host, n in report.blocked.most_common():
        report.fail(host, f"{n} request(s) blocked: the book must not reach other hosts")
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--screenshots", type=Path, default=ROOT / "_build" / "screenshots")
    parser.add_argument("--phone", default="chapters/04_self_attention.html",
                        help="the page checked at phone width")
    parser.add_argument("--figures", action="store_true",
                        help="print every figure's smallest label and the caption size, in px")
    parser.add_argument("--which-browser", action="store_true",
                        help="print the browser the check would drive (or how to install one) and stop")
    args = parser.parse_args(argv)
    if args.which_browser:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            print(find_browser(p.chromium.executable_path))
        return
    if not (args.html / "index.html").exists():
        raise SystemExit(f"{args.html}/index.html not found: build the book first (make book)")
    start = time.perf_counter()
    report = check_book(args.html, args.screenshots, args.phone)
    seconds = time.perf_counter() - start
    print(f"check_book: {report.pages} pages in {report.browser}, {len(report.screenshots)} screenshots in "
          f"{args.screenshots}, search 'attention': {report.search_hits} results, {seconds:.0f} s")
    blocked = ", ".join(f"{h} ({n})" for h, n in report.blocked.most_common()) or "none"
    print(f"requests to other hosts (blocked): {blocked}")
    hosts = ", ".join(f"{h} ({n})" for h, n in report.external_links.most_common()) or "none"
    print(f"links out of the book: {hosts}")
    if args.figures:
        print(f"figures at a {COLUMN} px column: page | figure | kind | rendered width | smallest label px "
              f"| caption px | labels below / all")
        for f in report.figures:
            smallest = f"{f['smallest_px']:.1f} ({f['smallest']!r})" if f["smallest_px"] else "-"
            print(f"{f['page']} | {f['figure']} | {f['kind']} | {f['width']:.0f} | {smallest} | "
                  f"{f['caption_px']:.1f} | {f['below']}/{f['labels']}")
    for line in report.problems:
        print(f"FAIL {line}", file=sys.stderr)
    sys.exit(1 if report.problems else 0)


if __name__ == "__main__":
    main()
