"""The HTML report (issue 25) in a real headless browser: Debian's Chromium driven by Playwright, every
request that is not the file itself refused, so the page is proved to work offline."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import graphprof
from graphprof.cost.roofline import with_roofline
from graphprof.devices.hardware import get_hardware
from graphprof.render.html import render_compare_html, render_profile_html, render_sweep_html

pytest.importorskip("plotly", reason="the HTML report embeds plotly's script (the html extra)")
playwright = pytest.importorskip("playwright.sync_api", reason="the browser tests drive Chromium with playwright (the test extra)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (make install installs Debian's)")]
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Sequential(nn.Linear(32, 32), nn.ReLU()), nn.Linear(32, 4))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _open(browser: Any, path: Path) -> tuple[Any, list[str]]:
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    blocked: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith(("file:", "data:", "about:")):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    page.wait_for_timeout(300)
    assert blocked == []  # nothing reached for: the page is whole on its own
    return page, errors


@pytest.fixture(scope="module")
def measured_page(tmp_path_factory: Any) -> tuple[Path, Path, int]:
    pm = graphprof.prepare(_mlp(), example_inputs=(torch.randn(8, 16),))
    plain = pm.profile()
    measured = dataclasses.replace(plain, measurement=pm.measure(device="cpu", iters=3, warmup=1, layer_runs=1, breakdown=False))
    folder = tmp_path_factory.mktemp("html")
    graph, _ = pm.graph(detail=False)
    with_m, without = folder / "measured.html", folder / "dry.html"
    h100 = get_hardware("h100")
    with_m.write_text(render_profile_html(with_roofline(measured, h100), graph=graph))
    without.write_text(render_profile_html(with_roofline(plain, h100)))
    return with_m, without, sum(1 for layer in plain.layers if layer.cost.flops > 0 and layer.cost.bytes_moved > 0)


def test_no_console_errors_and_the_roofline_holds_one_point_per_layer_and_kind(browser: Any, measured_page: Any) -> None:
    with_m, _, placed = measured_page
    page, errors = _open(browser, with_m)
    assert errors == []
    counts = dict(page.evaluate("document.getElementById('roofline').data.map(t => [t.name, t.x.length])"))
    assert counts["lower bound"] == counts["predicted"] == placed and 0 < counts["measured"] <= placed
    assert page.locator("#graph svg").count() == (1 if shutil.which("dot") else 0)


def test_the_tree_expands_and_the_search_box_filters(browser: Any, measured_page: Any) -> None:
    with_m, _, _ = measured_page
    page, _ = _open(browser, with_m)
    root = page.locator("#tree > details").first
    assert root.evaluate("d => d.open") is False
    root.locator("summary").first.click()
    assert root.evaluate("d => d.open") is True and page.locator("#tree details details").first.is_visible()
    page.locator("input[placeholder='filter']").first.fill("relu")  # the layer table's filter
    visible = page.evaluate(
        "[...document.querySelectorAll('#layers tbody tr')].filter(r => r.style.display !== 'none').map(r => r.textContent)"
    )
    assert len(visible) == 2 and all("relu" in v.lower() for v in visible)  # the two ReLU layers of 6
    page.locator("input[placeholder='search the tree']").fill("zzz-no-such-module")
    assert page.locator("#tree > details").first.is_hidden()


def test_a_column_sort_reorders_rows(browser: Any, measured_page: Any) -> None:
    with_m, _, _ = measured_page
    page, _ = _open(browser, with_m)

    def flops() -> list[float]:
        return page.evaluate("[...document.querySelectorAll('#layers tbody tr')].map(r => parseFloat(r.cells[3].dataset.v))")

    before = flops()
    assert before != sorted(before)  # the rows come in execution order
    page.locator("#layers th", has_text="FLOPs").click()
    assert flops() == sorted(before)
    page.locator("#layers th", has_text="FLOPs").click()
    assert flops() == sorted(before, reverse=True)


def test_the_measured_column_appears_only_with_a_measurement(browser: Any, measured_page: Any) -> None:
    with_m, without, _ = measured_page
    page, _ = _open(browser, with_m)
    assert "measured" in page.locator("#layers thead").inner_text() and "measured forward" in page.locator("#cards").inner_text()
    page, errors = _open(browser, without)
    assert errors == [] and "measured" not in page.locator("#layers thead").inner_text()
    assert "measured" not in page.locator("#ops thead").inner_text()


def test_sweep_and_compare_pages_open_offline(browser: Any, tmp_path: Path) -> None:
    sweep = graphprof.sweep(_mlp(), "batch", [1, 2, 4], input_shape=(1, 16))
    path = tmp_path / "s.html"
    path.write_text(render_sweep_html(sweep))
    page, errors = _open(browser, path)
    assert errors == [] and page.evaluate("document.querySelectorAll(\"[id^='growth-']\").length") >= 3  # a chart per metric
    from graphprof.compare.models import comparison_rows

    path = tmp_path / "c.html"
    path.write_text(render_compare_html(comparison_rows([graphprof.profile_model(_mlp(), input_shape=(1, 16))])))
    page, errors = _open(browser, path)
    assert errors == [] and page.locator("#models tbody tr").count() == 1


# ---- the roofline a person can read, the activation plot, the notebook display (issue 33) ------------------
def test_the_roofline_names_its_axes_with_units_and_says_the_device_and_the_load(browser: Any, measured_page: Any) -> None:
    with_m, _, _ = measured_page
    page, errors = _open(browser, with_m)
    assert errors == []
    titles = page.evaluate("[...document.querySelectorAll('#roofline .xtitle, #roofline .ytitle')].map(e => e.textContent)")
    assert titles == ["Arithmetic intensity (FLOP/byte)", "Achieved throughput (TFLOP/s)"]  # drawn, not only in the data
    ticks = page.evaluate("[...document.querySelectorAll('#roofline .xtick text')].map(e => e.textContent)")
    assert ticks and all(t == "1" or t.startswith("10") for t in ticks)  # one label per decade (1, 10, 10^k), never "5 2"
    caption = page.inner_text("#roofline-caption")
    assert "H100" in caption and "TFLOP/s" in caption and "Measured on cpu at load" in caption
    hover = page.evaluate("document.getElementById('roofline').data.find(t => t.name == 'measured').customdata[0].join(' | ')")
    assert "FLOPs at" in hover and "measured" in hover and "lower bound" in hover


def test_a_training_profile_draws_its_activation_memory(browser: Any, tmp_path: Path) -> None:
    profile = graphprof.profile_model(_mlp(), input_shape=(8, 16), mode="train")
    path = tmp_path / "train.html"
    path.write_text(render_profile_html(profile))
    page, errors = _open(browser, path)
    assert errors == []
    bars = page.evaluate("document.getElementById('activations').data[0].y")
    assert abs(sum(bars) * 2**20 - profile.saved_activation_bytes) < 1  # the bars are the Saved column, in MiB
    assert page.evaluate("document.querySelector('#activations .ytitle').textContent") == "Saved by the layer (MiB)"


@pytest.mark.parametrize("make", ["profile", "sweep", "compare", "plan"])
def test_each_result_shows_itself_in_a_notebook(browser: Any, tmp_path: Path, make: str) -> None:
    """Jupyter calls ``_repr_html_``: the report in an iframe, rendered here as a notebook would show it."""
    result = {
        "profile": lambda: graphprof.profile_model(_mlp(), input_shape=(8, 16)),
        "sweep": lambda: graphprof.sweep(_mlp(), "batch", [1, 2], input_shape=(1, 16)),
        "compare": lambda: graphprof.compare_models(["squeezenet1_0", "nope"]),
        "plan": lambda: graphprof.partition_model("squeezenet1_0", "h100:2"),
    }[make]()
    cell = result._repr_html_()
    assert cell.startswith("<iframe srcdoc=")
    path = tmp_path / "notebook.html"
    path.write_text(f"<!DOCTYPE html><html><body><div class='output'>{cell}</div></body></html>")
    page, errors = _open(browser, path)
    page.wait_for_timeout(500)
    frame = page.frames[1]
    assert errors == [] and frame.evaluate("document.querySelectorAll('table tr').length") >= 2  # a header and a row
    plots = frame.evaluate("document.querySelectorAll('.js-plotly-plot').length")
    assert plots >= (0 if make == "profile" else 1)  # a profile with no device has no roofline to draw
    assert frame.evaluate("document.querySelector('h1').textContent").startswith("graphprof")
