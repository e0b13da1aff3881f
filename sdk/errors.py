"""Typed errors: each names the bad value and what was expected."""

from __future__ import annotations


class NeuroedgeError(Exception):
    """Base class of every error neuroedge raises on purpose."""


class UnknownNameError(NeuroedgeError, KeyError):
    """A model or backend name that is not registered; the message lists the valid ones."""

    def __init__(self, kind: str, name: str, valid: list[str]) -> None:
        self.kind, self.name, self.valid = kind, name, sorted(valid)
        super().__init__(f"unknown {kind} {name!r}; valid {kind}s: {', '.join(self.valid)}")

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class ConfigError(NeuroedgeError, ValueError):
    """A --config key the model does not read; the message names it and lists the valid ones."""


class TrainingDiverged(ConfigError):
    """A training run whose loss became NaN or infinite: the message names the model, the phase
    and step, and the config keys that set the step size (a ConfigError: the run's values are
    what to change). Raised before any NaN weights are saved or any figure of them reported."""


class InputError(NeuroedgeError, ValueError):
    """Model inputs that do not fit the spec: the message names the input, the expected shape
    and dtype, and what was given."""


class ExportRefused(NeuroedgeError):
    """An export that would give a wrong artifact (e.g. hidden state), refused with a reason."""


class ArtifactError(NeuroedgeError):
    """A file on disk that cannot be read as the artifact it claims to be (corrupt, truncated)."""


class BackendUnavailable(NeuroedgeError):
    """The backend's probe failed; the message carries the probe's reason."""


class ParityError(NeuroedgeError):
    """A backend's outputs differ from the host reference by more than the model's tolerance."""


class PluginError(NeuroedgeError):
    """A registry entry that does not load (a third-party entry point whose module does not
    import, or lacks the attribute): the message names the entry, its group and value."""
