"""What only JupyterLab does, through its UI: templates in the launcher and the palette,
settings in the settings editor (read by Python), IR files highlighted, and saved
notebooks showing the static inspector instead of "model not found".
"""

from __future__ import annotations

import json
import time

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

from pallaslab._src.core import settings
from tests.browser.conftest import ROOT, clean_copy, screenshot, write_notebook
from tests.browser.lab import inspector, menu, open_in_lab, run_all, wait_idle

pytestmark = pytest.mark.browser

TTIR = """#loc = loc("/tmp/add.py":10:0)
module {
  tt.func public @add_kernel(%arg0: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("/tmp/add.py":10:0)) {
    %c128_i32 = arith.constant 128 : i32 loc(#loc1)
    %0 = tt.get_program_id x : i32 loc(#loc2)
    %1 = arith.muli %0, %c128_i32 : i32 loc(#loc3)
    tt.return loc(#loc4)
  } loc(#loc)
} loc(#loc)
"""
PTX = """.visible .entry add_kernel(
\t.param .u64 add_kernel_param_0
)
{
\t.reg .b32 \t%r<5>;
\tmov.u32 \t%r1, %ctaid.x;
\t@%p1 bra \t$L__BB0_2;
\tld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
$L__BB0_2:
\tret;
}
"""
HLO = """HloModule jit_add, entry_computation_layout={(f32[1024]{0})->f32[1024]{0}}

ENTRY %main.4 (Arg_0.1: f32[1024]) -> f32[1024] {
  %Arg_0.1 = f32[1024]{0} parameter(0)
  ROOT %add.3 = f32[1024]{0} add(f32[1024]{0} %Arg_0.1, f32[1024]{0} %Arg_0.1)
}
"""
LLO = """$region12: #{add_kernel} parent=0
  27 LB: > %v40 = vadd.f32 %v38, %v39 /* line 12 */
"""


def open_launcher(page, jupyter):
    page.goto(jupyter.url("lab?reset"))
    page.wait_for_selector(".jp-Launcher", timeout=120_000)


def test_launcher_makes_a_notebook_from_a_template_that_runs(jupyter, new_page):
    page = new_page()
    open_launcher(page, jupyter)
    section = page.locator(".jp-Launcher-section", has_text="pallaslab")
    cards = section.locator(".jp-LauncherCard")
    assert cards.all_inner_texts() == ["Vector add", "Tiled matmul", "Softmax", "Flash attention"]
    screenshot(page, "launcher")
    section.locator(".jp-LauncherCard", has_text="Tiled matmul").click()
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=120_000)
    assert (jupyter.root / "tiled_matmul.ipynb").is_file()
    wait_idle(page)
    run_all(page)
    found = inspector(page)
    expect(found.locator(".pl-header .pl-pass")).to_contain_text("matches reference")
    expect(found.locator(".pl-header")).to_contain_text("matmul")
    screenshot(page, "template-tiled-matmul")
    assert page.errors.ours() == []


def command_palette(page, command_label):
    """Runs a command from the command palette (opened from the View menu).

    A menu click that lands while a loaded machine is still laying Lab out can open
    nothing: the palette is asked for again until it shows (a minute at most).
    """
    palette = page.locator(".lm-CommandPalette-input:visible").first
    deadline = time.monotonic() + 60
    while True:
        menu(page, "View", "apputils:activate-command-palette")
        try:
            palette.wait_for(timeout=10_000)
            break
        except PlaywrightTimeoutError:
            assert time.monotonic() < deadline, "the command palette never opened"
    palette.fill(command_label)
    page.locator(".lm-CommandPalette-item:visible", has_text=command_label).first.click()


def test_palette_inserts_a_template_cell(jupyter, new_page):
    write_notebook(jupyter.root / "empty.ipynb", ["import numpy"])
    page = new_page()
    open_in_lab(page, jupyter, "empty.ipynb")
    page.locator(".jp-NotebookPanel .jp-InputPrompt").first.click()
    command_palette(page, "Insert Kernel Cell: Softmax")
    cells = page.locator(".jp-NotebookPanel .jp-Cell")
    expect(cells).to_have_count(3)  # a load cell first, as the notebook has none
    expect(cells.nth(1)).to_contain_text("%load_ext pallaslab")
    expect(cells.nth(2)).to_contain_text("%%kernel softmax(x)")
    screenshot(page, "palette-inserted")


