"""The simulator page (/sim) in a real browser: Debian's chromium, headless,
driven by chromedriver through python3-selenium. Pressing the buttons
gives the documented counts (docs/SIMULATOR.md): Boundary burst with a
limit of 10 per second has the fixed window admit 20 and the sliding log
10; a burst of 20 at a token bucket of 10 admits 10. The page is
reachable by keyboard, fits a phone's width, and logs no console error.
Screenshots go to $WEIR_SCREENSHOTS, or a temporary directory the test
prints."""
import os
import shutil

import pytest

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - reported as a skip below
    webdriver = None

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

RULES = """\
domain: api
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 5}
"""

pytestmark = pytest.mark.skipif(
    webdriver is None or not os.path.exists(CHROMIUM) or not os.path.exists(CHROMEDRIVER),
    reason="the browser test needs Debian's chromium, chromium-driver and python3-selenium "
           "(scripts/deps.sh installs them)")


@pytest.fixture(scope="module")
def weir(weir_module_factory):
    return weir_module_factory(RULES, "--admin", "127.0.0.1:0")


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    d = os.environ.get("WEIR_SCREENSHOTS") or str(tmp_path_factory.mktemp("screenshots"))
    os.makedirs(d, exist_ok=True)
    return d


@pytest.fixture(scope="module")
def browser(shots):
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,1600", "--force-device-scale-factor=1"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    d.set_window_size(1280, 1600)
    yield d
    d.quit()


def wait(d, cond, what, timeout=10):
    return WebDriverWait(d, timeout, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda _: cond(), message=what)


def text(d, css):
    """The text of @css, read in one step (the page redraws as time passes)."""
    return d.execute_script("const e = document.querySelector(arguments[0]);"
                            "return e ? e.textContent : null;", css)


def counts(d, algo):
    return d.execute_script(
        "const r = {};"
        "for (const k of ['accepted', 'denied', 'passrate', 'peak']) {"
        "  const e = document.querySelector('#algo-' + arguments[0] + ' [data-field=' + k + ']');"
        "  r[k] = e ? e.textContent : null; }"
        "return r;", algo)


def open_page(d, weir):
    d.get(f"http://127.0.0.1:{weir.admin_port}/sim")
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, ".card"), "the first answer")


def set_value(d, id_, value):
    e = d.find_element(By.ID, id_)
    e.clear()
    e.send_keys(str(value))
    e.send_keys(Keys.TAB)  # a change event


def choose(d, *algos):
    d.find_element(By.ID, "none").click()
    for a in algos:
        d.find_element(By.CSS_SELECTOR, f"input[name=algo][value={a}]").click()
    wait(d, lambda: [c.get_attribute("id") for c in d.find_elements(By.CSS_SELECTOR, ".card")]
         == [f"algo-{a}" for a in algos], f"the cards of {algos}")


def arrivals(d):
    return int(text(d, "#count") or 0)


