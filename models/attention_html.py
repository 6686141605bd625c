"""bertviz's head and model views as standalone HTML that works with no network.

bertviz (``html_action="return"``) loads require.js, d3 and jQuery from CDNs and writes the
weights as full-precision JSON (54 MB for 128 tokens). Here the three libraries are inlined from
``models/vendor/`` (their URLs de-linked), the weights are quantised to one byte each (1/255 steps,
invisible in a view drawn with line opacity) and base64-packed, and ``<`` in the data is written
``\u003c`` so no token — ``</script>`` or ``<!--`` included — can end the script early.
"""

from __future__ import annotations

import base64
import json
import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from models.attention import AttentionResult

VENDOR = Path(__file__).resolve().parent / "vendor"
VIEWS = ("head", "model")
_URL = re.compile(r"https?://(?!www\.w3\.org/)")  # W3C namespace URIs are identifiers d3 needs, never fetched
_UNPACK = """
function __bfeUnpack(b64, shape) {
  const bin = atob(b64); const [L, H, R, C] = shape; let k = 0; const out = [];
  for (let l = 0; l < L; l++) { const layer = [];
    for (let h = 0; h < H; h++) { const head = [];
      for (let i = 0; i < R; i++) { const row = new Array(C);
        for (let j = 0; j < C; j++) { row[j] = bin.charCodeAt(k++) / 255; }
        head.push(row); }
      layer.push(head); }
    out.push(layer); }
  return out;
}
"""


@lru_cache(maxsize=1)
def vendored_js() -> str:
    """d3 and jQuery as globals, then require.js, then AMD names for the two globals."""
    parts = []
    for name in ("d3-5.7.0.min.js", "jquery-2.2.4.min.js", "require-2.3.6.js"):
        src = _URL.sub("", (VENDOR / name).read_text(encoding="utf-8")).replace("</", "<\\/")
        parts.append(f"<script>/* {name}: see models/vendor/README.md for its licence */\n{src}\n</script>")
    parts.append("<script>define('d3', [], function () { return window.d3; });"
                 "define('jquery', [], function () { return window.jQuery; });</script>")
    return "\n".join(parts)


def _pack(attn: list) -> tuple[str, list[int]]:
    arr = np.asarray(attn, dtype=np.float32)
    q = np.clip(np.rint(arr * 255), 0, 255).astype(np.uint8)
    return base64.b64encode(q.tobytes()).decode("ascii"), list(arr.shape)


def bertviz_html(result: AttentionResult, view: str = "head", layer: int | None = None, heads: list[int] | None = None,
                 only_layers: list[int] | None = None) -> str:
    """The bertviz ``head`` or ``model`` view of ``result`` as one offline HTML document.

    ``only_layers`` keeps just those layers (the size grows with layers × T²: use it for long inputs).
    """
    import torch
    from bertviz import head_view, model_view

    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}, not {view!r}")
    attention = [torch.from_numpy(result.weights[i][None]) for i in range(result.layers)]  # L × (1, H, T, T)
    kwargs = {"sentence_b_start": result.sentence_b_start, "prettify_tokens": False, "html_action": "return",
              "include_layers": only_layers}
    if view == "head":
        if only_layers and layer not in only_layers:
            layer = only_layers[0]
        html = head_view(attention, list(result.tokens), layer=layer, heads=heads, **kwargs).data
    else:
        html = model_view(attention, list(result.tokens), **kwargs).data
    # bertviz's own <script src=...require.js> and require.config with CDN paths go; the vendored copies come in.
    html = re.sub(r'<script src="https://cdnjs\.cloudflare\.com/[^"]*"></script>', "", html)
    html = re.sub(r"require\.config\(\{.*?\}\);", "", html, count=1, flags=re.S)
    start = html.index("const params = ") + len("const params = ")
    end = html.index("; // HACK: ", start)
    line_end = html.index("\n", end)  # bertviz's comment on that line holds a second copy of the JSON: drop it
    params = json.loads(html[start:end])
    for entry in params["attention"]:
        entry["attn_b64"], entry["attn_shape"] = _pack(entry.pop("attn"))
    # "<" only occurs inside JSON strings: as \u003c no token can close the script or open an HTML comment in it.
    literal = json.dumps(params, ensure_ascii=True, separators=(",", ":")).replace("<", "\\u003c")
    unpack = ("(function () { const p = " + literal + "; p.attention.forEach(function (a) {"
              " a.attn = __bfeUnpack(a.attn_b64, a.attn_shape); delete a.attn_b64; }); return p; })()")
    html = html[:start] + unpack + ";" + html[line_end:]
    html = html.replace("<script type=\"text/javascript\">", "<script type=\"text/javascript\">" + _UNPACK, 1)
    html = _URL.sub("", html)  # bertviz's comments cite GitHub
    title = f"bertviz {view} view: {result.model_id}".replace("<", "&lt;")
    filename = re.sub(r"[^A-Za-z0-9._-]+", "-", f"bertviz-{view}-{result.model_id}")[:100] + ".svg"
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>\n{vendored_js()}\n</head>"
            f"<body style='background:#fff'>\n{_SNAPSHOT.replace('__FILE__', filename)}\n{html}\n</body></html>")


# bertviz draws its views as SVG in the page: the button saves what is on screen (the chosen layer and
# heads) as a standalone SVG, in the browser, with no server and no network (bertviz has no image export).
_SNAPSHOT = """<div style="font-family:sans-serif;margin:4px 0 8px 0">
<button id="bfe-svg-snapshot" style="padding:4px 10px;border:1px solid #bbb;border-radius:6px;background:#fafafa;cursor:pointer">
Download this view as SVG</button></div>
<script>
document.getElementById('bfe-svg-snapshot').addEventListener('click', function () {
  const svgs = Array.from(document.querySelectorAll('svg'));
  if (!svgs.length) { return; }
  const area = function (e) { const r = e.getBoundingClientRect(); return r.width * r.height; };
  const svg = svgs.sort(function (a, b) { return area(b) - area(a); })[0].cloneNode(true);
  svg.setAttribute('xmlns', 'http://www.w3.org/2000/svg');
  svg.setAttribute('style', 'background:#fff;font-family:sans-serif');
  const text = '<?xml version="1.0" encoding="UTF-8"?>\\n' + new XMLSerializer().serializeToString(svg);
  const link = document.createElement('a');
  link.href = URL.createObjectURL(new Blob([text], {type: 'image/svg+xml'}));
  link.download = '__FILE__';
  document.body.appendChild(link); link.click(); link.remove();
});
</script>"""
