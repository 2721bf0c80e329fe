// Live time-series charts on uPlot, fed by /metrics/history and the `yak:metrics` events.
//
// YakCharts.live(element, series, options): series is [{label, pick(metrics) -> number}];
// the chart starts with the kept history and appends each new sample. options.history
// overrides where the history comes from (a URL answering a list of metrics objects).
(function () {
  "use strict";
  var COLORS = ["#3b5bdb", "#2f9e44", "#e8590c", "#ae3ec9", "#1098ad", "#f08c00"];
  var MAX_POINTS = 600;

  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function live(el, series, options) {
    if (!el || !window.uPlot) return null;
    options = options || {};
    var data = [[]].concat(series.map(function () { return []; }));
    var plot = null;

    function push(metrics) {
      data[0].push(metrics.at);
      series.forEach(function (s, i) {
        var value = s.pick(metrics);
        data[i + 1].push(typeof value === "number" ? value : null);
      });
      if (data[0].length > MAX_POINTS) data.forEach(function (column) { column.shift(); });
    }

    function build() {
      if (plot) plot.destroy();
      var axis = { stroke: css("--muted"), grid: { stroke: css("--border"), width: 1 }, ticks: { stroke: css("--border") } };
      plot = new uPlot({
        width: Math.max(200, el.clientWidth - 10),
        height: options.height || 200,
        series: [{}].concat(series.map(function (s, i) {
          return { label: s.label, stroke: COLORS[i % COLORS.length], width: 2, points: { show: false } };
        })),
        axes: [axis, Object.assign({ size: 60 }, axis)],
        scales: { y: { range: function (u, min, max) { return [0, Math.max(1, max * 1.1)]; } } },
      }, data, el);
    }

    var seen = 0;
    fetch(options.history || "/metrics/history")
      .then(function (response) { return response.ok ? response.json() : []; })
      .catch(function () { return []; })
      .then(function (history) {
        history.forEach(function (metrics) { if (metrics.seq > seen) { push(metrics); seen = metrics.seq; } });
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

  window.YakCharts = { live: live };
})();
