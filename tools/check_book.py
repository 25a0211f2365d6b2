"""Check the built book in a real browser: every page of `_build/html` in Chromium or Chrome.

Usage:
    python tools/check_book.py                 # after `make book`; exit 1 listing every problem
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
- a download link (`.ipynb`) that does not return a valid notebook; a chapter without one.

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
        context = _new_context(browser, report, viewport={"width": 1280, "height": 900})
        links, ids = {}, {}
        for name in names:
            if redirect := REFRESH.search((html / name).read_text(encoding="utf-8")):
                links[name], ids[name] = [urljoin(base + name, redirect[1])], set()
                continue  # a redirect page (index.html): its target must exist, nothing to render
            seen = _visit(context, base + name, name, report)
            links[name], ids[name] = seen["links"], set(seen["ids"])
            if page := seen["page"]:
                if name.startswith(chapter_dir):
                    if not any(h.startswith(base) and h.endswith(".ipynb") for h in seen["links"]):
                        report.fail(name, "no download link to the chapter's .ipynb")
                    if shots:
                        path = shots / f"{Path(name).stem}.jpg"  # JPEG: a third faster than PNG
                        page.screenshot(path=str(path), full_page=True, type="jpeg", quality=70)
                        report.screenshots.append(path)
                page.close()
        report.pages = len(names)
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
    for line in report.problems:
        print(f"FAIL {line}", file=sys.stderr)
    sys.exit(1 if report.problems else 0)


if __name__ == "__main__":
    main()
