"""The library's exceptions.

Every error a user can cause derives from :class:`ExplorerError`, carries a one-line ``hint``
that says how to fix it, and is turned into a friendly message by one helper in ``app/``.
"""

from __future__ import annotations


class ExplorerError(Exception):
    """Base class: a problem the user can fix. ``str(err)`` says what; ``err.hint`` says how."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} {self.hint}".strip()


class UnknownModel(ExplorerError, LookupError):
    """A model id that is neither in the catalog nor a folder under the model directory."""

    def __init__(self, model_id: str, suggestions: list[str]) -> None:
        self.model_id = model_id
        self.suggestions = suggestions
        hint = (
            "Did you mean: " + ", ".join(suggestions) + "?"
            if suggestions
            else "A Hub id has an owner (owner/name); see the Models page (or `python -m models.fetch --list`) for the catalog."
        )
        super().__init__(f"Unknown model {str(model_id)[:100]!r}: not in the catalog, and no folder of that name "
                         "under BFE_MODEL_DIR.", hint)


class InvalidModelId(ExplorerError, ValueError):
    """A model id or folder name that is malformed or would escape the model directory."""


class ModelUnavailable(ExplorerError):
    """The model exists in the catalog but its weights cannot be had right now."""


class InvalidCheckpoint(ModelUnavailable):
    """A checkpoint folder that cannot be loaded: no weights, no tokenizer, a corrupt config."""


class ModelTooLarge(InvalidCheckpoint):
    """A checkpoint whose config or tensor headers declare more parameters than the size budget (``BFE_MAX_PARAMS``)."""


class UnsafeCheckpoint(InvalidCheckpoint):
    """A checkpoint whose weights exist only as pickle files (.bin/.pt), which we never load."""


class UnsupportedTask(ExplorerError, ValueError):
    """The model has no trained head for the requested task (e.g. fill-mask on GPT-2)."""


class TrainingFailed(ExplorerError, RuntimeError):
    """Training stopped: the loss became NaN or infinite (the last good state is kept), or a checkpoint could not be
    saved (nothing half-written is left)."""


class AttentionUnavailable(ExplorerError, RuntimeError):
    """A model returned no attention weights (it was loaded without eager attention)."""


class ModelProcessFailed(ExplorerError, RuntimeError):
    """The model process stopped (a crash, out of memory, killed) and a restart did not bring the call back, or it
    raised an error that cannot be carried back as itself."""


class InvalidSetting(ExplorerError, ValueError):
    """A setting read from the environment has a value we cannot use."""


class InvalidConfig(ExplorerError, ValueError):
    """A model configuration or calculator input that cannot describe a real model or run."""


class UnsupportedArchitecture(ExplorerError, ValueError):
    """A ``model_type`` (or a head) the calculators do not know."""


class InvalidData(ExplorerError, ValueError):
    """Data points a fit cannot use: too few, not numbers, not positive, no spread."""


class FitFailed(ExplorerError, RuntimeError):
    """A non-linear fit that did not converge from any starting point."""


class InvalidText(ExplorerError, ValueError):
    """Input text a model cannot take: empty, or nothing left once control characters are removed."""


class InvalidOrder(ExplorerError, ValueError):
    """A factorization order that is not a permutation of the positions, or targets outside it."""


class MaskMissing(InvalidText):
    """Fill-mask text without a [MASK] (or with more than the limit)."""


class DatabaseUnavailable(ExplorerError, RuntimeError):
    """The results database cannot be used: unreachable, read-only, locked, or from a newer version."""


class InvalidResult(ExplorerError, ValueError):
    """A result (or an import file) that fails validation. ``errors`` lists (line, message); line is None for a single add."""

    def __init__(self, message: str, hint: str = "", errors: list[tuple[int | None, str]] | None = None) -> None:
        super().__init__(message, hint)
        self.errors = errors or []


class DuplicateResult(InvalidResult):
    """The same result (model, variant, task, metric, split, setting, source, table) is already stored."""


#: The longest text any model function takes, in characters: far past every model's token limit
#: (512 tokens is about 3,000 characters), so a longer text is a mistake or an attack, refused
#: before a tokenizer spends seconds on it.
MAX_TEXT_CHARS = 20_000
#: The longest line of a batch of texts (one per line), in characters: a request carries up to a hundred or so of them,
#: so a line is bounded far below :data:`MAX_TEXT_CHARS`.
MAX_LINE_CHARS = 1_000


def check_text_length(text: object, what: str = "text") -> None:
    """Raise :class:`InvalidText` when ``text`` is a string longer than :data:`MAX_TEXT_CHARS`."""
    if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
        raise InvalidText(f"The {what} is {len(text):,} characters long; at most {MAX_TEXT_CHARS:,} are taken.",
                          "Models read a few hundred words at most: shorten it.")


class UnknownTask(ExplorerError, LookupError):
    """A downstream task name that is not one of the built-in tasks (``analysis.tasks.BUILT_IN``)."""

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        self.name = name
        super().__init__(f"Unknown task {str(name)[:100]!r}.",
                         "Built-in tasks: " + ", ".join(known) + "; or upload your own CSV (columns text,label or text_a,text_b,label).")


class InvalidTaskFile(ExplorerError, ValueError):
    """An uploaded task CSV that cannot be used: too big, not UTF-8 text, a missing column, empty texts, one label
    or too many. ``lines`` holds the file's line numbers (1 = the header) of the rows at fault, when there are any."""

    def __init__(self, message: str, hint: str = "", lines: list[int] | None = None) -> None:
        super().__init__(message, hint)
        self.lines = lines or []


class BackendError(ExplorerError, RuntimeError):
    """The model backend (``BFE_BACKEND``) could not serve a call: base class of the four cases below."""


class BackendUnavailable(BackendError):
    """The model backend does not answer (down, restarting, or the address is wrong); the next call tries again."""


class BackendStarting(BackendUnavailable):
    """Nothing answers at the model backend's address yet (the connection is refused, or a proxy in front of it says
    502/503): it may be starting. A page waits for it a bounded time (``app.ui.calls``) before it gives up."""


class BackendRefused(BackendError):
    """The model backend refused the call: a wrong or missing token, or a request over its bounds."""


class BackendMismatch(BackendError):
    """The model backend runs another version of the app (or of its wire format) than this front end."""


class BackendTimeout(BackendError):
    """The model backend took longer than the call's time limit."""
