"""Check inputs against a ModelSpec and bind its symbolic axes ("batch", "T", ...)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from neuroedge.errors import InputError
from neuroedge.types import IOSpec, ModelSpec


def bind_inputs(
    spec: ModelSpec,
    inputs: Mapping[str, Any],
    finite: bool = False,
    fixed: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Validate ``inputs`` (numpy arrays or tensors) and return ``{symbol: size}``; every
    symbolic axis ("batch", "T", ...) must be at least 1 and every value inside the input's
    ``bounds`` when it declares them (token ids). ``finite``: float inputs hold no
    NaN or inf (the torch and ONNX programs would compute on them silently; host functions
    check their own inputs, naming rows and columns). ``fixed``: symbols the built program
    already fixes (a TorchProgram's ``meta["axes"]``, e.g. ``{"d_model": 32}``).

    Raises ``InputError`` (a ValueError) naming the input, the expected shape and dtype, and
    what was given.
    """
    expected = {io.name for io in spec.inputs}
    if not isinstance(inputs, Mapping):
        raise InputError(
            f"model {spec.name!r}: inputs are a mapping {{name: array}} of {sorted(expected)}, "
            f"got a {type(inputs).__name__}"
        )
    check_input_names(spec, inputs)
    symbols: dict[str, int] = dict(fixed or {})
    built = set(fixed or ())
    for io in spec.inputs:
        _bind_one(spec.name, io, inputs[io.name], symbols, built)
        if finite and io.dtype.startswith("float"):
            _check_finite_input(spec.name, io, inputs[io.name])
        if io.bounds is not None:
            _check_bounds(spec.name, io, inputs[io.name])
    return symbols


def check_input_names(spec: ModelSpec, names: Any) -> None:
    """InputError unless ``names`` (a mapping's keys, an archive's members) are exactly the
    spec's input names, listing the missing and unexpected ones."""
    expected, given = {io.name for io in spec.inputs}, set(names)
    missing, extra = expected - given, given - expected
    if missing or extra:
        raise InputError(
            f"model {spec.name!r} takes inputs {sorted(expected)}; missing {sorted(missing)}, "
            f"unexpected {sorted(extra)}"
        )


def as_numpy(value: Any) -> Any:
    """An input as a numpy array: a torch tensor detached to the CPU (it may require grad)."""
    import numpy as np

    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


def _bind_one(model: str, io: IOSpec, value: Any, symbols: dict[str, int], built: set[str]) -> None:
    where = f"model {model!r} input {io.name!r}: expected shape {io.describe()}"
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        raise InputError(f"{where} as a numpy array or torch tensor, got a {type(value).__name__}")
    _check_unmasked(model, io, value)
    shape = tuple(int(d) for d in value.shape)
    dtype = str(value.dtype).replace("torch.", "")
    if dtype != io.dtype:
        raise InputError(f"{where}, got dtype {dtype}")
    if len(shape) != len(io.shape):
        raise InputError(
            f"{where}, got shape {list(shape)} ({len(shape)} dims, not {len(io.shape)})"
        )
    for axis, (want, got) in enumerate(zip(io.shape, shape)):
        if isinstance(want, int):
            if want != got:
                raise InputError(f"{where}, got shape {list(shape)} (axis {axis} is {got})")
        elif got < 1:
            raise InputError(f"{where}, got shape {list(shape)}: axis {axis} ({want}) is empty")
        elif symbols.setdefault(want, got) != got:
            by = (
                "the built model"
                if want in built
                else "its own axis " + str(io.shape.index(want))
                if want in io.shape[:axis]
                else "another input"
            )
            raise InputError(
                f"{where}, got shape {list(shape)}: axis {axis} ({want}) is {got} "
                f"but {by} fixed {want}={symbols[want]}"
            )


def _check_unmasked(model: str, io: IOSpec, value: Any) -> None:
    """A masked array (netCDF, ``genfromtxt(usemask=True)``) with masked values: its data
    there is arbitrary (NaN, a fill value) and the models read the data, not the mask."""
    import numpy as np

    if not isinstance(value, np.ma.MaskedArray):
        return
    masked = np.argwhere(np.ma.getmaskarray(value))
    if len(masked):
        raise InputError(
            f"model {model!r} input {io.name!r}: a masked array with {len(masked)} masked "
            f"values, the first at index {tuple(int(i) for i in masked[0])}; fill them "
            "(value.filled(...)) or drop them first: the model would read the data under the mask"
        )


def _check_finite_input(model: str, io: IOSpec, value: Any) -> None:
    import numpy as np

    arr = as_numpy(value)
    if np.isfinite(arr).all():
        return
    bad = np.argwhere(~np.isfinite(arr))
    first = tuple(int(i) for i in bad[0])
    raise InputError(
        f"model {model!r} input {io.name!r}: {len(bad)} values are NaN or inf, the first "
        f"at index {first} ({arr[first]}); the model would compute on them silently"
    )


def _check_bounds(model: str, io: IOSpec, value: Any) -> None:
    import numpy as np

    arr = as_numpy(value)
    low, high = io.bounds  # type: ignore[misc]
    outside = ~((arr >= low) & (arr <= high))  # NaN is outside too
    if not outside.any():
        return
    first = tuple(int(i) for i in np.argwhere(outside)[0])
    raise InputError(
        f"model {model!r} input {io.name!r}: {int(outside.sum())} values lie outside "
        f"[{low:g}, {high:g}], the first at index {first} ({arr[first]})"
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
