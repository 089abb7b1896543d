"""scripts/explore.py in Chromium via selenium: translates, draws, answers bad input; saves explorer.png."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "explorer.png"


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e .[dev])")
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip(f"no browser: {CHROMIUM} and {CHROMEDRIVER} are needed (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,2400",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def page_url(repo_root, tmp_path_factory):
    pytest.importorskip("gradio", reason='gradio is not installed (pip install -e ".[explorer]")')
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(repo_root)}
    log = tmp_path_factory.mktemp("explorer") / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, str(repo_root / "scripts" / "explore.py"), "--port", str(port)],
                                  env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # the address is printed once the page serves
            if url in log.read_text() or server.poll() is not None:
                break
            time.sleep(0.5)
        if url not in log.read_text():
            pytest.fail(f"the explorer did not serve (exit code {server.poll()}): {log.read_text()[-2000:]}")
        yield url + "/"
    finally:
        server.terminate()
        server.wait(timeout=30)


def wait_for(driver, condition, timeout=120):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: condition(d))


def submit(driver, text):
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.CSS_SELECTOR, "#sentence textarea")
    box.clear()
    driver.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'));",
                          box, text)
    driver.find_element(By.CSS_SELECTOR, "#translate").click()


def test_translates_and_draws_in_a_browser(browser, page_url):
    from selenium.webdriver.common.by import By

    browser.get(page_url)
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#sentence textarea"))
    submit(browser, "Two dogs are running through the snow.")
    translation = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#translation textarea")
                           .get_attribute("value"))
    assert "Hunde" in translation
    heatmap = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#attention img"))[0]
    assert browser.execute_script("return arguments[0].naturalWidth", heatmap) > 100
    rows = browser.find_elements(By.CSS_SELECTOR, "#beam table tr")
    assert len(rows) > 2 and "stopped here" in browser.find_element(By.CSS_SELECTOR, "#beam").text
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOT))

    # Bad input: a message on the page, typed HTML never runs, and the server goes on serving.
    submit(browser, "<img src=x onerror=\"window.ran=1\"> <script>window.ran=1</script>")
    wait_for(browser, lambda d: "&lt;" not in d.find_element(By.CSS_SELECTOR, "#pieces").text
             and "<unk>" in d.find_element(By.CSS_SELECTOR, "#pieces").text)
    assert browser.execute_script("return window.ran") is None
    for text in ("", "x" * 10_000):
        submit(browser, text)
        # The refusal's message, and no translation (the note of the text before may still be showing at first).
        wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#message").text and not d.find_element(
            By.CSS_SELECTOR, "#translation textarea").get_attribute("value"))
        submit(browser, "A dog.")
        wait_for(browser, lambda d: not d.find_element(By.CSS_SELECTOR, "#message").text)
    submit(browser, "A little girl climbs a tree.")
    wait_for(browser, lambda d: "Mädchen" in d.find_element(By.CSS_SELECTOR, "#translation textarea")
             .get_attribute("value"))
