#!/usr/bin/python3
"""The chat example's page (examples/chat/web/index.html) in a real browser: headless
Chromium from Debian, driven by Selenium from Debian's python3-selenium, as
console_browser.py. tests/cluster/chat_browser_test.sh starts three nodes (the room
acme/chat/lobby held by the third), serves the page's folder, and calls this script, which
opens the page twice (one window on node a, one on node b: each relays to the owner), types
in each, checks both show every message once, in order, numbered, as text; kills the owner
with -9; checks both pages say they are reconnecting, come back, and show the whole history
(what they had, and what each types after) with no number missing or twice, as GET /messages
has it; saves screenshots; prints one line per check and 'N passed, N failed'.

Environment: WK_PAGE (the page's URL, without fragment), WK_NODE_A and WK_NODE_B (the nodes
the two pages talk to, http://127.0.0.1:PORT), WK_TOKEN (tenant acme's), WK_KILL_PID (the
owner's pid), WK_SHOTS (where screenshots go).
"""
import os
import signal
import sys
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, note  # noqa: E402
import checks  # noqa: E402
import chromium  # noqa: E402
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

PAGE = os.environ["WK_PAGE"]
NODE_A = os.environ["WK_NODE_A"]
NODE_B = os.environ["WK_NODE_B"]
TOKEN = os.environ["WK_TOKEN"]
KILL_PID = int(os.environ["WK_KILL_PID"])
SHOTS = os.environ["WK_SHOTS"]
ROOM = "lobby"

def wait_for(what, seconds, step=0.1):
    """checks.wait_for, a WebDriverException counting as "not yet"."""
    return checks.wait_for(what, seconds, step, WebDriverException)


def page_url(node):
    fragment = urllib.parse.urlencode({"node": node, "tenant": "acme", "room": ROOM, "token": TOKEN})
    return PAGE + "#" + fragment


# Records every text the status line shows, so a check can see "reconnecting" even if it
# lasted less than a poll.
WATCH_STATUS = """
  const s = document.getElementById('status');
  window.__statuses = [s.textContent];
  new MutationObserver(() => window.__statuses.push(s.textContent))
    .observe(s, {childList: true, characterData: true, subtree: true});
"""


class Page:
    def __init__(self, driver, handle, name, node):
        self.driver, self.handle, self.name, self.node = driver, handle, name, node

    def focus(self):
        self.driver.switch_to.window(self.handle)

    def js(self, script, *args):
        self.focus()
        return self.driver.execute_script(script, *args)

    def status(self):
        return self.js("return document.getElementById('status').textContent")

    def statuses(self):
        return self.js("return window.__statuses || []")

    def lines(self):
        """The log as [(number or None, text, class)], read in one call."""
        return [(int(n) if n else None, t, c) for n, t, c in self.js(
            """return [...document.querySelectorAll('#log li')].map((li) => {
                 const n = li.querySelector('.number');
                 const text = [...li.childNodes].filter((c) => c.nodeType === 3).map((c) => c.data).join('');
                 return [n ? n.textContent : '', text, li.className];
               });""")]

    def messages(self):
        return [(n, t) for n, t, c in self.lines() if c == "message"]

    def say(self, text):
        self.focus()
        box = self.driver.find_element(By.ID, "text")
        box.send_keys(text)
        box.send_keys(Keys.ENTER)

    def shot(self, name):
        self.focus()
        path = os.path.join(SHOTS, name + ".png")
        self.driver.save_screenshot(path)
        note("screenshot " + path)


def stored():
    """GET /messages through node a, every page: [(number, text)]."""
    out, since = [], 0
    while True:
        req = urllib.request.Request("%s/v1/actors/acme/chat/%s/messages?since=%d" % (NODE_A, ROOM, since),
                                     headers={"Authorization": "Bearer " + TOKEN})
        with urllib.request.urlopen(req, timeout=20) as r:
            body = r.read().decode()
        page = [line.split("\t", 1) for line in body.split("\n") if line]
        out += [(int(n), t) for n, t in page]
        if len(page) < 200:
            return out
        since = out[-1][0]


