"""The documentation site in a real browser: built with ``mkdocs build --strict``, served
on 127.0.0.1, every page opened in headless Chromium (Debian's ``chromium`` driven through
its ``chromium-driver`` by Selenium; ``make browser`` installs both). A console error, an
internal link to a page or anchor that is not there, or an image that does not load fails
it; the tutorial's screenshot must show the page. Every page of ``docs/`` is in the
navigation, whose sections are the ones a reader looks for."""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlparse

import pytest
import yaml
from conftest import REPO
from helpers.png import check_png

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SCREEN = (1280, 1600)


def nav_pages(nav: Any) -> list[str]:
    """The Markdown files of mkdocs.yml's ``nav``, in order."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return [page for item in nav for page in nav_pages(item)]


def url_of(page: str) -> str:
    """A page's address on the site (``use_directory_urls``): ``how-to/x.md`` is ``how-to/x/``."""
    path = page.removesuffix(".md")
    path = path.removesuffix("index")
    return path if not path or path.endswith("/") else f"{path}/"


NAV = nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])
PAGES = tuple(url_of(page) for page in NAV)


def build(site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of the repository's site into ``site``."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The built site, served on 127.0.0.1 (a free port); its base URL."""
    root = tmp_path_factory.mktemp("site")
    done = build(root)
    assert done.returncode == 0, done.stderr[-3000:]
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium with its console log kept."""
    if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()):
        pytest.fail("Debian's chromium and chromium-driver are missing: run `make browser`")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={SCREEN[0]},{SCREEN[1]}", "--hide-scrollbars"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_site_builds_strictly_offline(tmp_path: Path) -> None:
    done = build(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    for page in PAGES:
        assert (tmp_path / page / "index.html").is_file(), page
    html = (tmp_path / "index.html").read_text()
    assert "fonts.googleapis.com" not in html and "fonts.gstatic.com" not in html


def fetch(url: str) -> tuple[int, str]:
    """The status and body of ``url`` (the local server)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def internal_links(driver: Any, base: str) -> list[str]:
    """Every link on the page to the site itself."""
    hrefs = driver.execute_script(
        "return Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"
    )
    return sorted({h for h in hrefs if h.startswith(base)})


def broken(links: list[str], cache: dict[str, tuple[int, str]]) -> list[str]:
    """Links whose page does not load or whose anchor is not on it."""
    found = []
    for link in links:
        page, anchor = urldefrag(link)
        if page not in cache:
            cache[page] = fetch(page)
        status, body = cache[page]
        if status != 200:
            found.append(f"{link}: HTTP {status}")
        elif anchor and not re.search(rf'id="{re.escape(anchor)}"', body):
            found.append(f"{link}: no element with id {anchor!r}")
    return found


def first_anchor(html: str) -> str:
    """The id of the first heading below the title of a built page."""
    return re.findall(r'<h2 id="([^"]+)"', html)[0]


IMAGES = """const done = arguments[arguments.length - 1];
Promise.all(Array.from(document.images).map(i => i.decode().then(
    () => [i.src, i.naturalWidth], () => [i.src, 0]))).then(done);"""


def page_problems(driver: Any, site: str, cache: dict[str, tuple[int, str]]) -> list[str]:
    """What is wrong with the page ``driver`` shows: images that did not load (every one
    decoded, after scrolling to the end so that lazy ones are requested), internal links
    to a missing page or anchor, errors on the console since the last look."""
    url = driver.current_url
    driver.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    images = driver.execute_async_script(IMAGES)
    problems = [f"{url}: image {src} did not load" for src, width in images if width == 0]
    problems += [f"{url}: {link}" for link in broken(internal_links(driver, site), cache)]
    for entry in driver.get_log("browser"):
        if entry["level"] == "SEVERE":
            problems.append(f"{url}: console: {entry['message']}")
    return problems


def test_every_page_loads_in_chromium_without_errors_broken_links_or_images(
    site: str, browser: Any, tmp_path: Path
) -> None:
    cache: dict[str, tuple[int, str]] = {}
    problems = []
    images = 0
    for page in PAGES:
        browser.get(urljoin(site, page))
        assert "dali_pipes" in browser.title, (page, browser.title)
        problems += page_problems(browser, site, cache)
        images += browser.execute_script("return document.images.length")
        if page == "tutorial/":  # the tutorial's first picture, on the page
            browser.execute_script("document.querySelector('article img').scrollIntoView()")
            shot = tmp_path / "tutorial.png"
            browser.save_screenshot(str(shot))
            check_png(shot, width=SCREEN[0])
            keep = os.environ.get("DALI_PIPES_SCREENSHOT")  # a copy to look at
            if keep:
                shutil.copy(shot, keep)
    assert not problems, "\n".join(problems)
    assert images >= 4  # the show previews, the gallery and the bench charts


def test_every_page_of_the_docs_folder_is_in_the_navigation_once() -> None:
    on_disk = sorted(str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md"))
    assert sorted(NAV) == on_disk
    sections = [
        next(iter(item)) for item in yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]
    ]
    assert sections == ["Home", "Tutorial", "Installation", "How-to guides", "Reference",
                        "How it works", "Results", "Troubleshooting", "Development"]  # fmt: skip


def test_the_checks_catch_a_console_error_a_broken_image_a_missing_page_and_anchor(
    site: str, browser: Any
) -> None:
    browser.get(urljoin(site, "installation/"))
    page_problems(browser, site, {})  # what the page itself logged
    browser.execute_script(
        "const i = document.createElement('img'); i.src = '/img/nothing.png';"
        "document.body.appendChild(i); console.error('injected');"
        "const a = document.createElement('a'); a.href = '/tutorial/#no-such-heading';"
        "document.body.appendChild(a);"
    )
    found = "\n".join(page_problems(browser, site, {}))
    assert "image http://127.0.0.1" in found and "nothing.png did not load" in found
    assert "console:" in found and "injected" in found
    assert "no element with id 'no-such-heading'" in found
    assert (
        broken(
            [urljoin(site, "tutorial/#" + first_anchor(fetch(urljoin(site, "tutorial/"))[1]))], {}
        )
        == []
    )
    assert broken([urljoin(site, "nowhere/")], {})[0].endswith("HTTP 404")
    assert urlparse(site).hostname == "127.0.0.1"
