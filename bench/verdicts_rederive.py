"""The committed verdicts before and after the rules of issue 54, side by side, from the per-seed numbers the committed
bench outputs print (``bench/results/verdicts-*.txt``).

    python bench/verdicts_rederive.py > bench/results/verdicts-before-after.txt

For each two-arm measure of each file: the label the file printed (the old rules, with the item term where it had
per-item scores), its seeds-only label, and the label the current rules give on the same per-seed numbers (seeds only: the files keep no per-item
scores): no decisive label from no spread, the precondition where its floor is printed per seed (the random-init
control for downstream and probe scores, chance for SOP), and Holm over a preset's primaries is left to the report
(the files' primaries each stand alone here). A loss claim's precondition needs each run's loss at the [MASK]
inputs, which the files print only as arm b's mean: shown, and marked "per seed not printed".
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.verdicts import verdict  # noqa: E402
from analysis.verdicts.ratios import gain_interval  # noqa: E402
from services.lab.claims import CHANCE, precondition_of  # noqa: E402
from services.lab.presets import CLAIMS  # noqa: E402

NUMBERS = re.compile(r"^\s+([\w\- ()]+): ((?:-?\d+\.\d+(?:, )?)+)$")


def blocks(text: str):
    """(measure label, statement, {arm: scores}, printed seeds-only label, printed label, [MASK] sentence) per measure."""
    current = None
    for line in text.splitlines():
        if line.startswith("  [") and "] " in line:
            if current:
                yield current
            label, statement = line.strip()[1:].split("] ", 1)
            current = {"label": label, "statement": statement, "scores": {}, "seeds_only": "", "printed": "", "mask": None}
        elif current is not None:
            m = NUMBERS.match(line)
            if m:
                current["scores"][m.group(1).strip()] = [float(x) for x in m.group(2).split(", ")]
            elif line.strip().startswith("→"):
                body = line.strip()[1:].strip()
                body = body.split("). ", 1)[1] if body.startswith("Lower is better") else body
                current["printed"] = body.split(":", 1)[0].lower()
                mask = re.search(r"(\w+) scores (\d+\.\d+) (?:and|against) the corpus's token counts'? (\d+\.\d+)", line)
                current["mask"] = (mask.group(1), float(mask.group(2)), float(mask.group(3))) if mask else None
            elif "seeds-only 95% rule" in line:
                current["seeds_only"] = line.split(":", 1)[1].split(",", 1)[0].strip()
    if current:
        yield current


def claim_for(preset: str, statement: str):
    return next((c for c in CLAIMS.get(preset, ()) if c.statement == statement), None)


def main() -> None:
    changed = 0
    for path in sorted((ROOT / "bench/results").glob("verdicts-*.txt")):
        text = path.read_text(encoding="utf-8")
        head = re.search(r"^== \S+ \(([\w-]+), (\w+) budget\)", text, re.M)
        if not head:
            continue
        preset = head.group(1)
        for b in blocks(text):
            claim = claim_for(preset, b["statement"])
            if claim is None or claim.a not in b["scores"] or claim.b not in b["scores"]:
                continue
            a, bb = b["scores"][claim.a], b["scores"][claim.b]
            loss = b["label"] == "Held-out loss"
            sign = -1.0 if loss else 1.0
            family = 3 if "Bonferroni over 3" in text and b["label"] not in ("Held-out loss", "SOP accuracy (held-out pairs)",
                                                                             "Downstream: average accuracy over the suite's tasks") else 1
            if len(a) != len(bb) or len(a) < 2:
                continue
            v = verdict([sign * x for x in a], [sign * x for x in bb], claim.op, claim.margin, family=family)
            new, why = v.label, ("no measurable spread" if v.no_spread else "")
            measure = {"SOP accuracy (held-out pairs)": "sop_accuracy", "Held-out loss": "held_out_loss"}.get(
                b["label"], "probe:pos" if b["label"].startswith("Frozen probe") else "downstream:x")
            pre = precondition_of(measure)
            arms = (claim.a, claim.b) if claim.op == ">=" else (claim.a,)
            notes = []
            for arm in arms:
                controls = {k: v for k, v in b["scores"].items() if k.startswith("random init")}
                kind = "electra" if arm == "electra" else "bert"
                ctrl = (next(iter(controls.values())) if len(controls) == 1 else controls.get(f"random init ({kind})"))
                if pre and pre.floor == "control" and ctrl:
                    g, lo, hi = gain_interval(b["scores"][arm], ctrl)
                elif pre and pre.floor == "chance":
                    g, lo, hi = gain_interval(b["scores"][arm], [CHANCE[measure]] * len(b["scores"][arm]))
                else:
                    m = b["mask"]
                    if m and m[0] == arm:  # only arm b's means are printed: a mean below the material gain fails
                        gain = m[2] - m[1]
                        notes.append(f"{arm}: mean {gain:+.3f} nats below the counts (per seed not printed)")
                        if gain < pre.min_gain and new != "no verdict":
                            new, why = "cannot tell at this budget", "precondition"
                    else:
                        notes.append(f"{arm}: per seed not printed")
                    continue
                ok = lo > 0 and g >= pre.min_gain
                notes.append(f"{arm} {g:+.3f} [{lo:+.3f}, {hi:+.3f}] {'holds' if ok else 'fails'}")
                if not ok and new != "no verdict":
                    new, why = "cannot tell at this budget", "precondition"
            old = b["printed"]
            mark = "CHANGED" if old != new else "same"
            changed += old != new
            print(f"{path.name:44s} {b['label'][:40]:40s} printed: {old:27s} (seeds only: {b['seeds_only'] or '-':27s}) "
                  f"now: {new:27s} {mark}"
                  + (f" ({why})" if why and old != new else "") + f"; precondition: {'; '.join(notes) or 'none'}")
    print(f"\n{changed} printed label(s) differ from the current rules' (seeds only: an item term can widen a few). "
          "μTransfer: bench/results/transfer-rule.txt; ratios and trends: docs/lab.md.")


if __name__ == "__main__":
    main()
