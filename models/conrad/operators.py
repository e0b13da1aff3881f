"""The repair shapes: AST rewrites of one function, and the fix-shape classifier.

A *shape* is a kind of edit with abstract parameters that do not name anything in the code
(so a shape read from one fix can be applied to another function): ``slice_bound`` (+1 / -1
on a slice's upper bound), ``none_guard`` (``if <param k> is None: return <default>`` first,
the default being another parameter or a literal), ``swap_merge`` (the order of two ``**``
unpackings in a dict display), ``scale_constant`` (a numeric constant x10 or /10),
``add_key_param`` (a parameter appended to a tuple literal), ``flip_compare`` (``<`` <->
``<=``, ``>`` <-> ``>=``), ``swap_args`` (two positional arguments of a call swapped) and
``negate_condition`` (an ``if`` test or a returned comparison negated). The last two fix no
bug family of the corpus: they are the rest of a template-based repair library (as in PAR /
TBar), where a repairer that does not know the fix shape has to choose among all of them.

``candidates(src)`` lists every edit of every shape on one function; ``classify_fix(old,
new)`` is the backward step of ConRAD's distillation: the shape and parameters whose edit
turns the verified buggy function into its fixed version (compared as ASTs), or None.
"""

from __future__ import annotations

import ast
import copy
import difflib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

SHAPES = (
    "slice_bound",
    "none_guard",
    "swap_merge",
    "scale_constant",
    "add_key_param",
    "flip_compare",
    "swap_args",
    "negate_condition",
)
FLIPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
GUARD_LITERALS = ("None", "''", "0", "[]", "{}")
# Deepest syntax tree of a function that is read (levels of AST nodes, the def being 1): the
# rewrites copy, compare and print trees recursively, and copy.deepcopy passes Python's
# default recursion limit near 300 levels; real functions stay well under 40.
MAX_DEPTH = 100
SHAPE_TEXT = {  # edit_think's options, in words an LLM can match against a plan
    "slice_bound": "change the end of a slice by one",
    "none_guard": "return early when an argument is None",
    "swap_merge": "swap the order of a dict merge",
    "scale_constant": "multiply or divide a constant by ten",
    "add_key_param": "add an argument to a key tuple",
    "flip_compare": "make a comparison inclusive or strict",
    "swap_args": "swap two arguments of a call",
    "negate_condition": "negate a condition",
}


@dataclass(frozen=True)
class Candidate:
    """One edit of one function: its shape, abstract parameters and the rewritten source."""

    shape: str  # one of SHAPES
    params: tuple[str, ...]  # abstract, name-free: e.g. ("+1",), ("param0", "param1")
    site: int  # index of the edited node among the shape's sites in the function (0-based)
    source: str  # the whole function after the edit; only the edited node's text changes


def parse_function(src: str) -> ast.FunctionDef:
    """The single function definition in ``src``; ValueError naming what was found instead."""
    try:
        tree = ast.parse(src)
    except SyntaxError as err:
        raise ValueError(f"function source does not parse: line {err.lineno}: {err.msg}") from err
    except (MemoryError, RecursionError) as err:  # CPython's parser on e.g. 10**4 unary '-'
        raise ValueError(
            f"function source nests too deeply (or is too large) to parse "
            f"({type(err).__name__}); functions may nest at most {MAX_DEPTH} syntax levels"
        ) from None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        kinds = [type(n).__name__ for n in tree.body]
        raise ValueError(f"expected one function definition, got {kinds}")
    depth = _depth(tree.body[0])
    if depth > MAX_DEPTH:
        raise ValueError(
            f"function {tree.body[0].name!r} nests {depth} syntax levels deep; at most "
            f"{MAX_DEPTH} are read (the rewrites copy and print trees recursively)"
        )
    return tree.body[0]


def _depth(tree: ast.AST) -> int:
    """Levels of the deepest node under ``tree`` (``tree`` is level 1), walked without
    recursion."""
    deepest, todo = 0, [(tree, 1)]
    while todo:
        node, level = todo.pop()
        deepest = max(deepest, level)
        todo += [(child, level + 1) for child in ast.iter_child_nodes(node)]
    return deepest


def _params(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.args]


