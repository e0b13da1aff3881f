"""Map the client's top-level folders into one import namespace, `neuroedge`."""

from pathlib import Path
from setuptools import setup

ROOTS = {
    "neuroedge": "sdk",
    "neuroedge.backends": "backends",
    "neuroedge.models": "models",
    "neuroedge.export": "export",
    "neuroedge.bench": "bench",
}


def subpackages(pkg: str, folder: str) -> list[str]:
    inits = sorted(Path(folder).rglob("__init__.py"))
    return [".".join((pkg, *init.parent.relative_to(folder).parts)) for init in inits]


setup(packages=[p for pkg, d in ROOTS.items() for p in subpackages(pkg, d)], package_dir=ROOTS)
