"""The dashboard in a real browser: Debian's chromium, headless, driven by
Selenium through Debian's chromium-driver (scripts/deps.sh installs
them; without them this file is skipped, saying why). weir runs on
loopback; a thread sends decisions, one abusive key far over its limit,
while the page is watched: it loads with no console error, takes the
token, and its numbers move; the charts say in words what they draw;
text meets WCAG AA contrast in both colour schemes; every control is
reached with the keyboard. Screenshots go to $WEIR_SCREENSHOTS when it
is set, else to the test's temporary directory; the test prints where.
"""
import os
import re
import shutil
import signal
import threading
import time

import pytest

import rawhttp
from test_admin import TOKEN, Admin, token_file

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - the skip below says so
    webdriver = None

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

if webdriver is None:
    pytest.skip("python3-selenium is not installed (scripts/deps.sh installs it)",
                allow_module_level=True)
if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
    pytest.skip("chromium and chromium-driver are not installed (scripts/deps.sh installs them)",
                allow_module_level=True)

TEST_SECONDS = 150  # the whole of one test, browser included
LIMIT = 20

RULES = f"""\
domain: api
descriptors:
  - key: user
    rate_limit: {{unit: minute, requests_per_unit: {LIMIT}}}
  - key: backend
    value: reports
    rate_limit:
      unit: minute
      requests_per_unit: 40
      algorithm: concurrency
      name: reports
      adaptive: {{controller: aimd, initial: 10, window: 1us, window_samples: 4, backoff: 0.5}}
"""

ABUSER = "mallory"


@pytest.fixture
def deadline():
    def expired(signum, frame):
        raise TimeoutError(f"the browser test ran past {TEST_SECONDS} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(TEST_SECONDS)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture
def shots(tmp_path, capsys):
    path = os.environ.get("WEIR_SCREENSHOTS") or str(tmp_path / "screenshots")
    os.makedirs(path, exist_ok=True)
    path = os.path.abspath(path)
    with capsys.disabled():
        print(f"\ndashboard screenshots: {path}")
    return path


@pytest.fixture
def browser(deadline):
    o = Options()
    o.binary_location = CHROMIUM
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,1000", "--no-first-run", "--no-default-browser-check",
              "--disable-extensions", "--disable-background-networking", "--disable-sync",
              "--disable-component-update", "--disable-features=Translate,MediaRouter",
              "--lang=en-US", "--force-color-profile=srgb", "--hide-scrollbars"]:
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=o)
    d.set_page_load_timeout(30)
    d.set_script_timeout(10)
    try:
        yield d
    finally:
        d.quit()


@pytest.fixture
def weir(weir_factory, tmp_path):
    return weir_factory(RULES, "--admin", "127.0.0.1:0", "--admin-token-file",
                        token_file(tmp_path))


class Load:
    """A thread deciding for many keys, each once, and one abusive key
    every time, at about @rate requests a second, for at most @seconds."""

    def __init__(self, port, rate=60, seconds=60):
        self.port, self.rate, self.seconds = port, rate, seconds
        self.stop = threading.Event()
        self.sent = 0
        self.denied = 0
        self.error = None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        try:
            end = time.monotonic() + self.seconds
            with rawhttp.Conn(self.port) as c:
                i = 0
                while not self.stop.is_set() and time.monotonic() < end:
                    for user in (f"user{i}", ABUSER):
                        r = c.request("GET", f"/v1/check?domain=api&user={user}")
                        assert r.status in (200, 429), r
                        self.sent += 1
                        self.denied += r.status == 429
                    i += 1
                    time.sleep(2 / self.rate)
        except Exception as e:  # reported by the test
            self.error = e

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)
        assert self.error is None, self.error


def text(d, id_):
    return d.find_element(By.ID, id_).text


def number(s):
    s = s.replace(",", "")
    return float(s) if re.fullmatch(r"[0-9.]+", s) else None


def wait(d, what, cond, timeout=20, detail=None):
    try:
        # the panels are drawn anew every second: an element found may be
        # gone by the next call, and the next poll finds the new one
        return WebDriverWait(d, timeout, poll_frequency=0.2,
                             ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda _: cond())
    except TimeoutException:
        raise AssertionError(f"{what} within {timeout} s" +
                             (f"; the page shows: {detail()!r}" if detail else "")) from None