def _nodes(fn: ast.FunctionDef, kind: type) -> list[ast.AST]:
    """Nodes of ``kind`` in source order (ast.walk is breadth first)."""
    found = [n for n in ast.walk(fn) if isinstance(n, kind)]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _splice(src: str, old: ast.AST, text: str, want: ast.FunctionDef) -> str:
    """``src`` with the span of ``old`` replaced by ``text`` (parenthesised if needed), so
    the rest of the function keeps its comments and layout; the whole ``want`` unparsed when
    neither splice parses to ``want``."""
    raw, starts = src.encode(), [0]
    for line in src.encode().splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    a = starts[old.lineno - 1] + old.col_offset  # col offsets count UTF-8 bytes
    b = starts[old.end_lineno - 1] + old.end_col_offset
    goal = ast.dump(want)
    for piece in (text, f"({text})"):
        out = (raw[:a] + piece.encode() + raw[b:]).decode()
        try:
            if ast.dump(parse_function(out)) == goal:
                return out
        except ValueError:
            continue
    return ast.unparse(want)


def _edit(
    fn: ast.FunctionDef, src: str, kind: type, site: int, change: Callable[[ast.AST], bool]
) -> str:
    """Apply ``change`` to a copy of ``fn``'s ``site``-th node of ``kind``, spliced into
    ``src``; "" if it refuses."""
    twin = copy.deepcopy(fn)
    node = _nodes(twin, kind)[site]
    if not change(node):
        return ""
    twin = ast.fix_missing_locations(twin)
    return _splice(src, _nodes(fn, kind)[site], ast.unparse(node), twin)


def _slice_bound(fn: ast.FunctionDef, src: str) -> Iterator[Candidate]:
    for site, s in enumerate(_nodes(fn, ast.Slice)):
        if s.upper is None:
            continue
        for delta in ("+1", "-1"):

            def change(node: ast.AST, delta: str = delta) -> bool:
                up = node.upper
                sign = ast.Sub if delta == "-1" else ast.Add
                undo = ast.Add if delta == "-1" else ast.Sub
                one = isinstance(up, ast.BinOp) and isinstance(up.right, ast.Constant)
                if one and isinstance(up.op, undo) and up.right.value == 1:
                    node.upper = up.left  # x - 1 (+1) -> x, not x - 1 + 1
                else:
                    node.upper = ast.BinOp(up, sign(), ast.Constant(1))
                return True

            yield Candidate("slice_bound", (delta,), site, _edit(fn, src, ast.Slice, site, change))


def _guard_defaults(fn: ast.FunctionDef, k: int) -> list[tuple[str, str]]:
    others = [(f"param{j}", p) for j, p in enumerate(_params(fn)) if j != k]
    return others + [(f"literal:{lit}", lit) for lit in GUARD_LITERALS]


def _none_guard(fn: ast.FunctionDef, src: str) -> Iterator[Candidate]:
    body = fn.body[1:] if ast.get_docstring(fn) else fn.body
    first = body[0] if body else None
    if first is None:
        return
    lines = src.splitlines(keepends=True)
    pad = " " * first.col_offset
    at = first.lineno - 1  # the guard goes on its own lines before the first statement
    for k, p in enumerate(_params(fn)):
        guarded = isinstance(first, ast.If) and f"{p} is None" in ast.unparse(first.test)
        if guarded:
            continue
        for tag, expr in _guard_defaults(fn, k):
            text = f"{pad}if {p} is None:\n{pad}    return {expr}\n"
            out = "".join(lines[:at]) + text + "".join(lines[at:])
            yield Candidate("none_guard", (f"param{k}", tag), 0, out)


def _swap_merge(fn: ast.FunctionDef, src: str) -> Iterator[Candidate]:
    for site, d in enumerate(_nodes(fn, ast.Dict)):
        if sum(k is None for k in d.keys) != 2 or len(d.keys) != 2:
            continue

        def change(node: ast.AST) -> bool:
            node.values.reverse()
            return True

        yield Candidate("swap_merge", (), site, _edit(fn, src, ast.Dict, site, change))