def test_settings_editor_writes_what_python_reads(jupyter, new_page):
    page = new_page()
    open_launcher(page, jupyter)
    command_palette(page, "pallaslab Settings")
    main = page.locator("#jp-main-dock-panel")
    expect(main.get_by_text("Default IR target")).to_be_visible(timeout=60_000)
    expect(main.get_by_text("Default TPU generation")).to_be_visible()
    expect(main.get_by_text("Always use interpret mode")).to_be_visible()
    field = '[id="jp-SettingsEditor-pallaslab:plugin_{}"]'
    main.locator(field.format("tpuGeneration")).select_option("v6e")
    main.locator(field.format("interpret")).check()
    screenshot(page, "settings-editor")
    user_file = jupyter.settings / "pallaslab" / "plugin.jupyterlab-settings"
    deadline = time.monotonic() + 30
    loaded = settings.load(user_file=user_file, overrides=[])
    while (loaded.tpu_generation, loaded.interpret) != ("v6e", True):
        assert time.monotonic() < deadline, f"settings never saved: {loaded}"
        time.sleep(0.5)
        loaded = settings.load(user_file=user_file, overrides=[])
    assert loaded.problems == ()
    stored = jupyter.api("GET", "/lab/api/settings/pallaslab:plugin")
    assert stored["settings"]["tpuGeneration"] == "v6e"
    # Back to the defaults for the other tests.
    jupyter.api("PUT", "/lab/api/settings/pallaslab:plugin", {"raw": json.dumps({})})


@pytest.mark.parametrize(
    ("name", "text", "classes"),
    [
        ("add.mlir", TTIR, {"tt": "tok-namespace", "@add_kernel": "tok-variableName"}),
        ("add.ptx", PTX, {"mov": "tok-keyword", "%ctaid.x": "tok-variableName2"}),
        # TPU LLO and HLO: the grammar file's languages, registered by the extension too.
        ("add.hlo", HLO, {"ROOT": "tok-keyword", "%add.3": "tok-variableName"}),
        ("add.llo", LLO, {"vadd.f32": "tok-keyword", "%v40": "tok-variableName"}),
    ],
)
def test_ir_files_open_highlighted(jupyter, new_page, name, text, classes):
    (jupyter.root / name).write_text(text)
    page = new_page()
    page.goto(jupyter.url(f"lab/tree/{name}?reset"))
    content = page.locator(".jp-FileEditor .cm-content")
    expect(content).to_be_visible(timeout=120_000)
    for token, cls in classes.items():
        span = content.locator(f".{cls}", has_text=token).first
        expect(span).to_be_visible()
    assert content.locator(".tok-keyword").count() > 0
    screenshot(page, f"file-{name}")


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_saved_notebook_shows_the_static_inspector(jupyter, new_page, trusted):
    """The tour saved with outputs but without widget state, its kernel gone.

    Trusted (the user ran and saved it), JupyterLab alone would say "Error displaying
    widget: model not found": the extension shows the static inspector instead.
    Untrusted, JupyterLab already falls back to the (sanitized) static HTML itself.
    """
    name = f"saved_tour_{'trusted' if trusted else 'untrusted'}.ipynb"
    clean_copy(ROOT / "notebooks" / "00_tour.ipynb", jupyter.root / name, keep_outputs=True)
    if trusted:
        jupyter.trust(name)
    page = new_page()
    open_in_lab(page, jupyter, name)
    static = page.locator(".jp-OutputArea-output .pallaslab-static").first
    expect(static).to_be_visible(timeout=120_000)
    expect(static).to_contain_text("Kernels")
    expect(static).to_contain_text("add_kernel")
    if trusted:
        # Every inspector of the saved tour falls back to its static page.
        expect(page.locator(".pl-lab-fallback .pallaslab-static").first).to_be_visible()
        expect(page.locator(".pl-lab-fallback-note").first).to_contain_text("Run the cell again")
    expect(page.locator(".jp-OutputArea-output", has_text="model not found")).to_have_count(0)
    screenshot(page, f"saved-tour-{'trusted' if trusted else 'untrusted'}")
    assert page.errors.ours() == []
