"""The checks of the Python test scripts (tests/cluster/*.py, tests/browser/*.py): one line per
check ("ok   NAME" or "FAIL NAME"), notes indented under them, and the summary line the suite
reads ("N passed, N failed"). Imported by path: the scripts put tests/ on sys.path."""

import time

passed = 0
failed = 0


def check(name, ok):
    """Records one check and returns ok."""
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + name, flush=True)
    else:
        failed += 1
        print("FAIL " + name, flush=True)
    return ok


def note(text):
    print("     " + text, flush=True)


def wait_for(what, seconds, step=0.05, retry_on=()):
    """Polls what() until it is truthy or `seconds` have passed; returns its last value. An
    exception of a type in retry_on counts as "not yet"."""
    deadline = time.monotonic() + seconds
    value = None
    while True:
        try:
            value = what()
        except retry_on:
            value = None
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(step)


def summary():
    """Prints the summary line; returns the exit status (1 if a check failed)."""
    print("%d passed, %d failed" % (passed, failed), flush=True)
    return 0 if failed == 0 else 1