def _scale_constant(fn: ast.FunctionDef, src: str) -> Iterator[Candidate]:
    for site, c in enumerate(_nodes(fn, ast.Constant)):
        v = c.value
        if isinstance(v, bool) or not isinstance(v, int | float) or v in (0, 1):
            continue
        for tag in ("x10", "/10"):
            if tag == "/10" and isinstance(v, int) and v % 10:
                continue

            def change(node: ast.AST, tag: str = tag) -> bool:
                val = node.value
                node.value = (
                    val * 10 if tag == "x10" else (val // 10 if isinstance(val, int) else val / 10)
                )
                return True

            yield Candidate(
                "scale_constant", (tag,), site, _edit(fn, src, ast.Constant, site, change)
            )


def _add_key_param(fn: ast.FunctionDef, src: str) -> Iterator[Candidate]:
    params = _params(fn)
    for site, t in enumerate(_nodes(fn, ast.Tuple)):
        names = {e.id for e in t.elts if isinstance(e, ast.Name)}
        if not names or not isinstance(t.ctx, ast.Load):
            continue
        for k, p in enumerate(params):
            if p in names:
                continue

            def change(node: ast.AST, p: str = p) -> bool:
                node.elts.append(ast.Name(p, ast.Load()))
                return True

            yield Candidate(
                "add_key_param", (f"param{k}",), site, _edit(fn, src, ast.Tuple, site, change)
            )


def _flip_compare(fn: ast.FunctionDef, src: str) -> Iterator[Candidate]:
    for site, c in enumerate(_nodes(fn, ast.Compare)):
        if len(c.ops) != 1 or type(c.ops[0]) not in FLIPS:
            continue
        old = type(c.ops[0])

        def change(node: ast.AST) -> bool:
            node.ops = [FLIPS[type(node.ops[0])]()]
            return True

        params = (f"{old.__name__}->{FLIPS[old].__name__}",)
        yield Candidate("flip_compare", params, site, _edit(fn, src, ast.Compare, site, change))


def _swap_args(fn: ast.FunctionDef, src: str) -> Iterator[Candidate]:
    for site, call in enumerate(_nodes(fn, ast.Call)):
        if len(call.args) < 2:
            continue
        for i in range(len(call.args) - 1):

            def change(node: ast.AST, i: int = i) -> bool:
                a = node.args
                a[i], a[i + 1] = a[i + 1], a[i]
                return True

            yield Candidate("swap_args", (f"arg{i}",), site, _edit(fn, src, ast.Call, site, change))


def _negate_condition(fn: ast.FunctionDef, src: str) -> Iterator[Candidate]:
    sites = [n for n in ast.walk(fn) if isinstance(n, ast.If | ast.Return)]
    sites.sort(key=lambda n: (n.lineno, n.col_offset))
    for site, node in enumerate(sites):
        if isinstance(node, ast.Return) and not isinstance(node.value, ast.Compare):
            continue
        twin = copy.deepcopy(fn)
        target = sorted(
            (n for n in ast.walk(twin) if isinstance(n, ast.If | ast.Return)),
            key=lambda n: (n.lineno, n.col_offset),
        )[site]
        field = "test" if isinstance(target, ast.If) else "value"
        negated = ast.UnaryOp(ast.Not(), getattr(target, field))
        setattr(target, field, negated)
        twin = ast.fix_missing_locations(twin)
        out = _splice(src, getattr(node, field), ast.unparse(negated), twin)
        yield Candidate("negate_condition", (), site, out)


GENERATORS: dict[str, Callable[[ast.FunctionDef, str], Iterator[Candidate]]] = {
    "slice_bound": _slice_bound,
    "none_guard": _none_guard,
    "swap_merge": _swap_merge,
    "scale_constant": _scale_constant,
    "add_key_param": _add_key_param,
    "flip_compare": _flip_compare,
    "swap_args": _swap_args,
    "negate_condition": _negate_condition,
}


def candidates(src: str, shapes: tuple[str, ...] = SHAPES) -> list[Candidate]:
    """Every edit of the given shapes on the function in ``src`` that changes it."""
    unknown = [s for s in shapes if s not in GENERATORS]
    if unknown:
        raise ValueError(f"unknown shapes {unknown}; expected some of {list(SHAPES)}")
    fn = parse_function(src)
    same = ast.dump(fn)
    out = []
    for shape in shapes:
        for c in GENERATORS[shape](fn, src):
            if c.source and ast.dump(parse_function(c.source)) != same:
                out.append(c)
    return out


def classify_fix(buggy: str, fixed: str) -> Candidate | None:
    """The candidate edit of ``buggy`` whose AST equals ``fixed``'s, or None (no single-shape
    edit reproduces the fix). Docstrings and formatting do not matter; names do."""
    want = ast.dump(parse_function(fixed))
    for c in candidates(buggy):
        if ast.dump(parse_function(c.source)) == want:
            return c
    return None


def changed_lines(old: str, new: str) -> str:
    """The lines an edit removes (``- ``) and adds (``+ ``)."""
    diff = difflib.ndiff(old.splitlines(), new.splitlines())
    return "\n".join(d for d in diff if d[:2] in ("- ", "+ "))
