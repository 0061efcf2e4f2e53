"""The report's explorer in the page (inside TAIL_JS's closure, beside `figs`, `byId`, `config`):
the Pareto scatter's choosable axes and the front of the two shown, the parallel coordinates drawn
for the chosen context with their brushing count, and the context selector with its link
(report.html#ctx=ID). The Python side of the same views is report/explore.py."""

EXPLORE_JS = """
  // ticks of a log axis, as figures.log_ticks: 1-2-5 per decade up to three decades, whole labels
  function siText(v) {
    var units = [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
    for (var i = 0; i < units.length; i++) {
      if (Math.abs(v) >= units[i][0]) { return +(v / units[i][0]).toPrecision(6) + units[i][1]; }
    }
    return String(+v.toPrecision(6));
  }
  function logTicks(lo, hi) {
    var first = Math.floor(Math.log10(lo)), last = Math.ceil(Math.log10(hi));
    var steps = last - first > 3 ? [1] : [1, 2, 5], vals = [], text = [];
    for (var k = first; k <= last; k++) {
      steps.forEach(function (m) { var v = +(m * Math.pow(10, k)).toPrecision(6); vals.push(v); text.push(siText(v)); });
    }
    return {vals: vals, text: text};
  }
  // Pareto scatter: choosable objectives, the front of the two shown drawn as a line
  function axisOf(f, key) { return f.explore.axes.filter(function (a) { return a.key === key; })[0]; }
  function setAxes(f) {
    var gd = document.getElementById(f.id), e = f.explore, cols = e.columns;
    var idx = cols.map(function (_, i) { return i; });
    function errors(key) {
      var on = key === 'throughput' || key === 'speedup';
      return cols.map(function (c) {
        return on ? {type: 'data', symmetric: false, array: c[key + '_plus'], arrayminus: c[key + '_minus'],
                      visible: true, thickness: 1, width: 0, color: '#9ca3af'} : {visible: false};
      });
    }
    var update = {x: cols.map(function (c) { return c[e.x]; }), y: cols.map(function (c) { return c[e.y]; }),
                  error_x: errors(e.x), error_y: errors(e.y)};
    return Plotly.restyle(gd, update, idx).then(function () {
      var lay = {};
      [['xaxis', e.x], ['yaxis', e.y]].forEach(function (p) {
        var vals = [].concat.apply([], cols.map(function (c) { return c[p[1]]; }))
          .filter(function (v) { return v !== null && v > 0; });
        var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
        lay[p[0] + '.title.text'] = axisOf(f, p[1]).title;
        var log = vals.length && hi / lo > 30, ticks = log ? logTicks(lo, hi) : null;
        lay[p[0] + '.type'] = log ? 'log' : 'linear';
        lay[p[0] + '.tickmode'] = log ? 'array' : 'auto';
        lay[p[0] + '.tickvals'] = log ? ticks.vals : null;
        lay[p[0] + '.ticktext'] = log ? ticks.text : null;
        lay[p[0] + '.autorange'] = true;
      });
      return Plotly.relayout(gd, lay);
    }).then(function () { return drawFront(f); });
  }
  function drawFront(f) {
    var gd = document.getElementById(f.id), e = f.explore;
    var bx = axisOf(f, e.x).better, by = axisOf(f, e.y).better, pts = [];
    for (var i = 0; i < e.n_data; i++) {
      var xs = e.columns[i][e.x], ys = e.columns[i][e.y];
      for (var j = 0; j < xs.length; j++) if (xs[j] !== null && ys[j] !== null) pts.push([xs[j], ys[j]]);
    }
    var line = {x: [], y: []};
    if (bx && by) {
      var sx = bx === 'max' ? -1 : 1, sy = by === 'max' ? -1 : 1, best = Infinity;
      pts.sort(function (a, b) { return sx * (a[0] - b[0]) || sy * (a[1] - b[1]); });
      pts.forEach(function (p) {
        if (sy * p[1] < best) { best = sy * p[1]; line.x.push(p[0]); line.y.push(p[1]); }
      });
    }
    f.front = line;
    return Plotly.restyle(gd, {x: [line.x], y: [line.y]}, [e.n_data + 2]);
  }
  document.querySelectorAll('select[data-fig]').forEach(function (sel) {
    sel.addEventListener('change', function () {
      var f = byId[sel.getAttribute('data-fig')];
      f.explore[sel.getAttribute('data-axis')] = sel.value;
      setAxes(f).catch(function (err) { window.sweeperError('axes ' + f.id + ': ' + err); });
    });
  });

  // Parallel coordinates: drawn for the chosen context only; brushing narrows the highlighted lines
  function highlighted(gd) {
    var dims = gd.data[0].dimensions, n = dims[0].values.length, count = 0;
    for (var i = 0; i < n; i++) {
      var inside = dims.every(function (d) {
        var r = d.constraintrange;
        if (!r || !r.length) return true;
        var ranges = Array.isArray(r[0]) ? r : [r];
        return ranges.some(function (q) { return d.values[i] >= q[0] && d.values[i] <= q[1]; });
      });
      if (inside) count++;
    }
    return count;
  }
  function showCoords(f) {
    var gd = document.getElementById(f.id), note = document.querySelector('.lazy[data-for=' + f.id + ']');
    return Plotly.newPlot(gd, f.data, f.layout, config).then(function () {
      function tell() {
        var n = highlighted(gd);
        gd.setAttribute('data-highlighted', n);
        note.textContent = n + ' of ' + f.expected + ' settings highlighted: drag along an axis to filter, ' +
          'click outside a range to clear it.';
      }
      tell();
      gd.on('plotly_restyle', tell);
    });
  }
  var select = document.getElementById('ctx-select');
  if (select) select.addEventListener('change', function () {
    history.replaceState(null, '', select.value ? '#ctx=' + select.value : location.pathname + location.search);
    chooseContext(select.value);
  });
  var linked = /^#ctx=([\\w-]+)$/.exec(location.hash);  // a link to one context: report.html#ctx=ID
  if (select && linked && select.querySelector('option[value="' + linked[1] + '"]')) {
    select.value = linked[1]; chooseContext(linked[1]);
  }
  window.sweeperChooseContext = chooseContext;
  function chooseContext(id) {
    var jobs = [];
    document.querySelectorAll('div.ctx').forEach(function (div) {
      var on = !id || div.getAttribute('data-ctx') === id;
      div.style.display = on ? '' : 'none';
      div.querySelectorAll('.plot').forEach(function (gd) {
        var f = byId[gd.id];
        if (f && f.lazy) {
          if (on && id) jobs.push(showCoords(f));
          else if (gd.data) Plotly.purge(gd);
        } else if (on && gd.data) { jobs.push(Plotly.Plots.resize(gd)); }
      });
    });
    document.querySelectorAll('section.model').forEach(function (sec) {
      var any = Array.prototype.some.call(sec.querySelectorAll('div.ctx'), function (d) { return d.style.display !== 'none'; });
      sec.style.display = any ? '' : 'none';
    });
    return Promise.all(jobs).then(function () {
      document.getElementById('ctx-count').textContent = window.sweeperVisiblePoints() + ' points in the scatter plots shown';
    }, function (err) { window.sweeperError('context ' + id + ': ' + err); });
  }
"""
