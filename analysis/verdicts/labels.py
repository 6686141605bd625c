"""What a verdict can say: the claims, the labels, and :func:`label_for`, the one rule that turns an interval into a
label, which the comparison of two arms and the fitted exponents share."""

from __future__ import annotations

CLAIMS = {">": "beats", ">=": "is at least as good as"}
AGREES, CANNOT_TELL, DISAGREES, NO_VERDICT = "agrees", "cannot tell at this budget", "disagrees", "no verdict"
#: A fitted exponent with the paper's sign whose interval leaves out the paper's value.
AGREES_ON_DIRECTION = "agrees on direction only"
LABELS = (AGREES, AGREES_ON_DIRECTION, CANNOT_TELL, DISAGREES, NO_VERDICT)
MIN_SEEDS = 2
LEVEL = 0.95
#: The label of a comparison that no claim is decided on (the effect over random initialisation): an effect and
#: its interval, shown for context, never "agrees" or "disagrees".
DESCRIPTIVE = "descriptive (no verdict)"


def label_for(claim: str, margin: float, low: float, high: float) -> str:
    """:data:`AGREES` when the interval [``low``, ``high``] lies wholly on the claim's side of its boundary (0 for
    ``">"``, −``margin`` for ``">="``), :data:`DISAGREES` when wholly on the other, else :data:`CANNOT_TELL`."""
    floor = 0.0 if claim == ">" else -margin  # the paper's "no" side begins here
    if low > floor:
        return AGREES
    if high < floor:
        return DISAGREES
    return CANNOT_TELL
