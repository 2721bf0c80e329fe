// Yak console: theme toggle, the live event stream, live counters. No framework, no build.
(function () {
  "use strict";

  function setTheme(dark) {
    document.documentElement.setAttribute("data-theme", dark ? "dark" : "light");
    try { localStorage.setItem("yak-theme", dark ? "dark" : "light"); } catch (e) { /* private mode */ }
    // The button's label follows data-theme in CSS (app.css): it names the other theme.
    document.dispatchEvent(new CustomEvent("yak:theme", { detail: { dark: dark } }));
  }

  function formatRate(value) {
    if (value >= 1000) return (value / 1000).toFixed(1) + "k/s";
    return value ? value.toFixed(1) + "/s" : "0/s";
  }

  function applyMetrics(metrics) {
    document.querySelectorAll("[data-live]").forEach(function (el) {
      var value = metrics[el.getAttribute("data-live")];
      if (typeof value !== "number") return;
      el.textContent = el.getAttribute("data-format") === "rate" ? formatRate(value) : value.toLocaleString("en-US");
    });
  }

  var source = null;

  function open() {
    source = new EventSource("/events");
    source.addEventListener("health", function (event) {
      var banner = document.getElementById("health-banner");
      if (banner) banner.innerHTML = event.data;
    });
    source.addEventListener("metrics", function (event) {
      var metrics = JSON.parse(event.data);
      applyMetrics(metrics);
      document.dispatchEvent(new CustomEvent("yak:metrics", { detail: metrics }));
    });
  }

  function connect() {
    // No banner: the login page, which has no session to stream with.
    if (!window.EventSource || !document.getElementById("health-banner")) return;
    open();
    // Close the stream as soon as the page is being left (a link, a form's submit, a
    // redirect): a stream still open when the navigation tears the page down is logged by
    // the browser as an interrupted response (ERR_INCOMPLETE_CHUNKED_ENCODING). When the
    // page stays after all (the link was a download), the stream opens again at the user's
    // next touch of the page, or after 10 s — not sooner: a slow navigation (a busy server)
    // must not find a fresh stream open when it finally tears the page down.
    var leaving = false;
    function reopen() {
      if (!source && !leaving) open();
    }
    window.addEventListener("beforeunload", function () {
      if (source) source.close();
      source = null;
      ["pointerdown", "keydown"].forEach(function (kind) {
        window.addEventListener(kind, reopen, { once: true });
      });
      setTimeout(reopen, 10000);
    });
    window.addEventListener("pagehide", function () {
      leaving = true;
      if (source) source.close();
    });
    window.addEventListener("pageshow", function (event) {
      leaving = false;  // back from the bfcache: the page is live again
      if (event.persisted) reopen();
    });
  }

  // htmx 2 swaps only 2xx answers by default; the console answers a refused form or a failed
  // lookup with a 4xx fragment that explains why, so swap those too (without logging them).
  if (window.htmx) {
    htmx.config.responseHandling = [
      { code: "204", swap: false },
      { code: "[23]..", swap: true },
      { code: "[45]..", swap: true, error: false },
    ];
  }

  document.addEventListener("DOMContentLoaded", function () {
    var toggle = document.getElementById("theme-toggle");
    if (toggle) {
      toggle.addEventListener("click", function () {
        setTheme(document.documentElement.getAttribute("data-theme") !== "dark");
      });
    }
    connect();
  });

  window.YakConsole = { setTheme: setTheme, formatRate: formatRate };
})();
