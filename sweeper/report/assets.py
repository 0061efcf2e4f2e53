"""Static parts of the HTML report: stylesheet, error capture, plot rendering, self-check, table sort.

The page is one file with no network access: plotly.js is inlined once by report.py and
these scripts are plain JavaScript with no libraries: plot rendering and self-check, table sort,
and (explore_js.py) the context selector, the Pareto scatter's objective menus and its front line,
the lazily drawn parallel coordinates with their count of highlighted lines. After every plot has
rendered, the page writes a JSON summary (per plot: expected and rendered points; any script
errors) into <pre id="sweeper-selfcheck"> so a headless browser run can check it.
"""

from sweeper.report.explore_js import EXPLORE_JS

CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:")
"""No fetch of any kind. 'unsafe-eval': plotly's WebGL views (parcoords) build their shaders' drawing
code with `new Function`; every string from the data reaches the page escaped, never as code."""

CSS = """
:root { --ink:#1f2430; --muted:#5b6472; --line:#dde1e7; --bg:#ffffff; --soft:#f5f7fa;
        --win:#1a7f37; --lose:#c2410c; --even:#6b7280; --fail:#b91c1c; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
       color:var(--ink); background:var(--bg); }
main { max-width:1240px; margin:0 auto; padding:20px 24px 60px; }
header.top { border-bottom:2px solid var(--ink); margin-bottom:14px; }
h1 { font-size:26px; margin:0 0 4px; }
h2 { font-size:21px; margin:34px 0 8px; padding-top:10px; border-top:1px solid var(--line); }
h3 { font-size:17px; margin:22px 0 6px; color:#2d3440; }
.sub { color:var(--muted); margin:0 0 10px; }
nav.models { display:flex; flex-wrap:wrap; gap:6px; margin:8px 0 14px; }
nav.models a { padding:2px 10px; border:1px solid var(--line); border-radius:12px; text-decoration:none;
               color:var(--ink); background:var(--soft); font-size:13px; }
.key { background:var(--soft); border:1px solid var(--line); border-radius:6px; padding:8px 12px;
       font-size:13.5px; margin:8px 0 12px; }
.key .sw { display:inline-block; width:11px; height:11px; border-radius:2px; margin:0 3px 0 8px;
           vertical-align:-1px; }
.plot { width:100%; min-height:200px; }
.grid2 { display:grid; grid-template-columns:1fr 1fr; gap:14px; }
@media (max-width:1000px) { .grid2 { grid-template-columns:1fr; } }
.note { color:var(--muted); font-size:13.5px; margin:4px 0; }
.empty { color:var(--muted); font-style:italic; padding:10px; background:var(--soft); border-radius:6px; }
table { border-collapse:collapse; width:100%; font-size:13px; margin:6px 0 10px; }
th, td { text-align:left; padding:4px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { background:#eef1f5; position:sticky; top:0; }
td.nw { white-space:nowrap; }
td code { white-space:normal; }
td.wrap { word-break:break-word; min-width:200px; max-width:340px; }
.tablewrap { overflow-x:auto; }
td.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
table.sortable th { cursor:pointer; user-select:none; }
table.sortable th::after { content:" \\2195"; color:#9aa3af; font-size:11px; }
table.sortable th[data-dir=asc]::after { content:" \\25B2"; color:var(--ink); }
table.sortable th[data-dir=desc]::after { content:" \\25BC"; color:var(--ink); }
tbody tr:nth-child(even) { background:#fafbfc; }
code { font:12.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; background:#f1f3f6;
       padding:1px 4px; border-radius:3px; white-space:nowrap; }
.err { font:12px ui-monospace,Menlo,Consolas,monospace; white-space:pre-wrap; word-break:break-word;
       max-width:640px; color:#7f1d1d; }
td.v-win, td.v-lose, td.v-even, td.v-fail { white-space:nowrap; }
.v-win { color:var(--win); font-weight:600; } .v-lose { color:var(--lose); font-weight:600; }
.v-even { color:var(--even); font-weight:600; } .v-fail { color:var(--fail); font-weight:600; }
.scroll { max-height:460px; overflow:auto; border:1px solid var(--line); border-radius:4px; }
details { margin:6px 0 12px; } summary { cursor:pointer; font-weight:600; }
.warn { border-left:4px solid var(--fail); background:#fef2f2; padding:8px 12px; border-radius:4px; }
.rec { border-left:4px solid var(--win); background:#f0fdf4; padding:8px 12px; border-radius:4px; }
h4 { font-size:15px; margin:18px 0 4px; }
#sweeper-selfcheck { display:none; }
.selector { position:sticky; top:0; z-index:10; background:#fff; padding:6px 0; border-bottom:1px solid var(--line); }
.selector select, .axes select { font-size:13.5px; padding:2px 4px; max-width:560px; }
.axes { display:flex; gap:18px; font-size:13.5px; margin:10px 0 0; }
footer { color:var(--muted); font-size:12px; margin-top:40px; }
"""

