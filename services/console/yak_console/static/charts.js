// Live time-series charts on uPlot, fed by /metrics/history and the `yak:metrics` events.
//
// YakCharts.live(element, series, options): series is [{label, pick(metrics) -> number}];
// the chart starts with the kept history and appends each new sample. options.history
// overrides where the history comes from (a URL answering a list of metrics objects);
// options.interval the sampling interval in seconds (default: the console's, from the
// page's <html data-sample-interval-ms>); options.latest a metrics object the page was
// rendered from (no seq), drawn after the history when it is newer than its last sample.
//
// Samples are drawn as they were taken, never interpolated across time without one: two
// samples more than GAP_FACTOR intervals apart are not joined (a null point breaks the line),
// so a burst is a spike, not a slope from the last sample a minute earlier; a value with no
// neighbour to join (the first sample of a new group, one after a gap) is drawn as a dot.
// The pure parts (appendSample, isolated) are YakCharts' too; the element keeps its plot
// as `yakPlot` (uPlot instance: for the page's own scripts and the browser tests).
(function () {
  "use strict";
  var COLORS = ["#3b5bdb", "#2f9e44", "#e8590c", "#ae3ec9", "#1098ad", "#f08c00"];
  var MAX_POINTS = 600;
  var GAP_FACTOR = 2.5;

  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function sampleInterval() {
    var ms = Number(document.documentElement.getAttribute("data-sample-interval-ms"));
    return ms > 0 ? ms / 1000 : 2;
  }

  // Append one sample (time `at`, one value per series, null: none) to uPlot's columns
  // `data`; after more than `gap` seconds without a sample, a row of nulls first (halfway),
  // so the line breaks there. A sample not later than the last one is dropped (x must grow).
  // Returns how many rows were added.
  function appendSample(data, at, values, gap) {
    var xs = data[0];
    var last = xs.length ? xs[xs.length - 1] : null;
    if (last !== null && at <= last) return 0;
    var added = 0;
    if (last !== null && at - last > gap) {
      xs.push((last + at) / 2);
      for (var i = 1; i < data.length; i++) data[i].push(null);
      added++;
    }
    xs.push(at);
    values.forEach(function (value, i) { data[i + 1].push(typeof value === "number" ? value : null); });
    return added + 1;
  }

  // The indices of the values in `column` that have no value next to them: no line reaches
  // them, so they are drawn as points.
  function isolated(column) {
    var found = [];
    for (var i = 0; i < column.length; i++) {
      if (column[i] == null) continue;
      var before = i > 0 && column[i - 1] != null;
      var after = i + 1 < column.length && column[i + 1] != null;
      if (!before && !after) found.push(i);
    }
    return found;
  }

  function live(el, series, options) {
    if (!el || !window.uPlot) return null;
    options = options || {};
    var gap = GAP_FACTOR * (options.interval || sampleInterval());
    var data = [[]].concat(series.map(function () { return []; }));
    var plot = null;

    function push(metrics) {
      var values = series.map(function (s) { return s.pick(metrics); });
      appendSample(data, metrics.at, values, gap);
      while (data[0].length > MAX_POINTS) data.forEach(function (column) { column.shift(); });
    }

    function lonePoints(u, seriesIndex) {
      var found = isolated(u.data[seriesIndex]);
      return found.length ? found : null;
    }

    function build() {
      if (plot) plot.destroy();
      var axis = { stroke: css("--muted"), grid: { stroke: css("--border"), width: 1 }, ticks: { stroke: css("--border") } };
      plot = new uPlot({
        width: Math.max(200, el.clientWidth - 10),
        height: options.height || 200,
        series: [{}].concat(series.map(function (s, i) {
          var color = COLORS[i % COLORS.length];
          return {
            label: s.label, stroke: color, width: 2,
            points: { show: false, size: 6, fill: color, filter: lonePoints },
          };
        })),
        axes: [axis, Object.assign({ size: 60 }, axis)],
        scales: { y: { range: function (u, min, max) { return [0, Math.max(1, max * 1.1)]; } } },
      }, data, el);
      el.yakPlot = plot;
    }

    var seen = 0;
    fetch(options.history || "/metrics/history")
      .then(function (response) { return response.ok ? response.json() : []; })
      .catch(function () { return []; })
      .then(function (history) {
        history.forEach(function (metrics) { if (metrics.seq > seen) { push(metrics); seen = metrics.seq; } });
        if (options.latest) push(options.latest);  // dropped unless newer than the history
        build();
        document.addEventListener("yak:metrics", function (event) {
          if (event.detail.seq <= seen) return;
          seen = event.detail.seq;
          push(event.detail);
          plot.setData(data);
        });
        document.addEventListener("yak:theme", build);
        var width = el.clientWidth;
        window.addEventListener("resize", function () {
          if (el.clientWidth !== width) { width = el.clientWidth; plot.setSize({ width: Math.max(200, width - 10), height: options.height || 200 }); }
        });
      });
    return { element: el };
  }

  window.YakCharts = { live: live, appendSample: appendSample, isolated: isolated };
})();
