"""The Snakemake report of a real sweep, opened in a headless browser (Debian's chromium and
chromedriver through selenium): its first page names the backend, the frame size and the GPU, and
each figure and table renders in the page — the identity grid, the ratio chart, the compile
deltas, the phase table and the summary.

The sweep is the sample layer on the cpu backend (two phases, three recipes), run by the workflow
as a user runs it, then `snakemake --report results/report.html`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from test_workflow import _configure, _copy_workflow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
RECIPES = ["isolate", "regen", "f32acc"]


def _need_browser():
    if CHROMIUM and CHROMEDRIVER:
        return
    why = "needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
    if os.environ.get("CI"):
        pytest.fail(f"{why}: .ci/run installs them")  # CI must not pass without looking at the report
    pytest.skip(why)


def _sweep_and_report(workdir):
    for args in (["--cores", "2"], ["--cores", "1", "--report", "results/report.html"]):
        r = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return workdir


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A workflow directory after the sweep and `snakemake --report`."""
    _need_browser()
    workdir = _copy_workflow(tmp_path_factory.mktemp("report"))
    _configure(workdir, backend="cpu", layers=["sample"], recipes=RECIPES)
    return _sweep_and_report(workdir)


@pytest.fixture(scope="module")
def browser(sweep):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(5)
    yield driver
    driver.quit()


def _open(browser, sweep):
    browser.get((sweep / "results/report.html").as_uri())
    return browser


def _show(browser, category: str, name: str):
    """Click the category in the report's menu, then the eye button of the result `name`."""
    from selenium.webdriver.common.by import By

    menu = browser.find_element(By.TAG_NAME, "nav")
    next(a for a in menu.find_elements(By.TAG_NAME, "a") if a.text == category).click()
    row = next(tr for tr in browser.find_elements(By.CSS_SELECTOR, "nav table tr") if name in tr.text)
    row.find_element(By.CSS_SELECTOR, "a[type=button]").click()


def _wait(condition, what: str, seconds: float = 10):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {seconds} s")


def test_the_first_page_names_the_backend_the_frame_and_the_gpu(sweep, browser):
    from selenium.webdriver.common.by import By

    text = _open(browser, sweep).find_element(By.TAG_NAME, "body").text
    rows = pq.read_table(sweep / "results/summary.parquet").to_pylist()
    frame = rows[0]["frame"]
    assert "Backend: cpu" in text and "PTX interpreter" in text and "no timing" in text, text[:2000]
    assert f"Frame: {frame} pixels" in text and "cpu_frame" in text, text[:2000]
    assert "GPU: none" in text
    assert f"{len(rows)} rows" in text and f"{len(rows)} passed every check" in text


@pytest.mark.parametrize("category,name", [("Identity", "identity.png"), ("Timing", "ratios.png"),
                                           ("Compile", "compile.png")])
def test_each_figure_renders_in_the_page(sweep, browser, category, name):
    from selenium.webdriver.common.by import By

    _show(_open(browser, sweep), category, name)
    image = _wait(lambda: next((i for i in browser.find_elements(By.TAG_NAME, "img")
                                if (i.get_attribute("src") or "").startswith("data:image/png")), None),
                  f"the {name} image")
    size = _wait(lambda: browser.execute_script(
        "return arguments[0].complete && [arguments[0].naturalWidth, arguments[0].naturalHeight]", image),
        f"{name} decoding")
    assert size[0] > 300 and size[1] > 200, size  # decoded, not a broken-image icon
    assert image.size["width"] > 300 and image.is_displayed()


def _table(browser, category: str, name: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the table an HTML result shows in the report's page (its iframe)."""
    from selenium.webdriver.common.by import By

    _show(browser, category, name)
    frame = _wait(lambda: next(iter(browser.find_elements(By.TAG_NAME, "iframe")), None), f"the {name} frame")
    browser.switch_to.frame(frame)
    try:
        table = _wait(lambda: next(iter(browser.find_elements(By.TAG_NAME, "table")), None), f"the {name} table")
        assert table.is_displayed() and table.size["height"] > 50
        header = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
        rows = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    finally:
        browser.switch_to.default_content()
    return header, rows


def test_the_summary_and_compile_tables_show_every_row(sweep, browser):
    rows = pq.read_table(sweep / "results/summary.parquet").to_pylist()
    header, shown = _table(_open(browser, sweep), "Summary", "summary.html")
    assert {"recipe", "passed", "checks", "worst buffer", "PSNR dB", "buffers", "registers"} <= set(header)
    col = {name: i for i, name in enumerate(header)}
    assert sorted((r[col["recipe"]], r[col["phase"]]) for r in shown) == \
        sorted((r["recipe"], str(r["phase"])) for r in rows)
    for r in shown:
        assert r[col["passed"]] == "✓" and "✓ roundtrip" in r[col["checks"]]
    header, shown = _table(_open(browser, sweep), "Compile", "compile.html")
    col = {name: i for i, name in enumerate(header)}
    assert len(shown) == len(rows) and "spill stores (bytes)" in col and "spill loads (bytes)" in col
    by = {(r["recipe"], str(r["phase"])): r for r in rows}
    for r in shown:
        row = by[(r[col["recipe"]], r[col["phase"]])]
        assert r[col["registers per thread"]].startswith(f"{row['ref_registers']} → {row['registers']}")


def test_the_phase_table_shows_every_phase(sweep, browser):
    import json

    phases = json.loads((sweep / "results/sample/descriptor.json").read_text())["phases"]
    header, shown = _table(_open(browser, sweep), "Phases", "phases_sample.html")
    col = {name: i for i, name in enumerate(header)}
    assert [(r[col["phase"]], r[col["mma"]], r[col["M"]]) for r in shown] == \
        [(str(p["phase"]), str(p["mma"]), str(p["M"])) for p in phases]


def test_a_fresh_install_brings_what_the_report_needs():
    # snakemake --report imports pygments, which only Snakemake's `reports` extra brings
    from importlib.metadata import requires

    needs = {r.split(";")[0].replace(" ", "") for r in requires("rr")}
    assert any(r.startswith("snakemake[reports]") for r in needs) and any(r.startswith("pygments") for r in needs)


@pytest.mark.gpu
def test_on_the_cuda_backend_the_report_names_the_gpu_and_charts_the_timings(gpu, tmp_path):
    workdir = _copy_workflow(tmp_path)
    _configure(workdir, backend="cuda", frame="256x256", layers=["sample"], recipes=["isolate", "regen"],
               timing={"noise": 0.01, "time_limit_s": 1})
    _sweep_and_report(workdir)
    rows = pq.read_table(workdir / "results/summary.parquet").to_pylist()
    assert rows and all(r["timing_status"] == "ok" and r["ratio"] > 0 and r["gpu"] == gpu["name"] for r in rows)
    assert all(r["capture_backend"] == "cuda" and r["capture_device"] == gpu["name"] for r in rows)
    first = (workdir / "results/report/run.rst").read_text()
    assert ":Backend: cuda\n" in first and f":GPU: {gpu['name']} (driver " in first and "cpu_frame" not in first
    assert f"GPU:</th><td class=\"field-body\">{gpu['name']}" in (workdir / "results/report.html").read_text() \
        .replace("\\", "")  # the first page, embedded in the report as a JSON string
