"""What a verdict can say: the claims, the labels, and :func:`label_for`, the one rule that turns an interval into a
label, which the comparison of two arms and the fitted exponents share."""

from __future__ import annotations

from enum import StrEnum

CLAIMS = {">": "beats", ">=": "is at least as good as"}


class Label(StrEnum):
    """What a verdict says. The value is the stable code the results database stores (``verdicts.label`` and each
    payload's ``verdict.label``; verdicts stored before this enum hold the same strings, so none is migrated); what a
    page shows is :data:`LABEL_TEXT`."""

    AGREES = "agrees"
    #: A fitted exponent or ratio with the paper's sign (or above its floor) whose interval is not within the band
    #: around the paper's value.
    AGREES_ON_DIRECTION = "agrees on direction only"
    CANNOT_TELL = "cannot tell at this budget"
    DISAGREES = "disagrees"
    NO_VERDICT = "no verdict"
    #: The label of a comparison that no claim is decided on (the effect over random initialisation): an effect and
    #: its interval, shown for context, never "agrees" or "disagrees".
    DESCRIPTIVE = "descriptive (no verdict)"


#: How a page writes each label.
LABEL_TEXT = {Label.AGREES: "agrees", Label.AGREES_ON_DIRECTION: "agrees on direction only",
              Label.CANNOT_TELL: "cannot tell at this budget", Label.DISAGREES: "disagrees", Label.NO_VERDICT: "no verdict",
              Label.DESCRIPTIVE: "descriptive (no verdict)"}
#: The labels as names the verdict modules use.
AGREES, AGREES_ON_DIRECTION, CANNOT_TELL, DISAGREES, NO_VERDICT, DESCRIPTIVE = (
    Label.AGREES, Label.AGREES_ON_DIRECTION, Label.CANNOT_TELL, Label.DISAGREES, Label.NO_VERDICT, Label.DESCRIPTIVE)
LABELS = (AGREES, AGREES_ON_DIRECTION, CANNOT_TELL, DISAGREES, NO_VERDICT)
MIN_SEEDS = 2
LEVEL = 0.95


def label_for(claim: str, margin: float, low: float, high: float) -> Label:
    """:data:`AGREES` when the interval [``low``, ``high``] lies wholly on the claim's side of its boundary (0 for
    ``">"``, −``margin`` for ``">="``), :data:`DISAGREES` when wholly on the other, else :data:`CANNOT_TELL`."""
    floor = 0.0 if claim == ">" else -margin  # the paper's "no" side begins here
    if low > floor:
        return AGREES
    if high < floor:
        return DISAGREES
    return CANNOT_TELL