def console_errors(d):
    return [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


def settled(d, n, algos):
    """The page shows an answer for all n arrivals in every card."""
    def done():
        if arrivals(d) != n:
            return False
        return all(int(counts(d, a)["accepted"]) + int(counts(d, a)["denied"]) == n for a in algos)
    wait(d, done, f"an answer for {n} arrivals")


def test_boundary_burst_fixed_window_against_sliding_log(weir, browser, shots, capsys):
    d = browser
    open_page(d, weir)
    with capsys.disabled():
        print(f"\nscreenshots: {shots}")
    choose(d, "fixed_window", "sliding_window_log")
    set_value(d, "limit", 10)
    set_value(d, "window", 1000)
    set_value(d, "burstn", 10)
    d.find_element(By.ID, "reset").click()
    d.find_element(By.ID, "boundary").click()
    settled(d, 20, ["fixed_window", "sliding_window_log"])
    # the documented numbers: twice the limit across the edge, and the limit
    assert counts(d, "fixed_window") == {"accepted": "20", "denied": "0", "passrate": "100%",
                                         "peak": "20"}
    assert counts(d, "sliding_window_log") == {"accepted": "10", "denied": "10",
                                               "passrate": "50%", "peak": "10"}
    peak = "return document.querySelector(arguments[0]).getAttribute('data-peak')"
    assert d.execute_script(peak, "#algo-fixed_window [data-field=chart]") == "20"
    assert d.execute_script(peak, "#algo-sliding_window_log [data-field=chart]") == "10"
    # the recent log: the newest first, 20 lines; the sliding log denied the last 10
    verdicts = d.execute_script(
        "return Array.from(document.querySelectorAll("
        "'#algo-sliding_window_log [data-field=log] .verdict'), e => e.textContent)")
    assert verdicts == ["DENY"] * 10 + ["OK"] * 10
    # the state panels
    state = text(d, "#algo-sliding_window_log [data-field=state]")
    assert "in_window" in state
    assert "log: 10" in text(d, "#algo-sliding_window_log [data-field=table]")
    assert "count_now" in text(d, "#algo-fixed_window [data-field=state]")
    assert "accepted" in text(d, "#status")
    d.save_screenshot(os.path.join(shots, "sim-boundary-burst.png"))
    assert console_errors(d) == []


def test_token_bucket_burst(weir, browser, shots):
    d = browser
    open_page(d, weir)
    choose(d, "token_bucket")
    set_value(d, "limit", 10)
    set_value(d, "window", 1000)
    set_value(d, "burstn", 20)
    d.find_element(By.ID, "reset").click()
    assert d.find_element(By.ID, "sendburst").text == "Send burst (20)"
    d.find_element(By.ID, "sendburst").click()
    settled(d, 20, ["token_bucket"])
    assert counts(d, "token_bucket") == {"accepted": "10", "denied": "10", "passrate": "50%",
                                         "peak": "10"}
    assert "tokens_milli" in text(d, "#algo-token_bucket [data-field=state]")
    assert console_errors(d) == []


def test_keyboard_send_1_and_auto_load(weir, browser, shots):
    d = browser
    open_page(d, weir)
    choose(d, "token_bucket", "gcra", "leaky_bucket", "leaky_bucket_shaper", "fixed_window",
           "sliding_window_log", "sliding_window_counter", "concurrency")
    set_value(d, "limit", 10)
    set_value(d, "window", 1000)
    d.find_element(By.ID, "reset").click()
    # every control is reached with Tab
    body = d.find_element(By.TAG_NAME, "body")
    body.click()
    seen = set()
    for _ in range(40):
        d.switch_to.active_element.send_keys(Keys.TAB)
        seen.add(d.switch_to.active_element.get_attribute("id"))
    assert {"limit", "window", "burst", "send1", "burstn", "sendburst", "boundary", "rate", "auto",
            "reset", "all", "none"} <= seen
    # Send 1 by keyboard
    send1 = d.find_element(By.ID, "send1")
    send1.send_keys(Keys.ENTER)
    settled(d, 1, ["token_bucket", "sliding_window_log"])
    assert counts(d, "sliding_window_log")["accepted"] == "1"
    # auto-load at 40/s for about 1.5 s, all algorithms side by side
    set_value(d, "rate", 40)
    d.find_element(By.ID, "auto").click()
    assert d.find_element(By.ID, "auto").get_attribute("aria-pressed") == "true"
    wait(d, lambda: arrivals(d) >= 50, "50 arrivals", timeout=15)
    d.find_element(By.ID, "auto").click()
    assert d.find_element(By.ID, "auto").get_attribute("aria-pressed") == "false"
    n = arrivals(d)
    settled(d, n, ["token_bucket", "fixed_window", "sliding_window_log", "concurrency"])
    # at 40/s against 10/s the log admits at most 10 in any second
    assert int(counts(d, "sliding_window_log")["peak"]) <= 10
    assert int(counts(d, "sliding_window_log")["denied"]) > 0
    d.save_screenshot(os.path.join(shots, "sim-auto-load.png"))
    assert console_errors(d) == []


def test_phone_width(weir, browser, shots):
    d = browser
    d.set_window_size(390, 844)
    try:
        open_page(d, weir)
        choose(d, "fixed_window", "sliding_window_log")
        set_value(d, "burstn", 10)
        d.find_element(By.ID, "reset").click()
        d.find_element(By.ID, "boundary").click()
        settled(d, 20, ["fixed_window", "sliding_window_log"])
        overflow = d.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 1, f"{overflow} px wider than the screen"
        d.execute_script("document.getElementById('status').scrollIntoView()")
        d.save_screenshot(os.path.join(shots, "sim-phone.png"))
        assert console_errors(d) == []
    finally:
        d.set_window_size(1280, 1600)