def console_errors(d):
    return [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


CONTRAST_JS = """
function rgb(c) { const m = c.match(/[0-9.]+/g).map(Number); return m.length > 3 ? m : m.concat([1]); }
function lum(c) {
  const v = c.slice(0, 3).map(x => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
  return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
}
function background(e) {
  for (; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c[3] > 0) return c; }
  return [255, 255, 255, 1];
}
const out = [];
for (const e of document.querySelectorAll(arguments[0])) {
  if (!e.offsetParent || !e.textContent.trim()) continue;
  const fg = rgb(getComputedStyle(e).color), bg = background(e);
  const a = lum(fg), b = lum(bg);
  out.push([e.id || e.className || e.tagName, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)]);
}
return out;
"""

TEXT = ("h1, h2, dt, dd, p, td, th, th button, label, .badge, .big, .muted, caption, "
        "figcaption, button, select, .legend")


def check_contrast(d, scheme):
    ratios = d.execute_script(CONTRAST_JS, TEXT)
    assert len(ratios) > 30, ratios
    low = [(who, round(r, 2)) for who, r in ratios if r < 4.5]
    assert not low, f"{scheme}: text below WCAG AA 4.5:1: {low}"


def adaptive_panel(d):
    """The adaptive panel read in one go (it is drawn anew every second,
    so elements found one call apart may be gone): its one row's cells,
    its chart's path and its caption."""
    got = d.execute_script("""
        const rows = [...document.querySelectorAll('#adaptive-table tbody tr')];
        const path = document.querySelector('#adaptive-body svg path.line');
        const cap = document.querySelector('#adaptive-body figcaption');
        return {rows: rows.map((r) => [...r.querySelectorAll('td, th')].map((c) => c.textContent)),
                path: path ? path.getAttribute('d') : null, caption: cap ? cap.textContent : null};
    """)
    assert len(got["rows"]) == 1, got
    return got["rows"][0], got["path"], got["caption"]


def test_dashboard_live_under_load(weir, browser, shots):
    d = browser
    url = f"http://127.0.0.1:{weir.admin_port}/dashboard"
    d.get(url)
    assert d.title == "weir dashboard"
    token = d.find_element(By.ID, "token")
    assert token.get_attribute("type") == "password"
    assert d.find_element(By.CSS_SELECTOR, "label[for=token]").text.startswith("Admin token")
    assert not d.find_element(By.ID, "panels").is_displayed()
    d.save_screenshot(os.path.join(shots, "dashboard-token.png"))

    token.send_keys(TOKEN, Keys.ENTER)
    wait(d, "the panels shown", lambda: d.find_element(By.ID, "panels").is_displayed())
    # the token stays in the tab's session storage, never in the URL
    assert d.execute_script("return sessionStorage.getItem('weir.adminToken')") == TOKEN
    assert TOKEN not in d.current_url and d.current_url == url
    wait(d, "live", lambda: text(d, "conn-status") == "Live.")
    assert text(d, "service-status") == "ok"
    assert number(text(d, "allowed-total")) == 0

    # an adaptive limit: four leases given back as dropped halve it, and
    # its panel shows the new limit and the step
    assert adaptive_panel(d)[0][:5] == ["api", "reports", "aimd", "10", "3–40"]
    for _ in range(4):
        lease = weir.check("api", {"backend": "reports"}, path="/v1/acquire").json()["lease"]
        assert weir.post("/v1/release?dropped=true", {"lease": lease}).status == 200
    cells, path, caption = wait(d, "the adaptive limit halved",
                                lambda: (p := adaptive_panel(d))[0][3] == "5" and p)
    assert cells[7:] == ["4", "4"]
    assert path and path.startswith("M"), path
    assert caption == "api reports: limit 5 of 40; 1 change kept.", caption

    with Load(weir.port) as load:
        wait(d, "allowed and denied counted",
             lambda: (number(text(d, "allowed-total")) or 0) > 20
             and (number(text(d, "denied-total")) or 0) > 5)
        wait(d, "allowed/s and denied/s above 0",
             lambda: (number(text(d, "allowed-rate")) or 0) > 0
             and (number(text(d, "denied-rate")) or 0) > 0)
        # the per-rule table: the rule, its rates
        def rule_row():
            for tr in d.find_elements(By.CSS_SELECTOR, "#rules-table tbody tr"):
                cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                if cells[:2] == ["api", "user"]:
                    return cells
            return None
        cells = wait(d, "the rule's row with rates", lambda: (r := rule_row()) and
                     number(r[3]) and number(r[3]) > 0 and r)
        assert number(cells[2]) > 0, cells
        # latency: a figure, not a dash
        wait(d, "p50 and p99", lambda: re.search(r"[0-9]", text(d, "p50"))
             and re.search(r"[0-9]", text(d, "p99")))
        # the charts tell what they draw in words
        cap = text(d, "cap-decisions")
        assert re.search(r"allowed now [0-9.,]+/s", cap) and "denied now" in cap, cap
        chart = d.find_element(By.ID, "chart-decisions")
        assert chart.get_attribute("role") == "img"
        assert chart.get_attribute("aria-labelledby") == "cap-decisions"
        assert d.find_elements(By.CSS_SELECTOR, "#chart-decisions path.line.allowed")
        assert d.find_elements(By.CSS_SELECTOR, "#chart-decisions path.line.denied")
        # store, reloads, quotas: what weir says, "not configured" for what it lacks
        assert "memory" in text(d, "store-body")
        assert text(d, "reloads-ok") == "1" and text(d, "reloads-failed") == "0"
        assert "not configured" in text(d, "quotas-body").lower()
        assert "no tenant decided yet" in text(d, "quotas-body")
        # top limited keys: the abusive key first where the build has the
        # route, and said to be absent where it has not
        stats = Admin(weir).get("/admin/v1/stats").json()
        if "/admin/v1/top" in stats["routes"]:
            wait(d, "the abusive key first among the top keys", lambda: (rows := d.find_elements(
                By.CSS_SELECTOR, "#top-body tbody tr")) and ABUSER in rows[0].text, timeout=30,
                 detail=lambda: text(d, "top-body"))
        else:
            assert "not available in this build" in text(d, "top-body").lower()
        time.sleep(4)  # a few more points on the charts
        d.save_screenshot(os.path.join(shots, "dashboard-desktop.png"))

        # paused: no request, nothing moves
        d.find_element(By.ID, "pause").click()
        assert d.find_element(By.ID, "pause").get_attribute("aria-pressed") == "true"
        time.sleep(0.5)
        frozen = text(d, "allowed-total")
        time.sleep(2.5)
        assert text(d, "allowed-total") == frozen
        d.find_element(By.ID, "pause").click()
        wait(d, "moving again", lambda: text(d, "allowed-total") != frozen)

        # the keyboard reaches every control
        d.find_element(By.TAG_NAME, "body").click()
        reached = set()
        for _ in range(40):
            d.switch_to.active_element.send_keys(Keys.TAB)
            e = d.switch_to.active_element
            reached.add(e.get_attribute("id") or e.text)
        # (the domain choice of the top keys is disabled where there are none)
        wants = ["pause", "forget", "Domain", "Denied/s", "Allowed/s"]
        if "/admin/v1/top" in stats["routes"]:
            wants.append("top-domain")
        for want in wants:
            assert want in reached, (want, reached)
        # sorting from the keyboard
        th = d.find_element(By.CSS_SELECTOR, "#rules-table th[data-sort=allowedRate]")
        th.find_element(By.TAG_NAME, "button").send_keys(Keys.ENTER)
        assert th.get_attribute("aria-sort") == "descending"

        check_contrast(d, "light")
        d.execute_cdp_cmd("Emulation.setEmulatedMedia", {
            "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        time.sleep(1.2)
        check_contrast(d, "dark")
        d.save_screenshot(os.path.join(shots, "dashboard-dark.png"))
        d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})

        # a phone: one column, nothing wider than the screen
        d.set_window_size(375, 812)
        time.sleep(1.5)
        width = d.execute_script("return document.documentElement.clientWidth")
        assert width <= 375
        overflow = d.execute_script(
            "return [...document.querySelectorAll('section.panel')]"
            ".filter(s => s.getBoundingClientRect().right > document.documentElement.clientWidth + 1)"
            ".map(s => s.id)")
        assert overflow == [], overflow
        tall = d.execute_script("return document.documentElement.scrollHeight")
        d.set_window_size(375, min(tall + 120, 4000))
        time.sleep(1.5)
        d.save_screenshot(os.path.join(shots, "dashboard-phone.png"))
    assert load.sent > 100 and load.denied > 50

    # forgetting the token: back to the form, nothing kept
    d.set_window_size(1280, 1000)
    d.find_element(By.ID, "forget").click()
    assert d.find_element(By.ID, "token").is_displayed()
    assert d.execute_script("return sessionStorage.getItem('weir.adminToken')") is None

    errors = console_errors(d)
    assert not errors, errors
    for name in ["dashboard-token.png", "dashboard-desktop.png", "dashboard-dark.png",
                 "dashboard-phone.png"]:
        assert os.path.getsize(os.path.join(shots, name)) > 5000, name


def test_a_wrong_token_is_refused_and_said(weir, browser):
    d = browser
    d.get(f"http://127.0.0.1:{weir.admin_port}/dashboard")
    d.find_element(By.ID, "token").send_keys("not-the-token-0123456789", Keys.ENTER)
    wait(d, "the refusal shown", lambda: "Refused (401)" in text(d, "login-error"))
    assert "not one of --admin-token-file's" in text(d, "login-error")
    assert d.find_element(By.ID, "token").is_displayed()
    assert d.execute_script("return sessionStorage.getItem('weir.adminToken')") is None
    # the one console error: the browser's own line for the 401 itself
    errors = console_errors(d)
    assert all("/admin/v1/stats" in e["message"] and "401" in e["message"] for e in errors), errors