HEAD_JS = """
window.sweeperErrors = [];
window.sweeperError = function (text) {  // a late error updates a check already written
  window.sweeperErrors.push(text);
  if (window.sweeperSelfcheck) window.sweeperSelfcheck();
};
window.addEventListener('error', function (e) {
  window.sweeperError('error: ' + (e.message || (e.target && e.target.outerHTML) || e));
}, true);
window.addEventListener('unhandledrejection', function (e) {
  window.sweeperError('unhandled rejection: ' + e.reason);
});
document.addEventListener('securitypolicyviolation', function (e) {
  window.sweeperError('blocked by CSP: ' + e.violatedDirective + ' ' + e.blockedURI);
});
"""

TAIL_JS = """
(function () {
  var figs = JSON.parse(document.getElementById('sweeper-figs').textContent);
  var byId = {};
  figs.forEach(function (f) { byId[f.id] = f; });
  window.sweeperFigs = byId;
  var config = {displaylogo: false, responsive: true};
  var jobs = figs.filter(function (f) { return !f.lazy; }).map(function (f) {
    try {
      return Plotly.newPlot(f.id, f.data, f.layout, config).then(function () { if (f.explore) drawFront(f); });
    } catch (e) { window.sweeperErrors.push('plot ' + f.id + ': ' + e); return Promise.resolve(); }
  });
  var loaded = new Promise(function (resolve) {
    window.addEventListener('load', function () { setTimeout(resolve, 0); });
  });
  Promise.all([Promise.all(jobs), loaded]).then(
    function () { window.sweeperSelfcheck = selfcheck; selfcheck(); },
    function (e) { window.sweeperErrors.push('plot: ' + e); window.sweeperSelfcheck = selfcheck; selfcheck(); });

  function dataTraces(f, gd) {  // the traces that hold the plotted trials (not overlays or keys)
    var n = f.explore ? f.explore.n_data : (gd._fullData || []).length;
    return (gd._fullData || []).slice(0, n);
  }
  function dataPoints(f, gd) {
    var n = 0;
    dataTraces(f, gd).forEach(function (t) {
      if (t.visible !== true) return;
      if (t.type === 'heatmap') {
        (t.z || []).forEach(function (row) { row.forEach(function (v) { if (v !== null && !isNaN(v)) n++; }); });
      } else {
        n += ((t.orientation === 'h' ? t.x : t.y) || []).filter(function (v) { return v !== null; }).length;
      }
    });
    return n;
  }
  function renderedPoints(f, gd) {
    if (f.kind === 'heatmap') return gd.querySelectorAll('.hm image, .hm rect, .heatmaplayer image').length;
    if (!f.explore) return gd.querySelectorAll('.point').length;
    var groups = gd.querySelectorAll('.scatterlayer .trace');
    var n = 0;
    for (var i = 0; i < f.explore.n_data && i < groups.length; i++) n += groups[i].querySelectorAll('.point').length;
    return n;
  }
  function selfcheck() {
    var plots = figs.filter(function (f) { return !f.lazy; }).map(function (f) {
      var gd = document.getElementById(f.id);
      return {id: f.id, kind: f.kind, title: f.title, expected: f.expected, data: dataPoints(f, gd),
              rendered: renderedPoints(f, gd)};
    });
    var ok = window.sweeperErrors.length === 0 && plots.every(function (p) {
      return p.data === p.expected && (p.kind === 'heatmap' ? p.rendered > 0 : p.rendered === p.expected);
    });
    document.getElementById('sweeper-selfcheck').textContent =
      JSON.stringify({ok: ok, plots: plots, errors: window.sweeperErrors});
    document.body.setAttribute('data-selfcheck', ok ? 'ok' : 'failed');
  }
  window.sweeperVisiblePoints = function () {
    var n = 0;
    figs.forEach(function (f) {
      var gd = document.getElementById(f.id);
      if (f.kind === 'scatter' && gd.offsetParent !== null) n += renderedPoints(f, gd);
    });
    return n;
  };

""" + EXPLORE_JS + """})();

(function () {
  function key(td) {
    var v = td.getAttribute('data-v');
    if (v !== null) return v === '' ? null : parseFloat(v);
    return td.textContent.trim().toLowerCase();
  }
  function sortBy(th) {
    var table = th.closest('table'), body = table.tBodies[0];
    var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
    var asc = th.getAttribute('data-dir') !== 'asc';
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[idx]), y = key(b.cells[idx]);
      if (x === null || y === null) return (x === null) - (y === null);  // missing last
      var c = x < y ? -1 : x > y ? 1 : 0;
      return asc ? c : -c;
    });
    Array.prototype.forEach.call(th.parentNode.children, function (h) { h.removeAttribute('data-dir'); });
    th.setAttribute('data-dir', asc ? 'asc' : 'desc');
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll('table.sortable th').forEach(function (th) {
    th.addEventListener('click', function () { sortBy(th); });
  });
})();
"""
