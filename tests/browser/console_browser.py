#!/usr/bin/python3
"""The console in a real browser: headless Chromium from Debian, driven by Selenium from
Debian's python3-selenium (docs/console.md). tests/cluster/console_test.sh starts three
nodes and calls this with what it made; this script signs in, checks what the pages show
(three nodes; one of them killed and seen to change state; an actor's keys), saves a
screenshot of each page, and prints one line per check and 'N passed, N failed'.

Environment: WK_URL (a node's client API, http://127.0.0.1:PORT), WK_OP_TOKEN, WK_TENANT_TOKEN,
WK_KILL_PID (the node to kill), WK_KILL_NODE (its id), WK_SHOTS (where screenshots go).
"""
import os
import signal
import sys
import time

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

URL = os.environ["WK_URL"]
OP = os.environ["WK_OP_TOKEN"]
TENANT = os.environ["WK_TENANT_TOKEN"]
KILL_PID = int(os.environ["WK_KILL_PID"])
KILL_NODE = os.environ["WK_KILL_NODE"]
SHOTS = os.environ["WK_SHOTS"]

passed = 0
failed = 0


def check(name, ok):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + name, flush=True)
    else:
        failed += 1
        print("FAIL " + name, flush=True)
    return ok


def wait_for(what, seconds):
    """Polls what() until it is truthy (exceptions count as not yet); returns its last value."""
    deadline = time.time() + seconds
    value = None
    while time.time() < deadline:
        try:
            value = what()
            if value:
                return value
        except WebDriverException:
            pass
        time.sleep(0.2)
    return value


def shot(driver, name):
    path = os.path.join(SHOTS, name + ".png")
    driver.save_screenshot(path)
    print("     screenshot " + path, flush=True)


def node_rows(driver):
    """{node id: (lease state text, row classes, cells)} of the nodes table."""
    rows = {}
    for tr in driver.find_elements(By.CSS_SELECTOR, "#nodes tbody tr"):
        cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        rows[tr.get_attribute("data-node")] = (cells[1] if len(cells) > 1 else "", tr.get_attribute("class") or "", cells)
    return rows


def main():
    os.makedirs(SHOTS, exist_ok=True)
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1440,1000", "--force-device-scale-factor=1", "--lang=en-US"):
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(20)
    try:
        run(driver)
    finally:
        driver.quit()
    print("%d passed, %d failed" % (passed, failed), flush=True)
    return 0 if failed == 0 else 1


def sign_in(driver, token):
    driver.get(URL + "/console/")
    box = wait_for(lambda: driver.find_element(By.ID, "token"), 10)
    box.clear()
    box.send_keys(token)
    driver.find_element(By.ID, "signin").click()


def run(driver):
    # Sign-in page, a bad token, then the operator's.
    driver.get(URL + "/console/")
    check("the console's page loads from the node", wait_for(lambda: driver.find_element(By.ID, "token").is_displayed(), 10))
    shot(driver, "signin")
    sign_in(driver, "wko.0123456789abcdef." + "0" * 64)
    check("a made-up token is refused with a message",
          wait_for(lambda: "not recognised" in driver.find_element(By.ID, "signin-error").text, 10))
    sign_in(driver, OP)
    check("signed in as the operator", wait_for(lambda: "operator" in driver.find_element(By.ID, "who").text, 10))

    # Three nodes, live, each answering with its state.
    def three_live():
        rows = node_rows(driver)
        return len(rows) == 3 and all(r[0].startswith("live") and "down" not in r[1] for r in rows.values()) and rows
    rows = wait_for(three_live, 20)
    check("the cluster page shows three live nodes", bool(rows))
    # A few refreshes, so the charts have a line.
    time.sleep(6)
    shot(driver, "cluster")

    # Kill one: its row changes (not answering at once, fenced once the fence watch runs).
    os.kill(KILL_PID, signal.SIGKILL)
    def changed():
        r = node_rows(driver).get(KILL_NODE)
        return r and "down" in r[1] and r
    r = wait_for(changed, 20)
    check("the killed node's row is marked down (%s)" % (r[0].replace("\n", " ") if r else "unchanged"), bool(r))
    fenced = wait_for(lambda: node_rows(driver).get(KILL_NODE, ("",))[0].startswith("fenced"), 30)
    check("the killed node is shown fenced", bool(fenced))
    others = node_rows(driver)
    check("the two others stay live", sum(1 for k, v in others.items() if k != KILL_NODE and v[0].startswith("live")) == 2)
    shot(driver, "cluster-node-fenced")

    # Traffic and bucket pages.
    driver.get(URL + "/console/#traffic")
    check("the traffic page lists acme/kv",
          wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, '#classes-traffic tr[data-class="acme/kv"]'), 15))
    time.sleep(4.5)
    shot(driver, "traffic")
    driver.get(URL + "/console/#bucket")
    check("the bucket page shows request series",
          wait_for(lambda: len(driver.find_elements(By.CSS_SELECTOR, "#bucket-series tbody tr")) > 0, 15))
    time.sleep(4.5)
    shot(driver, "bucket")

    # The actor browser: list acme/kv, open room-1, see its keys.
    driver.get(URL + "/console/#actors")
    row = wait_for(lambda: driver.find_element(By.CSS_SELECTOR, '#actors tr[data-actor="room-1"]'), 15)
    check("the actor browser lists room-1", bool(row))
    if row:
        row.click()
        keys = wait_for(lambda: [tr.get_attribute("data-key") for tr in driver.find_elements(By.CSS_SELECTOR, "#entries tbody tr")
                                 if tr.get_attribute("data-key")], 15)
        check("the inspector shows room-1's keys (%s)" % keys, keys and "theme" in keys and "lang" in keys)
        facts = driver.find_element(By.ID, "inspect-facts").text
        check("the inspector says where it read from (%s)" % facts, "read from" in facts)
        Select(driver.find_element(By.ID, "format")).select_by_value("hex")
        check("hex shows the values as hex",
              wait_for(lambda: "6461726b" in driver.find_element(By.ID, "entries").text, 10))
        Select(driver.find_element(By.ID, "format")).select_by_value("auto")
        wait_for(lambda: "dark" in driver.find_element(By.ID, "entries").text, 10)
        shot(driver, "actors")

    driver.get(URL + "/console/#alarms")
    check("the alarms page says honestly that alarms are not available",
          wait_for(lambda: "Not available" in driver.find_element(By.ID, "alarms-na").text, 10))

    # A tenant sees its actors only: no cluster tabs.
    driver.find_element(By.CSS_SELECTOR, "#who button").click()
    sign_in(driver, TENANT)
    check("a tenant signs in", wait_for(lambda: "tenant acme" in driver.find_element(By.ID, "who").text, 10))
    visible = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "nav a") if a.is_displayed()]
    check("a tenant sees Actors and Alarms only (%s)" % visible, visible == ["Actors", "Alarms"])
    check("a tenant's actor browser lists its actors",
          wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, '#actors tr[data-actor="room-1"]'), 15))


if __name__ == "__main__":
    sys.exit(main())
