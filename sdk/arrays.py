"""A user's own model inputs from a file, and model outputs to one (``neuroedge run --input``).

Inputs: an ``.npz`` with one array per model input, named as the spec names them (``neuroedge
info NAME``), or an ``.npy`` for a model with one input. Arrays are read without pickle and
checked against the spec (names, shapes, dtypes, bounds) before the model runs; every error
names the file. Outputs: an ``.npz`` of the output arrays, written atomically.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neuroedge.errors import InputError
from neuroedge.types import ModelSpec

ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip (.npz) with members, or an empty one
NPY_MAGIC = b"\x93NUMPY"


def _expected(spec: ModelSpec) -> str:
    return ", ".join(io.describe() for io in spec.inputs)


def load_inputs(path: str | os.PathLike[str], spec: ModelSpec) -> dict[str, Any]:
    """The arrays of ``path`` (.npz, or .npy for a one-input model), checked against ``spec``.

    Raises ``InputError`` naming the file: missing, a folder, another format, unreadable (a
    corrupt archive, pickled objects), or arrays that do not fit the spec's inputs.
    """
    from neuroedge.npyfile import load_npy, load_npz
    from neuroedge.shapes import bind_inputs, check_input_names

    p = Path(path)
    names = [io.name for io in spec.inputs]
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not an .npz or .npy file of inputs")
    if not p.is_file():
        raise InputError(f"{p}: no such file (inputs of {spec.name}: {_expected(spec)})")
    suffix = p.suffix.lower()
    if suffix not in (".npz", ".npy"):
        raise InputError(
            f"{p}: expected an .npz with arrays named {names} (or an .npy for a model with "
            f"one input), got a {suffix or 'suffix-less'} file"
        )
    if suffix == ".npy" and len(names) != 1:
        raise InputError(
            f"{p}: {spec.name} takes {len(names)} inputs ({_expected(spec)}); give them as "
            f"arrays of one .npz named {names}"
        )
    with open(p, "rb") as fh:
        head = fh.read(6)
    kind = ".npz" if head.startswith(ZIP_MAGICS) else ".npy" if head == NPY_MAGIC else None
    if kind != suffix:
        found = (
            f"an {kind} file"
            if kind
            else f"neither format (first bytes {head!r})"
            if head
            else "empty"
        )
        raise InputError(f"{p}: not an {suffix} file: it is {found}")
    try:
        if suffix == ".npy":
            arrays = {names[0]: load_npy(p)}
        else:  # the names are checked before any array is read
            arrays = load_npz(p, lambda files: check_input_names(spec, files))
        bind_inputs(spec, arrays)
    except InputError as err:  # names, shapes, dtypes, values: the spec's words, and the file
        raise InputError(f"{p}: {err}") from err
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise InputError(f"{p}: not a readable {suffix} file of arrays ({err})") from err
    except MemoryError as err:  # a header declaring a shape that does not fit in memory
        raise InputError(f"{p}: an array too large to load ({err})") from err
    return arrays


def save_outputs(path: str | os.PathLike[str], outputs: Mapping[str, Any]) -> Path:
    """``outputs`` as an uncompressed ``.npz`` at ``path``, written atomically."""
    import numpy as np

    from neuroedge.atomic import write_bytes

    check_output_path(path)
    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in outputs.items()})
    return write_bytes(path, buffer.getvalue())


def check_output_path(path: str | os.PathLike[str]) -> Path:
    """``path`` must end in .npz and be writable (probed before any work)."""
    from neuroedge.atomic import check_writable

    if not str(path).strip():
        raise InputError("--output '': an empty path; give a file name ending in .npz")
    if Path(path).is_dir():
        raise InputError(f"--output {str(path)!r}: is a directory; give a file name ending in .npz")
    if Path(path).suffix.lower() != ".npz":
        raise InputError(f"--output {str(path)!r}: expected a file name ending in .npz")
    return check_writable(path)
