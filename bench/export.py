"""Slide export times (analysis.export): one chart as PNG and SVG, and a 20-item deck and handout.

    python bench/export.py

Prints medians of 5 runs after a warm-up (the first call starts the kaleido server: reported apart),
against the reference of serialising the same figure to JSON in the same process.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    import plotly.graph_objects as go

    from analysis import export
    from analysis.export import PackItem
    from bench.timing import interleaved

    fig = go.Figure(go.Scatter(x=list(range(50)), y=[i * i for i in range(50)], mode="lines+markers"))
    fig.update_layout(title="Loss against compute", width=1000, height=560)
    t0 = time.perf_counter()
    export.to_png(fig)
    first = time.perf_counter() - t0

    def fresh(i: int) -> go.Figure:  # a different figure each run, so the render cache does not answer
        return go.Figure(fig).update_layout(title=f"Loss against compute {i} {time.perf_counter()}")

    json_s, png_s, svg_s = interleaved(lambda: fresh(0).to_json(), lambda: export.to_png(fresh(1)),
                                       lambda: export.to_svg(fresh(2)), runs=5)
    items = [PackItem(f"Chart {i}", "A caption", ("Kaplan et al. 2020, Figure 1",), figure=fresh(i).to_json())
             for i in range(10)] + [PackItem(f"Table {i}", "A table", ("Devlin et al. 2019, Table 1",),
                                             table=tuple({"model": f"m{j}", "score": j} for j in range(8))) for i in range(10)]
    runs = []
    for _ in range(3):
        export._rendered.clear()
        t0 = time.perf_counter()
        export.slide_deck(items)
        runs.append(time.perf_counter() - t0)
    print(f"first image (starts the kaleido server and Chromium): {first:.2f} s")
    print(f"figure to JSON (reference): {1000 * json_s:.1f} ms")
    print(f"PNG at 2x: {1000 * png_s:.0f} ms   SVG: {1000 * svg_s:.0f} ms")
    print(f"20-item deck (10 charts rendered, 10 tables): {statistics.median(runs):.2f} s (median of 3)")


if __name__ == "__main__":
    main()
