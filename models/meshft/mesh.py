"""Meshes for physics.meshft: periodic grids, periodic Delaunay meshes, users' triangle meshes.

A ``Mesh`` carries the topology (signed incidence, the discrete exterior derivative d0, as an
edge list with src < dst: (B q)_e = q_dst - q_src) and the theory Hodge stars:

* V0 (star0): the dual node area, one third of the incident triangle areas (h_x h_y on a grid);
* V1inv (star1): the cotangent weight 1/2 (cot alpha + cot beta) of each edge, clamped >= 0
  (h_y/h_x for horizontal grid edges, h_x/h_y for vertical ones).

Design decisions: the periodic Delaunay builder tiles 3x3 copies and keeps the triangles whose
centroid falls in the central tile, so each periodic triangle is kept exactly once; there V0 is
floored at its 0.1% quantile (slivers otherwise give near-zero masses and a huge CFL
frequency). Users' meshes are taken as they are, after checks: NaN coordinates, degenerate
triangles (area below 1e-12 of the mean) and non-manifold edges (three or more triangles) raise
``MeshError`` naming the node, triangle or edge.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from neuroedge.errors import NeuroedgeError
from neuroedge.npyfile import load_npz


class MeshError(NeuroedgeError, ValueError):
    """A mesh that cannot carry the discrete exterior calculus; names the bad element."""


@dataclass(frozen=True)
class Mesh:
    """Nodes, oriented edges, triangles and the diagonal theory Hodge stars."""

    points: np.ndarray = field(repr=False)  # [N, 2] node coordinates
    edges: np.ndarray = field(repr=False)  # [E, 2] int64, src < dst
    edge_vectors: np.ndarray = field(repr=False)  # [E, 2] x_dst - x_src (minimum image)
    star0: np.ndarray = field(repr=False)  # [N] dual node areas V0
    star1: np.ndarray = field(repr=False)  # [E] dual/primal length ratios V1inv
    period: tuple[float, float] | None = None  # (Lx, Ly) of a periodic domain, else None
    triangles: np.ndarray | None = field(default=None, repr=False)  # [F, 3]

    @property
    def n_nodes(self) -> int:
        return len(self.points)

    @property
    def n_edges(self) -> int:
        return len(self.edges)


def periodic_grid(nx: int, ny: int, lx: float = 1.0, ly: float = 1.0) -> Mesh:
    """A regular nx x ny grid on the torus [0, lx) x [0, ly)."""
    hx, hy = lx / nx, ly / ny
    ii, jj = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    index = ii * ny + jj
    points = np.stack([ii.ravel() * hx, jj.ravel() * hy], axis=1)
    pairs, vectors, stars = [], [], []
    for shift, vec, star in (((1, 0), (hx, 0.0), hy / hx), ((0, 1), (0.0, hy), hx / hy)):
        nb = np.roll(index, (-shift[0], -shift[1]), axis=(0, 1))
        a, b = index.ravel(), nb.ravel()
        sign = np.where(a < b, 1.0, -1.0)
        pairs.append(np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1))
        vectors.append(sign[:, None] * np.asarray(vec)[None, :])
        stars.append(np.full(len(a), star))
    return Mesh(
        points,
        np.concatenate(pairs).astype(np.int64),
        np.concatenate(vectors),
        np.full(nx * ny, hx * hy),
        np.concatenate(stars),
        (lx, ly),
    )


def periodic_delaunay(n: int, seed: int = 0, lx: float = 1.0, ly: float = 1.0) -> Mesh:
    """A Delaunay mesh of ``n`` uniform random points on the torus [0, lx) x [0, ly)."""
    from scipy.spatial import Delaunay

    base = np.random.default_rng(seed).uniform(0, 1, (n, 2)) * [lx, ly]
    shifts = np.array([(i, j) for i in (-1, 0, 1) for j in (-1, 0, 1)], dtype=float)
    tiled = (base[None, :, :] + shifts[:, None, :] * [lx, ly]).reshape(-1, 2)
    tri = Delaunay(tiled).simplices
    centroid = tiled[tri].mean(axis=1)
    inside = ((centroid >= 0) & (centroid < [lx, ly])).all(axis=1)
    triangles = np.unique(np.sort(tri[inside] % n, axis=1), axis=0)
    return _mesh_from_triangles(base, triangles, (lx, ly), floor=True)


def mesh_from_arrays(
    points: np.ndarray, triangles: np.ndarray, period: tuple[float, float] | None = None
) -> Mesh:
    """A mesh from user arrays, validated (NaN nodes, degenerate or non-manifold elements)."""
    points = np.asarray(points, dtype=np.float64)
    triangles = np.asarray(triangles)
    if points.ndim != 2 or points.shape[1] not in (2, 3):
        raise MeshError(f"points: expected shape [N, 2 or 3], got {list(points.shape)}")
    if triangles.ndim != 2 or triangles.shape[1] != 3:
        raise MeshError(f"triangles: expected shape [F, 3], got {list(triangles.shape)}")
    bad = np.flatnonzero(~np.isfinite(points).all(axis=1))
    if bad.size:
        raise MeshError(
            f"node {int(bad[0])} has a NaN or infinite coordinate {points[bad[0]].tolist()}"
        )
    if points.shape[1] == 3:
        if np.ptp(points[:, 2]) > 1e-12 * max(np.ptp(points[:, :2]), 1.0):
            raise MeshError(
                "points: the mesh is not planar (z varies); physics.meshft takes 2-D meshes"
            )
        points = points[:, :2]
    if triangles.min() < 0 or triangles.max() >= len(points):
        raise MeshError(f"triangles: node index out of range [0, {len(points)})")
    return _mesh_from_triangles(points, triangles.astype(np.int64), period)


def _min_image(d: np.ndarray, period: tuple[float, float] | None) -> np.ndarray:
    if period is None:
        return d
    size = np.asarray(period)
    return d - size * np.round(d / size)


def _mesh_from_triangles(
    points: np.ndarray,
    triangles: np.ndarray,
    period: tuple[float, float] | None,
    floor: bool = False,
) -> Mesh:
    """Edges, cotangent star1 and barycentric star0 of a triangle mesh."""
    corners = [points[triangles[:, k]] for k in range(3)]
    e1 = _min_image(corners[1] - corners[0], period)
    e2 = _min_image(corners[2] - corners[0], period)
    signed = 0.5 * (e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0])
    area = np.abs(signed)
    tiny = np.flatnonzero(area <= 1e-12 * max(area.mean(), 1e-300))
    if tiny.size:
        raise MeshError(
            f"triangle {int(tiny[0])} {triangles[tiny[0]].tolist()} is degenerate "
            f"(area {area[tiny[0]]:.3e})"
        )
    half = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])
    keys = np.sort(half, axis=1)
    edges, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    if counts.max() > 2:
        k = int(np.argmax(counts))
        raise MeshError(
            f"edge {k} {edges[k].tolist()} is non-manifold: shared by "
            f"{int(counts[k])} triangles (at most 2 allowed)"
        )
    cot = np.zeros(len(edges))
    n_tri = len(triangles)
    for slot, opposite in enumerate((2, 0, 1)):  # edge (0,1) faces corner 2, and so on
        apex = corners[opposite]
        a = _min_image(points[triangles[:, slot]] - apex, period)
        b = _min_image(points[triangles[:, (slot + 1) % 3]] - apex, period)
        cross = np.abs(a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0])
        np.add.at(
            cot, inverse[slot * n_tri : (slot + 1) * n_tri], 0.5 * (a * b).sum(axis=1) / cross
        )
    star0 = np.zeros(len(points))
    for k in range(3):
        np.add.at(star0, triangles[:, k], area / 3.0)
    orphan = np.flatnonzero(star0 == 0)
    if orphan.size:
        raise MeshError(f"node {int(orphan[0])} belongs to no triangle")
    vectors = _min_image(points[edges[:, 1]] - points[edges[:, 0]], period)
    if floor:
        star0 = np.maximum(star0, np.quantile(star0, 1e-3))
    return Mesh(
        points, edges.astype(np.int64), vectors, star0, np.maximum(cot, 0.0), period, triangles
    )


def read_mesh(path: str | os.PathLike[str]) -> Mesh:
    """A user mesh from any meshio format (.msh, .vtk, .vtu, .obj, .ply, ...), triangles only."""
    import meshio

    path = Path(path)
    if not path.is_file():
        raise MeshError(f"{path}: no such mesh file")
    try:
        data = meshio.read(path)
    except (meshio.ReadError, ValueError, KeyError, IndexError, UnicodeDecodeError) as err:
        raise MeshError(f"{path}: not a readable mesh ({err})") from err
    except SystemExit as err:  # meshio's VTK reader calls sys.exit on a bad header
        raise MeshError(f"{path}: not a readable mesh (meshio's reader exited: {err})") from None
    tris = [block.data for block in data.cells if block.type == "triangle"]
    if not tris:
        kinds = sorted({block.type for block in data.cells})
        raise MeshError(f"{path}: no triangle cells (found {kinds})")
    try:
        return mesh_from_arrays(data.points, np.concatenate(tris))
    except MeshError as err:
        raise MeshError(f"{path}: {err}") from None


def read_fields(path: str | os.PathLike[str], n_nodes: int) -> np.ndarray:
    """Fields [T, N, 2] (q, p per node) from an NPZ or HDF5 file's ``fields`` array."""
    path = Path(path)
    if path.suffix == ".npz":

        def need_fields(names: list[str]) -> None:
            if "fields" not in names:
                raise ValueError(f"no 'fields' array (found {sorted(names)})")

        try:
            npz = load_npz(path, need_fields, only=["fields"])
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from err
        fields = np.asarray(npz["fields"], dtype=np.float64)
    elif path.suffix in (".h5", ".hdf5"):
        import h5py

        with h5py.File(path, "r") as fh:
            if "fields" not in fh:
                raise ValueError(f"{path}: no 'fields' dataset (found {sorted(fh)})")
            fields = np.asarray(fh["fields"], dtype=np.float64)
    else:
        raise ValueError(f"{path}: fields must be .npz, .h5 or .hdf5")
    if fields.ndim != 3 or fields.shape[1] != n_nodes or fields.shape[2] != 2:
        raise ValueError(
            f"{path}: fields must have shape [T, {n_nodes}, 2], got {list(fields.shape)}"
        )
    bad = np.argwhere(~np.isfinite(fields))
    if len(bad):
        t, node, ch = (int(v) for v in bad[0])
        raise ValueError(f"{path}: fields[{t}, {node}, {ch}] is NaN or infinite")
    return fields
