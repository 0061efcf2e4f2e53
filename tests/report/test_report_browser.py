"""The report in a real headless Chromium: plots render with the expected points, no script errors,
no injected markup runs, header-click sort works, and a screenshot is produced.

The page writes its own check (points per plot, errors) into <pre id="sweeper-selfcheck">;
`--dump-dom` reads it back after plotly has rendered. Skipped only when Chromium is missing
outside CI; in CI (CI=true) a missing Chromium fails.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from sweeper.analysis import frames as rows
from sweeper.analysis import ranking
from sweeper.report import figures
from sweeper.report import page as report
from sweeper.results import synthetic

pytestmark = pytest.mark.slow  # every test here opens Chromium

PWN_IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">"
PWN_SCRIPT = "<script>document.body.setAttribute('data-pwned','script')</script>"

SORT_PROBE = """
<script>
(function () {
  var out = {};
  var fronts = Array.prototype.filter.call(document.querySelectorAll('section table.sortable'), function (t) {
    return t.tHead.textContent.indexOf('Throughput') >= 0;
  });
  var table = fronts.sort(function (a, b) { return b.tBodies[0].rows.length - a.tBodies[0].rows.length; })[0];
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var idx = heads.findIndex(function (h) { return h.textContent.indexOf('Throughput') === 0; });
  function col() {
    return Array.prototype.map.call(table.tBodies[0].rows, function (r) {
      return parseFloat(r.cells[idx].getAttribute('data-v'));
    });
  }
  heads[idx].click(); out.asc = col();
  heads[idx].click(); out.desc = col();
  var modeIdx = heads.findIndex(function (h) { return h.textContent.indexOf('Mode') === 0; });
  heads[modeIdx].click();
  out.modes = Array.prototype.map.call(table.tBodies[0].rows, function (r) { return r.cells[modeIdx].textContent; });
  var scatters = JSON.parse(document.getElementById('sweeper-figs').textContent)
    .filter(function (f) { return f.kind === 'scatter'; });
  var gd = document.getElementById(scatters[0].id);
  out.title = gd.querySelector('.gtitle').textContent;
  out.titleTags = gd.querySelectorAll('.gtitle img, .gtitle script').length;
  var target = scatters.map(function (f) { return document.getElementById(f.id); }).find(function (g) {
    return g._fullData.some(function (t) { return t.name === 'max-autotune'; });
  });
  var curve = target._fullData.findIndex(function (t) { return t.name === 'max-autotune'; });
  Plotly.Fx.hover(target, [{curveNumber: curve, pointNumber: 0}]);
  setTimeout(function () {
    out.hover = target.querySelector('.hoverlayer').textContent;
    var pre = document.createElement('pre'); pre.id = 'sort-probe'; pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }, 300);
})();
</script>
"""


def trial_frame() -> pd.DataFrame:
    data = synthetic.make_rows(360, seed=4, models=["resnet50", "vit_b_16", "bert_base"])
    data[0] = {**data[0], "model": PWN_IMG}
    data[1] = {**data[1], "status": "compile_error", "error": f"RuntimeError: {PWN_SCRIPT} {PWN_IMG}"}
    data += [{**r, "model": "broken", "status": "oom", "error": "CUDA out of memory",
              "throughput_items_s": None, "peak_mem_gib": None} for r in data[2:5]]
    data += [{**r, "model": "plain"} for r in data if r["mode"] == "eager"][:4]
    return pd.DataFrame(data)


def expected_counts(df: pd.DataFrame) -> tuple[int, int, int]:
    """Scatter points, scatter plots and heatmap cells, computed here from the rows, not by the report."""
    d = rows.prepare(df)
    plotted = d[d["status"].eq("ok") & d["peak_mem_gib"].gt(0) & d["throughput_items_s"].gt(0)]
    n_scatter = plotted.groupby(ranking.CONTEXT, dropna=False).ngroups
    cells = d[~d["is_eager"] & rows.accurate(d) & d["speedup_vs_eager"].gt(0)]
    n_cells = len(cells.groupby([*ranking.CONTEXT, "mode", "batch_size"], dropna=False))
    return len(plotted), n_scatter, n_cells


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    tmp = tmp_path_factory.mktemp("browser")
    df = trial_frame()
    return report.write_report(df, tmp / "report.html", title=f"browser check {PWN_SCRIPT}"), df


def test_plots_render_with_expected_points_and_no_errors(built, tmp_path: Path, run_chromium) -> None:
    path, df = built
    probe = tmp_path / "probe.html"
    probe.write_text(path.read_text().replace("</body></html>", SORT_PROBE + "</body></html>"))
    out = run_chromium("--dump-dom", probe.as_uri())
    assert out.returncode == 0, out.stderr[-2000:]
    dom = out.stdout
    check = json.loads(html.unescape(re.search(r'<pre id="sweeper-selfcheck">(.*?)</pre>', dom, re.S).group(1)))
    assert check["errors"] == []
    assert check["ok"] is True, check
    assert "Uncaught" not in out.stderr
    assert 'data-pwned="' not in dom  # the attribute, set only if injected markup ran
    by_kind = {k: [p for p in check["plots"] if p["kind"] == k] for k in ("scatter", "heatmap", "bar")}
    points, n_scatter, n_cells = expected_counts(df)
    assert len(by_kind["scatter"]) == n_scatter
    assert sum(p["rendered"] for p in by_kind["scatter"]) == points
    assert sum(p["data"] for p in by_kind["heatmap"]) == n_cells
    assert all(p["rendered"] == p["expected"] > 0 for p in by_kind["bar"])
    assert all(p["rendered"] > 0 for p in by_kind["heatmap"])
    sort = json.loads(html.unescape(re.search(r'<pre id="sort-probe">(.*?)</pre>', dom, re.S).group(1)))
    assert len(sort["asc"]) >= 3
    assert sort["asc"] == sorted(sort["asc"]) and sort["desc"] == sorted(sort["asc"], reverse=True)
    assert sort["modes"] == sorted(sort["modes"], key=str.lower)
    assert sort["title"].startswith(PWN_IMG) and sort["titleTags"] == 0  # shown as text, not markup
    assert 'torch.compile(model, mode="max-autotune", dynamic=' in sort["hover"]
    assert "items/s" in sort["hover"] and "GiB" in sort["hover"] and "compile" in sort["hover"]


def test_screenshot(built, tmp_path: Path, run_chromium) -> None:
    """A screenshot of the rendered page: the window's size, and drawn (plots and text in many colours,
    not a blank or single-colour error page)."""
    path, _ = built
    shot = tmp_path / "report.png"
    out = run_chromium("--hide-scrollbars", f"--screenshot={shot}", "--window-size=1280,2400", path.as_uri())
    assert out.returncode == 0, out.stderr[-2000:]
    with Image.open(shot) as image:
        assert image.format == "PNG" and image.size == (1280, 2400)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200, f"{len(colours or [])} colours: a blank page"
    background = max(colours)[0] / (1280 * 2400)
    assert background < 0.97, f"{background:.1%} of the page is one colour"
    keep = os.environ.get("SWEEPER_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "report.png")


CONTROLS_PROBE = """
<script>
window.addEventListener('load', function () { setTimeout(function () {
  var out = {allPoints: window.sweeperVisiblePoints()};
  var select = document.getElementById('ctx-select');
  out.contexts = select.options.length - 1;
  var target = Array.prototype.map.call(document.querySelectorAll('div.ctx'), function (d) {
    return d.getAttribute('data-ctx'); }).filter(function (id) {
    return Array.prototype.some.call(document.querySelectorAll('div.ctx[data-ctx=' + id + '] .plot'), function (gd) {
      return window.sweeperFigs[gd.id].kind === 'parcoords' && window.sweeperFigs[gd.id].expected >= 8; });
  })[1];
  select.value = target; select.dispatchEvent(new Event('change'));
  setTimeout(function () {
    out.chosen = target;
    out.chosenPoints = window.sweeperVisiblePoints();
    out.visibleBlocks = Array.prototype.filter.call(document.querySelectorAll('div.ctx'),
      function (d) { return d.style.display !== 'none'; }).map(function (d) { return d.getAttribute('data-ctx'); });
    var block = document.querySelector('div.ctx[data-ctx=' + target + ']');
    var coords = Array.prototype.filter.call(block.querySelectorAll('.plot'), function (gd) {
      return window.sweeperFigs[gd.id].kind === 'parcoords'; })[0];
    out.before = parseInt(coords.getAttribute('data-highlighted'), 10);
    var dims = coords.data[0].dimensions, k = dims.length - 4;  // the throughput axis
    var vals = dims[k].values.slice().sort(function (a, b) { return a - b; });
    var range = [vals[Math.floor(vals.length / 2)], vals[vals.length - 1]];
    var update = {}; update['dimensions[' + k + '].constraintrange'] = [range];
    Plotly.restyle(coords, update).then(function () {
      out.after = parseInt(coords.getAttribute('data-highlighted'), 10);
      out.note = document.querySelector('.lazy[data-for=' + coords.id + ']').textContent;
      var scatterSel = block.querySelector('select[data-axis=x]');
      var fig = window.sweeperFigs[scatterSel.getAttribute('data-fig')];
      out.frontDefault = fig.front.x.length;
      var axesNow = function () {
        var gd = document.getElementById(fig.id);
        return ['x', 'y'].map(function (a) {
          var ax = gd.layout[a + 'axis'];
          return {type: ax.type, tickvals: ax.tickvals || null, ticktext: ax.ticktext || null,
                  shown: Array.prototype.map.call(gd.querySelectorAll('.' + a + 'tick text'),
                                                  function (t) { return t.textContent; })};
        });
      };
      out.axes = axesNow();
      scatterSel.value = 'compile'; scatterSel.dispatchEvent(new Event('change'));
      var ySel = block.querySelector('select[data-axis=y]');
      ySel.value = 'speedup'; ySel.dispatchEvent(new Event('change'));
      setTimeout(function () {
        var gd = document.getElementById(fig.id);
        out.xTitle = gd.layout.xaxis.title.text; out.yTitle = gd.layout.yaxis.title.text;
        out.frontSwitched = fig.front.x.length;
        out.frontSorted = fig.front.x.every(function (v, i, a) { return i === 0 || a[i - 1] <= v; });
        out.errorBars = gd.querySelectorAll('.errorbar').length;
        out.axes = out.axes.concat(axesNow());
        out.errors = window.sweeperErrors.slice();
        var pre = document.createElement('pre'); pre.id = 'controls-probe'; pre.textContent = JSON.stringify(out);
        document.body.appendChild(pre);
      }, 1500);
    });
  }, 1500);
}, 500); });
</script>
"""


def _probe(report: Path, tmp_path: Path, run_chromium, script: str, pre_id: str, fragment: str = "") -> dict:
    """Open the report with `script` added in headless Chromium; what the script left in <pre id=pre_id>."""
    probe = tmp_path / f"{pre_id}.html"
    probe.write_text(report.read_text().replace("</body></html>", script + "</body></html>"))
    out = run_chromium("--dump-dom", probe.as_uri() + fragment)
    assert out.returncode == 0, out.stderr[-2000:]
    found = re.search(rf'<pre id="{pre_id}">(.*?)</pre>', out.stdout, re.S)
    assert found, out.stderr[-3000:]
    assert "Uncaught" not in out.stderr
    return json.loads(html.unescape(found.group(1)))


def test_controls_switch_context_brush_parcoords_and_choose_axes(built, tmp_path: Path, run_chromium) -> None:
    path, df = built
    got = _probe(path, tmp_path, run_chromium, CONTROLS_PROBE, "controls-probe")
    assert got["errors"] == []
    d = rows.prepare(df)
    plotted = d[d["status"].eq("ok") & d["peak_mem_gib"].gt(0) & d["throughput_items_s"].gt(0)]
    per_context = plotted.groupby(ranking.CONTEXT, dropna=False, sort=True).size()
    assert got["allPoints"] == len(plotted)
    assert got["visibleBlocks"] == [got["chosen"]]
    assert got["chosenPoints"] in set(per_context) and got["chosenPoints"] < got["allPoints"]
    assert got["contexts"] == d.groupby(ranking.CONTEXT, dropna=False).ngroups
    assert 0 < got["after"] < got["before"]  # brushing an axis narrows the highlighted lines
    assert f"{got['after']} of {got['before']} settings highlighted" in got["note"]
    assert got["frontDefault"] >= 1 and got["frontSwitched"] >= 1 and got["frontSorted"]
    assert got["xTitle"].startswith("Compile time") and got["yTitle"].startswith("Speedup")
    assert got["errorBars"] > 0
    logs = [a for a in got["axes"] if a["type"] == "log"]
    assert logs  # the synthetic rows span more than 30x on some axis, before or after switching
    for axis in logs:  # whole labels ("2k", not plotly's "2"), the same as the report's Python draws
        assert axis["ticktext"] == [figures.si_text(v) for v in axis["tickvals"]]
        assert axis["shown"] and set(axis["shown"]) <= set(axis["ticktext"])


LINK_PROBE = """
<script>
window.addEventListener('load', function () { setTimeout(function () {
  var select = document.getElementById('ctx-select');
  var out = {selected: select.value, visible: Array.prototype.filter.call(document.querySelectorAll('div.ctx'),
    function (d) { return d.style.display !== 'none'; }).map(function (d) { return d.getAttribute('data-ctx'); })};
  select.value = select.options[select.options.length - 1].value; select.dispatchEvent(new Event('change'));
  out.hashAfterChoosing = location.hash;
  select.value = ''; select.dispatchEvent(new Event('change'));
  out.hashAfterAll = location.hash;
  out.errors = window.sweeperErrors.slice();
  var pre = document.createElement('pre'); pre.id = 'link-probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 1500); });
</script>
"""


def test_a_link_to_one_context_opens_it_and_choosing_one_updates_the_link(built, tmp_path: Path, run_chromium) -> None:
    found = _probe(built[0], tmp_path, run_chromium, LINK_PROBE, "link-probe", fragment="#ctx=c1")
    assert found["selected"] == "c1" and found["visible"] == ["c1"]  # the linked context only
    assert found["hashAfterChoosing"].startswith("#ctx=c") and found["hashAfterChoosing"] != "#ctx=c1"
    assert found["hashAfterAll"] == "" and found["errors"] == []