def main():
    os.makedirs(SHOTS, exist_ok=True)
    # Two windows side by side: neither is a background tab with throttled timers.
    driver = chromium.start("720,560", ("--disable-background-timer-throttling", "--disable-renderer-backgrounding",
                                        "--disable-backgrounding-occluded-windows"))
    try:
        run(driver)
    except Exception as e:  # a broken run is a failed check, with what broke
        import traceback
        traceback.print_exc()
        check("the browser run reached its end (%s: %s)" % (type(e).__name__, e), False)
    finally:
        driver.quit()
    return checks.summary()


def run(driver):
    driver.get(page_url(NODE_A))
    one = Page(driver, driver.current_window_handle, "page on node a", NODE_A)
    one.js(WATCH_STATUS)
    driver.switch_to.new_window("window")
    driver.set_window_size(720, 560)
    driver.get(page_url(NODE_B))
    two = Page(driver, driver.current_window_handle, "page on node b", NODE_B)
    two.js(WATCH_STATUS)
    pages = (one, two)
    for p in pages:
        check("the %s connects (%s)" % (p.name, p.status()), bool(wait_for(lambda: p.status() == "connected", 20)))
    check("the page names the room", one.js("return document.getElementById('title').textContent") == "acme/chat/lobby")
    check("the token is not in what the page sends to its web server (only the fragment holds it)",
          TOKEN not in one.js("return location.pathname + location.search"))

    said = []
    for i in range(3):
        for p, who in ((one, "one"), (two, "two")):
            text = "hello from page %s (%d)" % (who, i + 1)
            p.say(text)
            said.append(text)
            # Each shown once the room sends it back with its number.
            wait_for(lambda: text in [t for _, t in p.messages()], 10)
    hostile = "<b>not bold</b> <img src=x onerror=window.__pwned=1>"
    two.say(hostile)
    said.append(hostile)
    want = [(i + 1, t) for i, t in enumerate(said)]
    for p in pages:
        got = wait_for(lambda: p.messages() if len(p.messages()) >= len(want) else None, 15)
        check("the %s shows all %d messages, numbered 1..%d in the order sent (%s)"
              % (p.name, len(want), len(want), [n for n, _ in got or []]), got == want)
    check("a message that looks like HTML is shown as its text, nothing of it an element or run",
          all(p.js("return document.querySelectorAll('#log b, #log img').length") == 0
              and p.js("return window.__pwned === undefined") for p in pages))
    check("the pages match GET /messages", stored() == want)
    one.shot("chat-page-a")
    two.shot("chat-page-b")

    # The owner killed with -9: both pages lose their connection (the relaying nodes close
    # them with 1012) and reconnect through their own nodes once a survivor holds the room.
    os.kill(KILL_PID, signal.SIGKILL)
    t_kill = time.time()
    for p in pages:
        seen = wait_for(lambda: [s for s in p.statuses() if s.startswith("reconnecting")], 10, 0.05)
        check("the %s shows it is reconnecting (%s)" % (p.name, (seen or ["nothing"])[0]), bool(seen))
    one.shot("chat-reconnecting")
    back = {}
    for p in pages:
        ok = wait_for(lambda: p.status() == "connected", 45, 0.1)
        back[p.name] = time.time() - t_kill
        check("the %s is connected again (%.1f s after the kill; it showed %s)"
              % (p.name, back[p.name], sorted(set(s for s in p.statuses() if s.startswith("reconnecting")))), bool(ok))
    print("MEASURE page_reconnect_after_kill_s %.1f" % max(back.values()), flush=True)
    for p in pages:
        check("the %s kept its history: the same %d messages, none twice (%s)"
              % (p.name, len(want), [n for n, _ in p.messages()]), p.messages() == want)
    for p, who in ((one, "one"), (two, "two")):
        text = "page %s after the kill" % who
        p.say(text)
        said.append(text)
        wait_for(lambda: text in [t for _, t in p.messages()], 15)
    want = [(i + 1, t) for i, t in enumerate(said)]
    for p in pages:
        got = wait_for(lambda: p.messages() if len(p.messages()) >= len(want) else None, 15)
        check("after the failover the %s shows both pages' new messages as %d and %d, the history intact"
              % (p.name, len(want) - 1, len(want)), got == want)
    check("the pages match GET /messages after the failover", stored() == want)
    check("no page shows an error line",
          not [l for p in pages for l in p.lines() if l[2] == "error"])
    one.shot("chat-after-failover-a")
    two.shot("chat-after-failover-b")


if __name__ == "__main__":
    sys.exit(main())
