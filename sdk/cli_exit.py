"""How the ``neuroedge`` command ends: the exit status and one line for an error, a stop
signal (SIGTERM 143, Ctrl-C 130, even one whose exception native code lost) or a reader of
its output that left (141)."""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator

from neuroedge.errors import NeuroedgeError
from neuroedge.signals import (
    EXIT_TERMINATED,
    Terminated,
    mark_terminating,
    sigterm_exits,
    stdout_reader_gone,
    stop_status,
)

# 128 + SIGPIPE: what a shell reports for a Unix tool whose reader left (`yes | head -1`),
# so a `set -o pipefail` script treats neuroedge as it treats those; 2 stays "you erred"
EXIT_READER_GONE = 141
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a tool stopped by Ctrl-C
ESCAPE = "neuroedge.escape"  # the error handler of stdout and stderr (readable_output)
STRICT = ("strict", "surrogateescape")  # the ones that raise on a character they lack


def stopped(status: int) -> int:
    """The one line of a command stopped by a signal whose exception native code lost."""
    mark_terminating()
    words = "interrupted" if status == EXIT_INTERRUPTED else "terminated (SIGTERM)"
    print(f"\nneuroedge: {words}", file=sys.stderr)
    return status


def debugging() -> bool:
    """NEUROEDGE_DEBUG set (not 0): an error is raised with its traceback, not one line."""
    return os.environ.get("NEUROEDGE_DEBUG", "") not in ("", "0")


def _escape(err: UnicodeError) -> tuple[str | bytes, int]:
    """A path's undecodable bytes as they were (surrogateescape), any other character the
    encoding lacks as a backslash escape."""
    if isinstance(err, UnicodeEncodeError):
        try:
            return codecs.lookup_error("surrogateescape")(err)
        except UnicodeEncodeError:
            pass
    return codecs.backslashreplace_errors(err)


@contextlib.contextmanager
def readable_output() -> Iterator[None]:
    """Within: stdout and stderr write a character their encoding lacks (an ASCII locale:
    LC_ALL=C with PYTHONUTF8=0, PYTHONIOENCODING=ascii) as a backslash escape, so a result
    holding a user's non-ASCII text is printed, not lost to a UnicodeEncodeError after the
    work. Their own error handlers come back on leaving (``cli.main`` called from Python)."""
    codecs.register_error(ESCAPE, _escape)
    changed = []
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors in STRICT:
            changed.append((stream, stream.errors))
            stream.reconfigure(errors=ESCAPE)
    try:
        yield
    finally:
        for stream, errors in changed:
            with contextlib.suppress(OSError, ValueError):  # a reader gone, a closed stream
                stream.reconfigure(errors=errors)


# import name -> pip distribution, where they differ (the rest install under their own name)
DISTRIBUTIONS = {"sklearn": "scikit-learn", "lava": "lava-nc", "PIL": "pillow"}
SET_UP = "install neuroedge's dependencies (make test, or pip install -e ., in the source tree)"


def install_hint(module: str) -> str:
    """How to install the package that provides the top-level ``module``, from neuroedge's
    own requirements (setup.cfg's install_requires and extras, as installed)."""
    from importlib.metadata import PackageNotFoundError, requires

    dist = DISTRIBUTIONS.get(module, module)
    if dist == "lava-nc":
        return "python -m neuroedge.backends.lava_install (the set-up runs it)"
    try:
        declared = requires("neuroedge") or []
    except PackageNotFoundError:  # run from a source tree that was never installed
        declared = []
    key = dist.lower().replace("_", "-")
    for line in declared:
        name, _, marker = line.partition(";")
        if name.split("==")[0].strip().lower().replace("_", "-") != key:
            continue
        if "extra ==" in marker:
            extra = marker.split("extra ==")[1].strip().strip("'\"")
            return f"pip install 'neuroedge[{extra}]'"
        return f"neuroedge requires it: {SET_UP}"
    return "not a requirement of the wheel: the set-up (make) installs it, see the Makefile"


def missing_package_line(err: ModuleNotFoundError) -> str:
    """The one line for a package a command needs that is not installed."""
    if not err.name:  # raised by hand, without the module's name
        return f"neuroedge: error: missing package ({err}): {SET_UP}"
    module = err.name.split(".")[0]
    return f"neuroedge: error: missing package {module} ({err}): {install_hint(module)}"


def error_status(err: BaseException, debug: bool) -> int:
    """The exit status of ``err`` raised by a command, after its one line (or re-raised)."""
    try:
        raise err
    except KeyboardInterrupt:
        mark_terminating()  # exit clean-up ends helper processes, not waits on them
        if debug:
            raise
        print("\nneuroedge: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:  # on a line of its own (a progress bar may be mid-line)
        print("\nneuroedge: terminated (SIGTERM)", file=sys.stderr)
        return EXIT_TERMINATED
    except BrokenPipeError as err:
        if not stdout_reader_gone():
            if debug:
                raise
            print(f"neuroedge: error: {err}", file=sys.stderr)
            return 2
        # Python's recommended pattern (signal docs, "Note on SIGPIPE"): stdout to devnull,
        # so the flush at exit raises no second BrokenPipeError
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_READER_GONE
    except UnicodeEncodeError:  # neuroedge's own output, never the user's input: a bug
        raise
    except ModuleNotFoundError as err:  # an optional or broken set-up; neuroedge's own: a bug
        if debug or (err.name or "").split(".")[0] == "neuroedge":
            raise
        print(missing_package_line(err), file=sys.stderr)
        return 2
    except (NeuroedgeError, ValueError, OSError) as err:  # OSError: paths the user gave
        if debug:
            raise
        print(f"neuroedge: error: {err}", file=sys.stderr)
        return 2


def stoppable(
    command: Callable[[], int], on_error: Callable[[BaseException], int] | None = None
) -> int:
    """``command()``'s exit status, or, stopped by SIGTERM or Ctrl-C (even one whose exception
    native code lost), 143 / 130 after one line. ``on_error``: the status of another
    exception (and of the stop's own, the ``neuroedge`` command's ``error_status``), else it
    propagates. The ``python -m`` entry points beside the command use it too (their ``with``
    blocks unwind: temporary copies go, test subprocesses are killed). stdout and stderr
    escape what their encoding lacks (``readable_output``)."""
    with readable_output():  # its one line (on_error) escaped too
        try:
            with sigterm_exits():
                code = command()
                if sys.stdout is not None:  # None: started with stdout closed (print skips)
                    sys.stdout.flush()  # a reader gone shows here, not at exit past every handler
        except BaseException as err:
            own = isinstance(err, KeyboardInterrupt | Terminated)
            if stop_status() and not own:  # the signal's exception was lost or turned into err
                return stopped(stop_status())
            if on_error is not None:
                return on_error(err)
            if own:
                interrupted = isinstance(err, KeyboardInterrupt)
                return stopped(
                    stop_status() or (EXIT_INTERRUPTED if interrupted else EXIT_TERMINATED)
                )
            raise
        return stopped(stop_status()) if stop_status() else code


def command_status(command: Callable[[], int]) -> int:
    """The exit status of an entry point's ``command`` (the ``neuroedge`` command's and the
    ``python -m`` ones'): ``stoppable`` with ``error_status`` for its errors, so a reader
    that left gives 141 quietly and bad input one line and 2 (NEUROEDGE_DEBUG: raised)."""
    debug = debugging()
    return stoppable(command, lambda err: error_status(err, debug))
