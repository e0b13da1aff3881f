"""Records that cross ConRAD's stages: exemplars, guardian verdicts, plans and repair attempts."""

from __future__ import annotations

from dataclasses import dataclass, field

VERDICTS = ("useful", "not_useful", "harmful")
STAGES = ("file_think", "func_think", "edit_think", "patch_think")


class ConradError(ValueError):
    """Bad input to the repair pipeline (a file, a SEARCH block, a config value)."""


class NoAnswer(ConradError):
    """A language model gave no usable answer at a stage (after its re-asks): the repair
    pass ends there without a patch, as an LLM pass whose reply cannot be parsed does."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


@dataclass(frozen=True)
class Exemplar:
    """A fixed historical issue: what the reporter wrote, the verified fix and its symptom."""

    name: str  # the function the fix edited
    path: str  # the file the fix edited
    issue: str  # the historical issue text
    buggy: str  # the function before the fix
    fixed: str  # the function after the fix (the verified outcome)
    symptom: str  # sandbox.diagnose of its failing test before the fix
    family: str = ""  # ground truth, for scoring only; no stage reads it


@dataclass(frozen=True)
class Verdict:
    """The guardian's decision on one exemplar for one issue."""

    label: str  # one of VERDICTS
    score: float  # usefulness in [-1, 1]: harmful <= -0.1 < not useful < 0.1 <= useful
    reason: str

    def __post_init__(self) -> None:
        if self.label not in VERDICTS:
            raise ValueError(f"verdict {self.label!r}; expected one of {VERDICTS}")
        if not -1.0 <= self.score <= 1.0:
            raise ValueError(f"usefulness score {self.score} outside [-1, 1]")


@dataclass(frozen=True)
class Plan:
    """A repair plan distilled backwards from an exemplar's verified fix (one text per stage)."""

    exemplar: str  # the exemplar's function name
    shape: str  # the fix shape (operators.SHAPES), "" when no single shape reproduces the fix
    params: tuple[str, ...]  # the shape's abstract parameters
    site_kind: str  # the AST node kind the fix edited ("Slice", "Compare", ...)
    steps: tuple[str, ...] = field(default=())  # "Step k: ..." lines, one per stage


@dataclass(frozen=True)
class Attempt:
    """One pass of the four-stage repair: where it looked, what it wrote, what it cost."""

    path: str  # the file chosen by file_think
    function: str  # the function chosen by func_think
    shape: str  # the shape of the edit ("" when the function admits none)
    search: str  # the SEARCH block (the function's current source)
    replace: str  # the REPLACE block
    calls: int  # model calls spent (one per stage)
    unanswered: str = ""  # the stage the model gave no usable answer at ("" when none)
