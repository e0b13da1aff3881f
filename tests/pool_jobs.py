"""Jobs for the seed-pool tests (tests/test_pool.py), in a module of their own: a spawned
worker imports a job's module by name, and a test module is not importable by its pytest name
there (``tests.test_pool`` needs the repository root on the path, which `make test` does not
put there)."""

from __future__ import annotations


class Custom(Exception):
    """Pickles, but does not unpickle: its ``__init__`` takes two arguments."""

    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"{a}/{b}")


class BadReduce(Exception):
    def __reduce__(self):
        raise ValueError("no reduce")


def raise_custom(x: int) -> None:
    raise Custom(x, 2)


def raise_bad_reduce(x: int) -> None:
    raise BadReduce("boom with details")


def return_pointer(x: int) -> object:
    import ctypes

    return ctypes.pointer(ctypes.c_int(x))


def _cannot_rebuild() -> None:
    raise ValueError("cannot rebuild")


class Unrebuildable:
    """Pickles in the worker; rebuilding it in the parent raises."""

    def __reduce__(self):
        return (_cannot_rebuild, ())


def return_unrebuildable(x: int) -> Unrebuildable:
    return Unrebuildable()
