"""Debian's headless Chromium through Selenium, as the browser tests start it (tests/browser/*.py):
one window of the given size, the same flags for every test, a 20 s page-load bound."""

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def start(window_size, extra_args=()):
    """A new driver; the caller quits it."""
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={window_size}", "--force-device-scale-factor=1", "--lang=en-US", *extra_args):
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(20)
    return driver
