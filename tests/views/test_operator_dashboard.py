"""``--dashboard PORT`` in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
installed by .ci/run): the page loads, shows the run's figures, and updates as tasks finish.

Tasks 1-39 wait for the file ``go1``, task 40 for ``go2``: the run cannot end before the test
lets it, so the page is certainly watching a live run (no timed assertions)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import urllib.request

import pytest
from helpers.configs import watched_clouds
from helpers.runs import MASTER

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER),
                                reason="needs Debian's chromium and chromium-driver (.ci/run installs them)")


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(DRIVER), options=options)  # the driver given: nothing downloaded


def test_dashboard_in_headless_chromium_shows_the_run_and_updates(tmp_path):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    go1, go2 = tmp_path / "go1", tmp_path / "go2"
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"while [ ! -e {go1 if i < 40 else go2} ]; do sleep 0.05; done; sleep 0.05\n"
                           for i in range(1, 41)))
    config = tmp_path / "clusters.toml"
    config.write_text(watched_clouds(2))
    master = subprocess.Popen([*MASTER, "--bag", str(bag), "--config", str(config), "--state-dir",
                               str(tmp_path / "run"), "--schedule", "fastest", "--cushion", "yes", "--dashboard", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url: list[str] = []
    found = threading.Event()
    err_lines: list[str] = []

    def read_stderr() -> None:  # keeps draining, so the master never blocks on a full pipe
        for line in master.stderr:
            err_lines.append(line)
            match = re.search(r"dashboard on (http://127\.0\.0\.1:\d+/)", line)
            if match and not url:
                url.append(match.group(1))
                found.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    driver = None
    try:
        assert found.wait(60), "".join(err_lines)
        # read-only: the JSON endpoint answers GET and refuses anything else
        request = urllib.request.Request(url[0] + "status.json", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 405
        driver = browser()
        driver.get(url[0])
        wait = WebDriverWait(driver, 90, poll_frequency=0.2)
        text = lambda element_id: driver.find_element(By.ID, element_id).text  # noqa: E731
        wait.until(lambda d: text("total") == "40")
        run_id = json.loads((tmp_path / "run" / "control.json").read_text())["run_id"]
        assert text("run_id") == run_id and text("done") == "0"
        assert text("phase") == "sampling"
        wait.until(lambda d: float(text("spent").split()[0]) >= 4.0)  # once the sampling machines are up
        wait.until(lambda d: d.find_elements(By.ID, "cluster-slow") and d.find_elements(By.ID, "cluster-fast"))
        assert "1:" in driver.find_element(By.ID, "cluster-fast").text  # machines in their first ATU
        go1.touch()  # tasks finish; the same page (no reload) follows
        wait.until(lambda d: text("done").isdigit() and int(text("done")) >= 1)
        first = int(text("done"))
        # task 40 (waiting for go2) may be one of the sampling phase's replicated tasks, which can
        # keep one more task from being counted until go2: 38 is as far as some runs get here
        try:
            wait.until(lambda d: int(text("done")) > first or int(text("done")) >= 38)
        except TimeoutException:  # say what the page, the endpoint and the master showed
            with urllib.request.urlopen(url[0] + "status.json", timeout=30) as answer:
                served = answer.read().decode()
            raise AssertionError(f"done stayed at {first}; page: {driver.find_element(By.TAG_NAME, 'body').text!r}; "
                                 f"status.json: {served[:3000]}; master: {''.join(err_lines[-40:])}") from None
        assert driver.execute_script("return document.getElementById('tasks_bar').style.width") != "0px"
        go2.touch()
        master.wait(timeout=120)
        assert master.returncode == 0, "".join(err_lines)
    finally:
        if driver is not None:
            driver.quit()
        if master.poll() is None:
            master.kill()
            master.wait()
