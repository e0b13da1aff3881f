"""Check inputs against a ModelSpec and bind its symbolic axes ("batch", "T", ...)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from neuroedge.types import IOSpec, ModelSpec


def bind_inputs(spec: ModelSpec, inputs: Mapping[str, Any]) -> dict[str, int]:
    """Validate ``inputs`` (numpy arrays or tensors) and return ``{symbol: size}``.

    Raises ``ValueError`` naming the input, the expected shape and dtype, and what was given.
    """
    expected = {io.name for io in spec.inputs}
    missing, extra = expected - set(inputs), set(inputs) - expected
    if missing or extra:
        raise ValueError(
            f"model {spec.name!r} takes inputs {sorted(expected)}; missing {sorted(missing)}, "
            f"unexpected {sorted(extra)}"
        )
    symbols: dict[str, int] = {}
    for io in spec.inputs:
        _bind_one(spec.name, io, inputs[io.name], symbols)
    return symbols


def _bind_one(model: str, io: IOSpec, value: Any, symbols: dict[str, int]) -> None:
    shape = tuple(int(d) for d in getattr(value, "shape", ()))
    dtype = str(getattr(value, "dtype", type(value).__name__)).replace("torch.", "")
    where = f"model {model!r} input {io.name!r}: expected shape {io.describe()}"
    if dtype != io.dtype:
        raise ValueError(f"{where}, got dtype {dtype}")
    if len(shape) != len(io.shape):
        raise ValueError(
            f"{where}, got shape {list(shape)} ({len(shape)} dims, not {len(io.shape)})"
        )
    for axis, (want, got) in enumerate(zip(io.shape, shape)):
        if isinstance(want, int):
            if want != got:
                raise ValueError(f"{where}, got shape {list(shape)} (axis {axis} is {got})")
        elif symbols.setdefault(want, got) != got:
            raise ValueError(
                f"{where}, got shape {list(shape)}: axis {axis} ({want}) is {got} "
                f"but another input fixed {want}={symbols[want]}"
            )


def resolve_shape(io: IOSpec, symbols: Mapping[str, int]) -> tuple[int, ...]:
    """The concrete shape of ``io`` once its symbols are bound; unknown symbols raise."""
    try:
        return tuple(d if isinstance(d, int) else symbols[d] for d in io.shape)
    except KeyError as err:
        raise ValueError(
            f"output {io.describe()} uses axis {err.args[0]!r}, which no input "
            f"binds (bound: {dict(symbols)})"
        ) from None


def check_finite(
    values: Any, name: str, columns: Sequence[str] | None = None, hint: str = ""
) -> Any:
    """``values`` as a float64 array; ValueError naming the first NaN/inf by its 0-based row
    (and column, with its name from ``columns`` when given) and value, then ``hint``."""
    import numpy as np

    arr = np.asarray(values, np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        where = " ".join(f"{axis} {i}" for axis, i in zip(("row", "column"), index))
        named = f", {columns[index[1]]}" if len(index) > 1 and columns is not None else ""
        raise ValueError(f"{name} {where} (0-based{named}) value {arr[index]} is not finite{hint}")
    return arr
