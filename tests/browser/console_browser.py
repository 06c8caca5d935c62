#!/usr/bin/python3
"""The console in a real browser: headless Chromium from Debian, driven by Selenium from
Debian's python3-selenium (docs/console.md). tests/cluster/console_test.sh starts three
nodes and calls this with what it made; this script signs in, checks what the pages show
(three nodes; one of them killed and seen to change state; an actor's keys; tenant data
that looks like HTML shown as text; a deletion; an actor's history as a timeline, a past
state opened read-only, a restore to it and its undo, a fork; an actor's messages, a dead
one sent again and delivered, another dropped; a tenant seeing its own tenant only),
saves a screenshot of each page, and prints one line per check and 'N passed, N failed'.

The pages re-render their tables every 2 s, so what a check reads is taken in one
execute_script call (one turn of the page's event loop), never element by element.

Environment: WK_URL (a node's client API, http://127.0.0.1:PORT), WK_OP_TOKEN,
WK_TENANT_TOKEN (tenant acme's), WK_KILL_PID (the node to kill), WK_KILL_NODE (its id),
WK_SHOTS (where screenshots go), WK_HOSTILE_KEY (a key of acme/kv/xss that is HTML). The
actor acme/kv/notes has three writes, each its own batch, more than a second apart: color
red, color green, size large.
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check  # noqa: E402
import checks  # noqa: E402
import chromium  # noqa: E402
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

URL = os.environ["WK_URL"]
OP = os.environ["WK_OP_TOKEN"]
TENANT = os.environ["WK_TENANT_TOKEN"]
KILL_PID = int(os.environ["WK_KILL_PID"])
KILL_NODE = os.environ["WK_KILL_NODE"]
SHOTS = os.environ["WK_SHOTS"]
HOSTILE_KEY = os.environ["WK_HOSTILE_KEY"]

def wait_for(what, seconds):
    """checks.wait_for, a WebDriverException counting as "not yet"."""
    return checks.wait_for(what, seconds, 0.2, WebDriverException)


def shot(driver, name, whole=False):
    """Saves the window as SHOTS/name.png; whole: the window made as tall as the page for
    this one (at most 1,600 pixels: the inspector's history and messages sit below its keys)."""
    path = os.path.join(SHOTS, name + ".png")
    if whole:
        size = driver.get_window_size()
        page, inner = driver.execute_script("return [document.documentElement.scrollHeight, window.innerHeight]")
        driver.set_window_size(size["width"], min(1600, max(size["height"], page + size["height"] - inner)))
        time.sleep(0.3)
        driver.save_screenshot(path)
        driver.set_window_size(size["width"], size["height"])
    else:
        driver.save_screenshot(path)
    print("     screenshot " + path, flush=True)


def rows(driver, table, key):
    """The rows of a table's body, read at once: [{key, cls, cells: [text]}]."""
    return driver.execute_script(
        """return [...document.querySelectorAll(arguments[0] + ' tbody tr')].map((tr) => (
             {key: tr.getAttribute(arguments[1]), cls: tr.className, cells: [...tr.cells].map((td) => td.innerText)}));""",
        table, key)


def nodes(driver):
    """{node id: {lease: text, down: bool, cells}} of the cluster page's table."""
    return {r["key"]: {"lease": r["cells"][1] if len(r["cells"]) > 1 else "", "down": "down" in r["cls"].split(),
                       "cells": r["cells"]}
            for r in rows(driver, "#nodes", "data-node") if r["key"]}


def text(driver, selector):
    return driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.innerText : '';", selector)


def number(s):
    """A number as the page shows it ("1,234", "0.50"); 0 for "–"."""
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0


def tokens_in_url(driver):
    url = driver.current_url
    return OP in url or TENANT in url or OP.split(".")[-1] in url or TENANT.split(".")[-1] in url


def main():
    os.makedirs(SHOTS, exist_ok=True)
    driver = chromium.start("1440,1000")
    try:
        run(driver)
    finally:
        driver.quit()
    return checks.summary()


def sign_in(driver, token):
    box = wait_for(lambda: driver.find_element(By.ID, "token"), 10)
    box.clear()
    box.send_keys(token)
    driver.find_element(By.ID, "signin").click()


def go(driver, tab):
    """Opens a tab the way a person does: a click on its link (the page keeps its samples)."""
    driver.find_element(By.CSS_SELECTOR, 'nav a[data-tab="%s"]' % tab).click()


def pick_actor(driver, name):
    """Clicks the actor's row of the listing, found and clicked in one step (the listing may
    be re-rendered at any moment)."""
    return wait_for(lambda: driver.execute_script(
        """const tr = [...document.querySelectorAll('#actors tbody tr')].find((r) => r.dataset.actor === arguments[0]);
           if (tr) tr.click();
           return !!tr;""", name), 15)


def entries(driver):
    return [r for r in rows(driver, "#entries", "data-key") if r["key"] is not None]


def messages(driver):
    """The inspector's messages: [{kind, seq, who, error}] (outbox, dead, applied rows)."""
    return [{"kind": r["key"], "seq": r["cells"][1], "who": r["cells"][2], "error": r["cells"][5]}
            for r in rows(driver, "#messages", "data-kind") if r["key"]]


def timeline(driver):
    """The History panel's batches, newest first: [{batch, time_ms, cls, when, gen, changes}]."""
    return driver.execute_script(
        """return [...document.querySelectorAll('#timeline tbody tr.batch')].map((tr) => ({
             batch: tr.dataset.batch, time_ms: Number(tr.dataset.time), cls: tr.className,
             when: tr.cells[1].innerText, gen: tr.cells[3].innerText, changes: tr.cells[4].innerText}));""")


def entry_values(driver):
    """The keys table as {key: value}."""
    return {e["key"]: e["cells"][1] for e in entries(driver)}


def click_later(driver, selector):
    """Clicks an element after the script returns (for a button that opens a dialog: see
    click_dead); True if it was there."""
    return wait_for(lambda: driver.execute_script(
        """const b = document.querySelector(arguments[0]);
           if (b && !b.disabled && b.offsetParent !== null) setTimeout(() => b.click(), 0);
           return !!b && !b.disabled && b.offsetParent !== null;""", selector), 10)


def past_shown(driver):
    return driver.execute_script("return !document.querySelector('#past-banner').hidden")


def click_dead(driver, seq, button):
    """Clicks a dead message's Retry or Drop button, found and clicked in one step. The click
    comes after the script returns: Drop opens a confirmation, and a dialog opened inside a
    script makes the driver fail the call (and dismiss the dialog when asked again)."""
    return wait_for(lambda: driver.execute_script(
        """const b = document.querySelector('#messages tr[data-kind="dead"][data-seq="' + arguments[0] + '"] button.' + arguments[1]);
           if (b) setTimeout(() => b.click(), 0);
           return !!b;""", str(seq), button), 10)


def history(driver):
    """The inspector's History panel (docs/console.md) on acme/kv/notes: its three writes as a
    timeline, newest first; the state at a chosen time and at a clicked batch, read-only and
    labelled past; back to the current state; a restore to the first write (confirmed), which
    changes the current state and names its undo; the undo; a fork into a new actor."""
    pick_actor(driver, "notes")
    tl = wait_for(lambda: len(timeline(driver)) == 3 and timeline(driver), 20)
    check("the History panel shows notes' three writes (%s)" % ([(b["batch"], b["changes"]) for b in tl] if tl else None),
          bool(tl))
    if not tl:
        return
    newest, middle, first = tl
    check("newest first, each with its time, batch, generation and keys changed",
          newest["time_ms"] > middle["time_ms"] > first["time_ms"]
          and newest["changes"].startswith("1 put") and "size" in newest["changes"]
          and "color" in middle["changes"] and "color" in first["changes"]
          and all(b["gen"] == first["gen"] for b in tl) and all(":" in b["when"] for b in tl))
    facts = text(driver, "#history-facts")
    check("the panel names the restorable window (%s)" % facts, "restorable from" in facts and "retention 7 days" in facts)
    check("the current state is marked 'now' and shows the newest values",
          "selected" in (driver.execute_script("return document.querySelector('#timeline tr[data-batch=now]').className") or "")
          and entry_values(driver).get("color") == "green" and entry_values(driver).get("size") == "large")
    shot(driver, "actors-history", whole=True)

    # A time chosen between the second write and the third: the state of the second.
    driver.execute_script(
        """const d = new Date(arguments[0]), p = (n) => String(n).padStart(2, '0');
           document.querySelector('#history-at').value = d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) +
             'T' + p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());
           document.querySelector('#history-at-show').click();""", (middle["time_ms"] // 1000 + 1) * 1000)
    got = wait_for(lambda: past_shown(driver) and entry_values(driver) == {"color": "green"} and entry_values(driver), 20)
    banner = text(driver, "#past-banner")
    check("a chosen time shows the state then, read-only: green, no size yet (%s)" % got, bool(got))
    check("labelled as a past state, as of the second write's batch (%s)" % banner.replace("\n", " "),
          "past state" in banner and "read-only" in banner and middle["batch"] in banner)
    check("its batch is marked in the timeline",
          bool(wait_for(lambda: "selected" in next((b["cls"] for b in timeline(driver) if b["batch"] == middle["batch"]), ""), 5)))
    check("a past state cannot be deleted from (no Delete button)",
          not driver.execute_script("return document.querySelector('#delete-actor').offsetParent !== null"))
    driver.find_element(By.ID, "past-back").click()
    check("Back shows the current state again",
          bool(wait_for(lambda: not past_shown(driver) and entry_values(driver) == {"color": "green", "size": "large"}, 15)))

    # The first write, clicked: the older value.
    driver.execute_script("document.querySelector('#timeline tr[data-batch=\"' + arguments[0] + '\"]').click()", first["batch"])
    got = wait_for(lambda: past_shown(driver) and entry_values(driver) == {"color": "red"} and entry_values(driver), 20)
    check("clicking the first write shows its state: color red (%s)" % got, bool(got))
    shot(driver, "actors-history-past", whole=True)

    # Restore it: asked first, then the current state is the first write's.
    click_later(driver, "#past-restore")
    alert = wait_for(lambda: driver.switch_to.alert, 5)
    check("restoring asks first, naming the actor and the batch",
          bool(alert) and "notes" in alert.text and first["batch"] in alert.text)
    if alert:
        alert.accept()
    note = wait_for(lambda: "Restored to batch " + first["batch"] in text(driver, "#point-note") and text(driver, "#point-note"), 40)
    check("the restore's answer is shown, with an Undo (%s)" % (note or "").replace("\n", " "),
          bool(note) and driver.execute_script("return !!document.querySelector('#point-note button.undo')"))
    check("the current state is the first write's now: color red, no size",
          bool(wait_for(lambda: not past_shown(driver) and entry_values(driver) == {"color": "red"}, 20)))
    tl2 = wait_for(lambda: len(timeline(driver)) == 4 and timeline(driver), 20)
    check("the restore is a new batch of a new hold in the timeline (%s)" % ([(b["batch"], b["changes"]) for b in tl2] if tl2 else None),
          bool(tl2) and tl2[0]["gen"] != first["gen"] and "all keys cleared" in tl2[0]["changes"]
          and driver.execute_script("return document.querySelectorAll('#timeline tr.hold').length") == 1)
    shot(driver, "actors-history-restored", whole=True)

    # Undo: one click restores the batch the answer named (the third write).
    click_later(driver, "#point-note button.undo")
    note = wait_for(lambda: "Restored to batch " + newest["batch"] in text(driver, "#point-note") and text(driver, "#point-note"), 40)
    check("Undo restores the state before (%s)" % (note or "").replace("\n", " "), bool(note))
    check("and the current state is back: green, large",
          bool(wait_for(lambda: entry_values(driver) == {"color": "green", "size": "large"}, 20)))

    # Fork the first write into a new actor.
    driver.execute_script("document.querySelector('#timeline tr[data-batch=\"' + arguments[0] + '\"]').click()", first["batch"])
    wait_for(lambda: past_shown(driver) and entry_values(driver) == {"color": "red"}, 20)
    click_later(driver, "#past-fork")
    prompt = wait_for(lambda: driver.switch_to.alert, 5)
    check("forking asks for the new actor's name", bool(prompt) and "notes" in prompt.text)
    if prompt:
        prompt.send_keys("notes-red")
        prompt.accept()
    note = wait_for(lambda: "Forked into acme/kv/notes-red" in text(driver, "#point-note") and text(driver, "#point-note"), 40)
    check("the fork's answer is shown (%s)" % (note or "").replace("\n", " "), bool(note))
    driver.execute_script("document.querySelector('#point-note button.open-fork').click()")
    check("the fork holds the first write's state: color red",
          bool(wait_for(lambda: text(driver, "#inspect-name") == "acme/kv/notes-red" and not past_shown(driver)
                        and entry_values(driver) == {"color": "red"}, 20)))
    check("the fork's history is its one batch",
          bool(wait_for(lambda: len(timeline(driver)) == 1 and "all keys cleared" in timeline(driver)[0]["changes"], 20)))


def run(driver):
    # Sign-in page, a made-up token, then the operator's.
    driver.get(URL + "/console/")
    check("the console's page loads from the node", wait_for(lambda: driver.find_element(By.ID, "token").is_displayed(), 10))
    check("before signing in no page but the sign-in shows (no tabs)",
          not driver.find_element(By.ID, "tabs").is_displayed()
          and not any(p.is_displayed() for p in driver.find_elements(By.CSS_SELECTOR, ".page:not(#signin-page)")))
    shot(driver, "signin")
    sign_in(driver, "wko.0123456789abcdef." + "0" * 64)
    check("a made-up token is refused with a message",
          wait_for(lambda: "not recognised" in text(driver, "#signin-error"), 10))
    sign_in(driver, OP)
    check("signed in as the operator", wait_for(lambda: "operator" in text(driver, "#who"), 10))

    # Three nodes, live, each answering with its state.
    def three_live():
        n = nodes(driver)
        return len(n) == 3 and all(v["lease"].startswith("live") and not v["down"] for v in n.values()) and n
    n = wait_for(three_live, 20)
    check("the cluster page shows three live nodes, each ready with its address and version",
          bool(n) and all(v["cells"][5] == "yes" and v["cells"][3].startswith("127.0.0.1:") and v["cells"][4] != "–"
                          for v in n.values()))
    # Three refreshes, so the charts have lines.
    wait_for(lambda: driver.execute_script("return document.querySelectorAll('#chart-requests polyline').length") > 0, 10)
    time.sleep(2)
    shot(driver, "cluster")

    # Kill one: its row changes (not answering at once, fenced once a fence watch runs).
    os.kill(KILL_PID, signal.SIGKILL)
    r = wait_for(lambda: nodes(driver).get(KILL_NODE, {}).get("down") and nodes(driver)[KILL_NODE], 20)
    check("the killed node's row is marked down (%s)" % (r["lease"].replace("\n", " ") if r else "unchanged"), bool(r))
    check("the killed node is shown fenced",
          bool(wait_for(lambda: nodes(driver).get(KILL_NODE, {}).get("lease", "").startswith("fenced"), 30)))
    others = nodes(driver)
    check("the two others stay live",
          sum(1 for k, v in others.items() if k != KILL_NODE and v["lease"].startswith("live") and not v["down"]) == 2)
    check("the summary counts 2 / 3 live nodes", "2 / 3" in text(driver, "#cluster-summary"))
    shot(driver, "cluster-node-fenced")

    # Traffic and bucket pages.
    go(driver, "traffic")
    def kv_rate():
        for r in rows(driver, "#classes-traffic", "data-class"):
            if r["key"] == "acme/kv" and r["cells"][2] not in ("–", "0"):
                return r
        return None
    check("the traffic page shows acme/kv's request rate", bool(wait_for(kv_rate, 15)))
    # console_test.sh also calls acme/nosuchclass: one shared row, never a row of its own.
    def unknown_row():
        keys = [r["key"] for r in rows(driver, "#classes-traffic", "data-class")]
        return "(unknown class)" in keys and keys
    keys = wait_for(unknown_row, 15) or []
    check("a class nobody deployed is counted in the one (unknown class) row (%s)" % keys,
          bool(keys) and not any("nosuch" in k for k in keys))
    shot(driver, "traffic")
    go(driver, "bucket")
    def purposes():
        p = {r["key"]: r["cells"] for r in rows(driver, "#bucket-purposes", "data-purpose") if r["key"]}
        return {"lease", "listing", "segment"} <= set(p) and number(p["lease"][1]) > 0 and p
    p = wait_for(purposes, 15)
    check("the bucket page shows every node's requests by purpose (lease writes, listings, segments)", bool(p))
    total = text(driver, "#bucket-purposes tr.total")
    check("and what they cost per day (%s)" % total.replace("\t", " "), "$" in total)
    Select(driver.find_element(By.ID, "prices")).select_by_value("r2")
    r2 = wait_for(lambda: text(driver, "#bucket-purposes tr.total") != total and text(driver, "#bucket-purposes tr.total"), 5)
    check("another price table prices them again", bool(r2))
    Select(driver.find_element(By.ID, "prices")).select_by_value("aws-s3")
    shot(driver, "bucket")

    # Tenants (issue 40): quotas as the node applies them, this node's use, usage by hour.
    go(driver, "tenants")
    tenants = wait_for(lambda: {r["key"]: r for r in rows(driver, "#tenants", "data-tenant") if r["key"]}
                       if len(rows(driver, "#tenants", "data-tenant")) >= 2 else None, 15)
    check("the tenants page lists every tenant (%s)" % sorted(tenants or {}), bool(tenants) and {"acme", "globex"} <= set(tenants))
    check("with its quotas (%s)" % (tenants or {}).get("acme", {}).get("cells"),
          bool(tenants) and "requests_per_second 5,000" in tenants["acme"]["cells"][1])
    check("and unlimited where none is set", bool(tenants) and tenants["globex"]["cells"][1] == "unlimited")
    driver.find_element(By.CSS_SELECTOR, "#tenants tr[data-tenant='acme']").click()
    check("a tenant's usage by hour is charted from every node's records",
          bool(wait_for(lambda: driver.execute_script(
              "return document.querySelectorAll('#tenant-usage .chart svg').length") == 4, 15)))
    requests_hour = wait_for(lambda: driver.execute_script(
        "return document.querySelector('#chart-tenant-requests .ymax').textContent") not in (None, "0")
        and driver.execute_script("return document.querySelector('#chart-tenant-requests .ymax').textContent"), 20)
    check("acme's requests this hour are in its usage (%s)" % requests_hour, bool(requests_hour))
    shot(driver, "tenants")

    # The actor browser: acme/kv, room-1's keys.
    go(driver, "actors")
    wait_for(lambda: driver.execute_script("return document.querySelector('#class-select').options.length") > 0, 10)
    Select(driver.find_element(By.ID, "class-select")).select_by_value("acme/kv")
    check("the actor browser lists acme/kv's actors",
          wait_for(lambda: {"room-1", "room-2", "xss", "scratch"} <= {r["key"] for r in rows(driver, "#actors", "data-actor")}, 15))
    pick_actor(driver, "room-1")
    keys = wait_for(lambda: {e["key"] for e in entries(driver)} >= {"theme", "lang", "motd", "session"} and entries(driver), 15)
    check("the inspector shows room-1's keys (%s)" % ([e["key"] for e in keys] if keys else None), bool(keys))
    facts = text(driver, "#inspect-facts")
    check("the inspector says where it read from (%s)" % facts, "read from" in facts and "4 keys" in facts)
    session = [e for e in (keys or []) if e["key"] == "session"]
    check("a binary value is shown as hex", bool(session) and "73657373696f6e000102ff" in session[0]["cells"][1])
    Select(driver.find_element(By.ID, "format")).select_by_value("hex")
    check("the hex view shows text values as hex too",
          wait_for(lambda: any("6461726b" in e["cells"][1] for e in entries(driver)), 10))
    Select(driver.find_element(By.ID, "format")).select_by_value("auto")
    wait_for(lambda: any(e["cells"][1] == "dark" for e in entries(driver)), 10)
    shot(driver, "actors")

    # Tenant data that is HTML is shown as text: nothing of it becomes an element or runs.
    pick_actor(driver, "xss")
    got = wait_for(lambda: [e for e in entries(driver) if e["key"] == HOSTILE_KEY], 15)
    check("a key and value that are HTML are shown as their text", bool(got) and "<script>" in got[0]["cells"][1])
    check("none of it became an element, none of it ran",
          driver.execute_script("return document.querySelectorAll('#entries img, #entries script, #entries svg').length") == 0
          and driver.execute_script("return window.__pwned === undefined"))
    shot(driver, "actors-hostile")

    # Deleting from the inspector: a confirmation, then the actor is empty.
    pick_actor(driver, "scratch")
    wait_for(lambda: any(e["key"] == "k" for e in entries(driver)), 15)
    driver.find_element(By.ID, "delete-actor").click()
    alert = wait_for(lambda: driver.switch_to.alert, 5)
    check("deleting asks first", bool(alert) and "scratch" in alert.text)
    if alert:
        alert.accept()
    check("the inspector reports the deletion",
          bool(wait_for(lambda: "deleted on" in text(driver, "#inspect-facts"), 30)))
    pick_actor(driver, "scratch")
    check("the deleted actor has no keys",
          bool(wait_for(lambda: "0 keys" in text(driver, "#inspect-facts") and not entries(driver), 15)))

    history(driver)

    # An actor's messages (docs/messages.md): the room's post to ann and bob was parked dead
    # (no inbox class then; console_test.sh deployed it since). Retry sends ann's again under
    # a new number and it is delivered; Drop asks first, then bob's is gone.
    Select(driver.find_element(By.ID, "class-select")).select_by_value("acme/room")
    wait_for(lambda: "lobby" in {r["key"] for r in rows(driver, "#actors", "data-actor")}, 15)
    pick_actor(driver, "lobby")
    dead = wait_for(lambda: [m for m in messages(driver) if m["kind"] == "dead"] if len(
        [m for m in messages(driver) if m["kind"] == "dead"]) == 2 else None, 15)
    check("the inspector shows the room's two dead messages, to each inbox, with their last error (%s)" % dead,
          bool(dead) and [m["who"] for m in dead] == ["acme/inbox/ann", "acme/inbox/bob"]
          and all("inbox" in m["error"] for m in dead))
    check("each dead message has a Retry and a Drop button",
          driver.execute_script("return document.querySelectorAll('#messages tr[data-kind=dead] button.retry').length") == 2
          and driver.execute_script("return document.querySelectorAll('#messages tr[data-kind=dead] button.drop').length") == 2)
    shot(driver, "actors-messages", whole=True)
    check("a dead message's Retry is clicked", bool(click_dead(driver, 1, "retry")))
    note = wait_for(lambda: "sent again as message 3" in text(driver, "#messages-note") and text(driver, "#messages-note"), 20)
    check("Retry sends it again under a new number (%s)" % note, bool(note))
    # Delivered: gone from the room's outbox (the list is read again when asked).
    def delivered():
        driver.execute_script("loadMessages()")
        time.sleep(0.3)
        m = messages(driver)
        return [x["seq"] for x in m if x["kind"] == "dead"] == ["2"] and not [x for x in m if x["kind"] == "outbox"]
    check("the retried message is delivered (the outbox empties) and bob's stays dead", bool(wait_for(delivered, 20)))
    click_dead(driver, 2, "drop")
    alert = wait_for(lambda: driver.switch_to.alert, 5)
    check("dropping asks first", bool(alert) and "Drop dead message 2" in alert.text)
    if alert:
        alert.accept()
    note = wait_for(lambda: "dropped" in text(driver, "#messages-note")
                    and not [m for m in messages(driver) if m["kind"] == "dead"] and text(driver, "#messages-note"), 20)
    check("Drop removes it (%s)" % note, bool(note))
    Select(driver.find_element(By.ID, "class-select")).select_by_value("acme/inbox")
    wait_for(lambda: "ann" in {r["key"] for r in rows(driver, "#actors", "data-actor")}, 15)
    pick_actor(driver, "ann")
    applied = wait_for(lambda: [m for m in messages(driver) if m["kind"] == "applied"], 15)
    check("ann's inbox applied the room's message 3 (%s)" % applied,
          bool(applied) and applied[0]["who"] == "acme/room/lobby" and applied[0]["seq"] == "3")
    check("bob's inbox never got the dropped one",
          "bob" not in {r["key"] for r in rows(driver, "#actors", "data-actor")})

    go(driver, "alarms")
    def due():
        d = {r["key"]: r for r in rows(driver, "#due-alarms", "data-actor") if r["key"]}
        return {"acme/probe/flaky", "acme/reminders/user-1", "globex/probe/g1"} <= set(d) and d
    d = wait_for(due, 15)
    check("the alarms page lists the alarms due and coming, of every tenant", bool(d))
    check("an alarm whose handler keeps failing is shown late",
          bool(d) and "late" in d["acme/probe/flaky"]["cls"].split() and d["acme/probe/flaky"]["cells"][2].startswith("late"))
    check("a reminder not yet due is shown coming", bool(d) and d["acme/reminders/user-1"]["cells"][2].startswith("in "))
    check("the alarm charts are drawn",
          bool(wait_for(lambda: driver.execute_script("return document.querySelectorAll('#chart-alarms-fired svg').length") > 0, 10)))
    shot(driver, "alarms")
    check("no token ever appears in the page's address", not tokens_in_url(driver))

    # A tenant sees its own tenant only: no cluster tabs, its own classes.
    driver.find_element(By.CSS_SELECTOR, "#who button").click()
    check("signing out forgets the token", driver.execute_script("return sessionStorage.length") == 0)
    check("and leaves nothing of the session on the page",
          driver.execute_script("return document.querySelectorAll('main tbody tr, .summary .stat, .chart svg').length") == 0)
    sign_in(driver, TENANT)
    check("a tenant signs in", wait_for(lambda: "tenant acme" in text(driver, "#who"), 10))
    visible = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "nav a") if a.is_displayed()]
    check("a tenant sees Actors and Alarms only (%s)" % visible, visible == ["Actors", "Alarms"])
    classes = wait_for(lambda: driver.execute_script(
        "return [...document.querySelector('#class-select').options].map((o) => o.value)"), 10)
    check("a tenant's class list holds its own classes only (%s)" % classes,
          bool(classes) and all(c.startswith("acme/") for c in classes))
    go(driver, "alarms")
    mine = wait_for(lambda: {r["key"] for r in rows(driver, "#due-alarms", "data-actor") if r["key"]} >= {"acme/probe/flaky"}
                    and [r["key"] for r in rows(driver, "#due-alarms", "data-actor") if r["key"]], 15)
    check("a tenant's alarms page shows its own alarms only (%s)" % mine,
          bool(mine) and all(k.startswith("acme/") for k in mine))
    driver.get(URL + "/console/#cluster")
    check("a tenant sent to the cluster page gets its actors instead",
          wait_for(lambda: driver.execute_script("return document.querySelector('#actors-page').hidden === false "
                                                 "&& document.querySelector('#cluster-page').hidden"), 10))
    check("no token ever appears in the page's address", not tokens_in_url(driver))

    # A sign-in link (scripts/demo.sh prints one): the token in the fragment, taken into the
    # tab's session and out of the address bar, on a fresh page and on an open one.
    driver.find_element(By.CSS_SELECTOR, "#who button").click()
    driver.get(URL + "/console/#token=" + OP)
    check("a sign-in link signs an open console in", wait_for(lambda: "operator" in text(driver, "#who"), 10))
    check("and its token leaves the address bar", not tokens_in_url(driver))
    driver.execute_script("sessionStorage.clear()")
    driver.get("about:blank")
    driver.get(URL + "/console/#token=" + OP)
    check("a sign-in link opens a fresh console signed in", wait_for(lambda: "operator" in text(driver, "#who"), 10))
    check("and its token leaves the address bar", not tokens_in_url(driver))


if __name__ == "__main__":
    sys.exit(main())
