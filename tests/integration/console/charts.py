"""What a console chart shows, read from its canvas: the pixels of a series' colour in a time
range, and a history of samples to serve in place of the console's ``/metrics/history``.

The chart element keeps its uPlot instance as ``yakPlot`` (``static/charts.js``); positions
come from its scales, pixels from its canvas, so a test sees what a user sees (a line drawn
or not), not what the code meant to draw.
"""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import Page, Route

__all__ = ["FIRST_SERIES_RGB", "series_pixels", "serve_history", "wait_for_chart"]

#: ``COLORS[0]`` of charts.js (#3b5bdb): the first series' stroke.
FIRST_SERIES_RGB = (59, 91, 219)

_PIXELS = """([selector, from, to, atLeast, rgb]) => {
  const u = document.querySelector(selector).yakPlot;
  const left = Math.max(u.bbox.left, Math.ceil(u.valToPos(from, "x", true)));
  const right = Math.min(u.bbox.left + u.bbox.width, Math.floor(u.valToPos(to, "x", true)));
  const top = u.bbox.top;
  const bottom = atLeast === null
    ? top + u.bbox.height : Math.floor(u.valToPos(atLeast, "y", true));
  if (right <= left || bottom <= top) return 0;
  const pixels = u.ctx.getImageData(left, top, right - left, bottom - top).data;
  let count = 0;
  for (let i = 0; i < pixels.length; i += 4) {
    const distance = Math.abs(pixels[i] - rgb[0]) + Math.abs(pixels[i + 1] - rgb[1])
      + Math.abs(pixels[i + 2] - rgb[2]);
    if (pixels[i + 3] > 128 && distance < 90) count++;
  }
  return count;
}"""


def serve_history(page: Page, samples: list[dict[str, Any]]) -> None:
    """Answer the page's ``/metrics/history`` with ``samples`` (give them ``seq``-s above the
    console's own, so its live samples are not appended to them)."""
    body = json.dumps(samples)

    def answer(route: Route) -> None:
        route.fulfill(status=200, content_type="application/json", body=body)

    page.route("**/metrics/history", answer)


def wait_for_chart(page: Page, selector: str, points: int) -> None:
    """Until the chart at ``selector`` is drawn with at least ``points`` samples."""
    page.wait_for_function(
        "([selector, points]) => { const el = document.querySelector(selector);"
        " return !!(el && el.yakPlot && el.yakPlot.data[0].length >= points); }",
        arg=[selector, points],
    )


def series_pixels(
    page: Page,
    selector: str,
    from_s: float,
    to_s: float,
    *,
    at_least: float | None = None,
    rgb: tuple[int, int, int] = FIRST_SERIES_RGB,
) -> int:
    """Pixels of the series colour ``rgb`` drawn between the times ``from_s`` and ``to_s``
    (epoch seconds), anywhere in the plot's height or, with ``at_least``, above that value."""
    count: int = page.evaluate(_PIXELS, [selector, from_s, to_s, at_least, list(rgb)])
    return count
