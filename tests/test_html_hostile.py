"""Issue 34, item 3: names a model or a user brings run no script in the HTML page, checked in Chromium.

The payload (a module name, a model name, a factory keyword) closes the chart's ``<script>``, opens its
own, and adds an ``<img onerror>``; each sets a page global (the marker) and the image asks for a file
(a request the route records). The pages are rendered with the payload in every place a name lands
(tree, tables, roofline chart data, module graph, titles, chart labels), and nothing may run. A control
page with the payload written raw proves the marker is seen when script does run.
"""

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
from graphprof.base.choices import SweepAxis
from graphprof.cost.roofline import with_roofline
from graphprof.devices.hardware import get_hardware
from graphprof.render.escape import plotly_json, script_json
from graphprof.render.html import render_compare_html, render_profile_html, render_sweep_html

pytest.importorskip("plotly", reason="the HTML report embeds plotly's script (the html extra)")
playwright = pytest.importorskip("playwright.sync_api", reason="the browser tests drive Chromium with playwright (the test extra)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"]

#: No dots (a module name cannot hold one); every way out of the context it lands in.
PAYLOAD = "</script><script>PWNED=1</script><img src=PWNEDIMG onerror=PWNED=2><!--'\"><b onmouseover=PWNED=3>"


def test_script_json_cannot_end_its_element() -> None:
    out = script_json({"a": PAYLOAD, "b": ["<!--", "</SCRIPT>", "\u2028"]})
    assert "<" not in out and ">" not in out and "\u2028" not in out
    assert "\\u0026lt;b" in plotly_json({"text": ["<b>"]}) and '"type": "bar"' in plotly_json({"type": "bar"})


def _model() -> nn.Module:
    model = nn.Sequential()
    model.add_module(PAYLOAD, nn.Linear(16, 16))
    model.add_module("relu", nn.ReLU())
    return model


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (make install installs Debian's)")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _ran(browser: Any, path: Path) -> list[str]:
    """What the page ran: the marker global's value and every request it made for the payload's image."""
    page = browser.new_page()
    asked: list[str] = []

    def route(r: Any) -> None:
        if "PWNED" in r.request.url:
            asked.append(r.request.url)
        r.continue_() if r.request.url.startswith(("file:", "data:", "about:")) else r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    page.wait_for_timeout(300)
    for cell in page.locator("b").all()[:50]:  # a hover over any injected <b onmouseover>
        if cell.is_visible():
            cell.hover(timeout=1000)
    marker = page.evaluate("typeof PWNED === 'undefined' ? null : String(PWNED)")
    page.close()
    return ([f"PWNED={marker}"] if marker is not None else []) + asked


@pytest.fixture(scope="module")
def pages(tmp_path_factory: Any) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hostile-html")
    pm = graphprof.prepare(_model(), example_inputs=(torch.randn(4, 16),))
    profile = dataclasses.replace(pm.profile(), model_name=PAYLOAD)
    graph, _ = pm.graph(detail=False)
    sweep = graphprof.sweep(nn.Linear(16, 16), "batch", [1, 2], input_shape=(1, 16))
    sweep = dataclasses.replace(sweep, model=PAYLOAD, notes=(PAYLOAD,), axis=SweepAxis.SET, key=PAYLOAD)  # a --set keyword
    from graphprof.compare.models import comparison_rows

    texts = {
        "profile": render_profile_html(with_roofline(profile, get_hardware("h100")), graph=graph),
        "sweep": render_sweep_html(sweep),
        "compare": render_compare_html(comparison_rows([profile])),
        "control": f"<html><body><script>var x = 1;</script>{PAYLOAD}</body></html>",
    }
    out = {}
    for name, page in texts.items():
        out[name] = folder / f"{name}.html"
        out[name].write_text(page)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["profile", "sweep", "compare"])
def test_a_payload_name_runs_nothing_in_the_page(browser: Any, pages: dict[str, Path], name: str) -> None:
    assert _ran(browser, pages[name]) == []
    assert PAYLOAD.split("<!--")[0] not in pages[name].read_text()  # never written raw


@pytest.mark.slow
def test_the_control_page_shows_the_marker_when_script_runs(browser: Any, pages: dict[str, Path]) -> None:
    assert _ran(browser, pages["control"]) != []
