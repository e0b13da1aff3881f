"""The Lava processes of one :class:`~neuroedge.backends.lava.LavaNetwork`: input sources,
``LIFReset`` populations, Dense/Sparse (and delayed) synapses, and the packed spike recorders.

Lava itself (and scipy) are imported inside the functions that build processes.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
from neuroedge.backends.lava_map import BIAS_SOURCE, Layer

if TYPE_CHECKING:
    from neuroedge.backends.lava import LavaNetwork

PACK = 8  # spikes per recorded value
STOP_BOUND = 5.0  # seconds Lava's orderly stop may take (well under one) before it is ended


def packing_matrix(n: int) -> Any:
    """``(ceil(n / 8), n)`` sparse weights 1, 2, ..., 128 packing 8 spikes into one value.

    Lava 0.10's ``Var.get`` ships arrays element by element (about 40k values/s), so spikes
    are recorded packed; weights <= 128 are exact 8-bit excitatory weights in fixed_pt too.
    """
    import scipy.sparse as sp

    idx = np.arange(n)
    return sp.csr_matrix(
        (2.0 ** (idx % PACK), (idx // PACK, idx)), shape=((n + PACK - 1) // PACK, n)
    )


def unpack_spikes(packed: np.ndarray, n: int) -> np.ndarray:
    """Inverse of :func:`packing_matrix`: ``(groups, T)`` values -> ``(n, T)`` 0/1 float32."""
    ints = np.rint(packed).astype(np.int64)
    bits = (ints[:, None, :] >> np.arange(PACK)[None, :, None]) & 1
    return bits.reshape(-1, packed.shape[1])[:n].astype(np.float32)


def _synapse(
    weight: np.ndarray, batch: int, graded: bool, fixed: bool, delay: int, weight_exp: int = 0
) -> Any:
    import scipy.sparse as sp
    from lava.proc.dense.process import DelayDense, Dense
    from lava.proc.sparse.process import DelaySparse, Sparse

    # Spikes travel as 1-bit graded messages: the same 0/1 values, but Lava's Dense/Sparse
    # models then take the matrix-vector path instead of slicing columns of a CSR matrix per
    # step, which is ~100x slower for the block-diagonal batch matrices.
    bits = 8 if graded else 1
    scaled = {"weight_exp": weight_exp} if weight_exp else {}  # bit-accurate models only
    dense_ratio = np.count_nonzero(weight) / max(weight.size, 1)
    if batch == 1 and dense_ratio > 0.5:
        if delay:
            return DelayDense(
                weights=weight,
                delays=np.full(weight.shape, delay, dtype=int),
                num_message_bits=bits,
                **scaled,
            )
        return Dense(weights=weight, num_message_bits=bits, **scaled)
    block = sp.kron(sp.identity(batch, format="csr"), sp.csr_matrix(weight), format="csr")
    block = block.astype(np.int32 if fixed else np.float64)
    if delay:  # the same sparsity structure as the weights (Lava warns on any other)
        delays = sp.csr_matrix(
            (np.full(block.nnz, delay, dtype=int), block.indices.copy(), block.indptr.copy()),
            shape=block.shape,
        )
        return DelaySparse(weights=block, delays=delays, num_message_bits=bits)
    return Sparse(weights=block, num_message_bits=bits, **scaled)


def build_processes(net: LavaNetwork, batch: int, data: np.ndarray, steps: int) -> dict[str, Any]:
    """Processes for one batch size; a population at depth d first gets input at Lava step d,
    so ``LIFReset`` zeroes its u and v right then, every run of ``length`` steps: no state
    has to be reset (or bias set) through Lava's slow Var.set between calls. A bias into a
    synaptic current comes from a second source, one constant channel per sample during the
    ``steps`` input steps (``BIAS_SOURCE``)."""
    from lava.proc.io.sink import RingBuffer as Sink

    fixed = net.fixed is not None
    length = data.shape[1]
    source, sources = _sources(net, batch, data, steps)
    pops: dict[str, Any] = {}
    sinks = {}
    for k, layer in enumerate(net.layers):
        q = net.fixed[k] if fixed else None
        n = int(np.prod(layer.shape)) * batch
        if layer.spiking:  # built first: a recurrent synapse reads its own spikes
            target = pops[layer.name] = _population(layer, q, n, batch, length)
        else:
            target = sink = Sink(shape=(n,), buffer=length)
        for j, edge in enumerate(layer.synapses):  # Lava sums every connection into a_in
            key = _source_key(edge.source, q)
            graded = key in sources
            syn = _synapse(
                q.weights[j] if q else edge.weight,
                batch,
                graded=graded,
                fixed=fixed,
                delay=edge.delay,
                weight_exp=q.weight_exps[j] if q else 0,
            )
            (sources[key] if graded else pops[edge.source]).s_out.connect(syn.s_in)
            syn.a_out.connect(target.a_in)
        if layer.spiking:
            sink = _spike_recorder(target, n, length, fixed)
        sinks[layer.name] = sink
    return {"source": source, "sinks": sinks}


def _source_key(source: str, q: Any) -> Any:
    """The key of a synapse's graded source in ``_sources``: the input's name, or for the
    bias channel ``(BIAS_SOURCE, value)``, one channel per integer value (fixed_pt picks it
    per population, ``FixedLayer.bias_scale``; 1 in floating_pt)."""
    return (BIAS_SOURCE, q.bias_scale if q else 1.0) if source == BIAS_SOURCE else source


def _sources(
    net: LavaNetwork, batch: int, data: np.ndarray, steps: int
) -> tuple[Any, dict[Any, Any]]:
    """The input ring buffer, and the source process of every graded input by key (the
    graph's inputs by name, and one constant bias channel per value the populations'
    ``BIAS_SOURCE`` synapses read, independent of the inputs' ``input_scale``)."""
    from lava.proc.io.source import RingBuffer as Source

    fixed = net.fixed is not None
    length = data.shape[1]
    source = Source(data=data)
    sources: dict[Any, Any] = {name: source for name in net.inputs}
    for k, layer in enumerate(net.layers):
        key = _source_key(BIAS_SOURCE, net.fixed[k] if fixed else None)
        if key not in sources and any(syn.source == BIAS_SOURCE for syn in layer.synapses):
            ones = np.zeros((batch, length))
            ones[:, :steps] = key[1]
            sources[key] = Source(data=np.round(ones).astype(np.int32) if fixed else ones)
    return source, sources


def _population(layer: Layer, q: Any, n: int, batch: int, length: int) -> Any:
    """The ``LIFReset`` of spiking ``layer`` (``q``: its FixedLayer in fixed_pt, else None),
    zeroed at the step its input starts in every run of ``length`` steps."""
    from lava.proc.lif.process import LIFReset

    return LIFReset(
        shape=(n,),
        du=q.du if q else layer.du,
        dv=q.dv if q else layer.dv,
        vth=q.vth if q else 1.0,
        bias_mant=np.tile(q.bias_mant if q else layer.bias, batch),
        bias_exp=q.bias_exp if q else 0,
        reset_interval=length,
        reset_offset=(layer.depth + 1) % length,
    )


def _spike_recorder(lif: Any, n: int, length: int, fixed: bool) -> Any:
    """A sink recording ``lif``'s ``n`` spikes packed 8 per value (see packing_matrix)."""
    from lava.proc.io.sink import RingBuffer as Sink
    from lava.proc.sparse.process import Sparse

    weights = packing_matrix(n)
    packer = Sparse(weights=weights.astype(np.int32 if fixed else np.float64), num_message_bits=1)
    lif.s_out.connect(packer.s_in)
    sink = Sink(shape=(weights.shape[0],), buffer=length)
    packer.a_out.connect(sink.a_in)
    return sink


def _registries() -> tuple[Any, Any]:
    """Lava's process and Var servers: every Process and Var ever made is appended there and
    never removed, with its runtime, channels and shared memory (+1.4-1.8 MB and ~1,000
    objects a deploy, and a recurrent graph's every call, for the interpreter's life)."""
    from lava.magma.core.process.process import ProcessServer
    from lava.magma.core.process.variable import VarServer

    return ProcessServer(), VarServer()


def build_registered(net: LavaNetwork, batch: int, data: np.ndarray, steps: int) -> dict[str, Any]:
    """``build_processes``, remembering what it registered with Lava's servers so that
    ``forget`` drops it once the network is stopped (at once for a build that fails)."""
    procs, variables = _registries()
    first = len(procs.processes), len(variables.vars)
    try:
        built = build_processes(net, batch, data, steps)
    except BaseException:
        forget({"registered": (procs.processes[first[0] :], variables.vars[first[1] :])})
        raise
    built["registered"] = (procs.processes[first[0] :], variables.vars[first[1] :])
    return built


def forget(built: dict[str, Any]) -> None:
    """Drop a stopped network's processes and Vars from Lava's servers (``_registries``)."""
    made_procs, made_vars = built.pop("registered", ((), ()))
    procs, variables = _registries()
    gone = {id(p) for p in made_procs}
    procs.processes = [p for p in procs.processes if id(p) not in gone]
    gone = {id(v) for v in made_vars}
    variables.vars = [v for v in variables.vars if id(v) not in gone]


def stop_network(built: dict[str, Any], orderly: bool = True, bound: float = STOP_BOUND) -> None:
    """Stop a built network's Lava runtime, then ``forget`` it. ``orderly``: Lava's own stop
    (``Runtime.stop``) while every worker process lives, given ``bound`` seconds; otherwise,
    past the bound, or once the process got SIGTERM, ``end_runtime``. Lava's stop waits without
    end for answers that a run stopped mid-step (SIGTERM, Ctrl-C) or a dead worker (SIGTERM to
    the process group) never sends: the command then hung at exit."""
    from neuroedge.signals import terminating

    runtime = built["source"].runtime
    orderly = orderly and not terminating()
    try:
        if runtime is not None and not (orderly and _stopped_in_time(runtime, bound)):
            end_runtime(runtime)
    finally:
        forget(built)


def _stopped_in_time(runtime: Any, bound: float) -> bool:
    """Whether Lava's ``runtime.stop()`` ended within ``bound`` seconds (run in a daemon
    thread, so one stuck for good holds up nothing); False at once when a worker is gone."""
    if not all(_alive(actor) for actor in _actors(runtime)):
        return False
    failed: list[Exception] = []

    def stop() -> None:
        try:
            runtime.stop()
        except Exception as err:  # raised below, in the caller's thread
            failed.append(err)

    thread = threading.Thread(target=stop, name="lava-stop", daemon=True)
    thread.start()
    thread.join(bound)
    if failed:
        end_runtime(runtime)
        raise failed[0]
    return not thread.is_alive()


def _actors(runtime: Any) -> list[Any]:
    """The worker processes (``multiprocessing.Process``) of a Lava runtime."""
    return list(getattr(runtime._messaging_infrastructure, "actors", ()))


def _alive(actor: Any) -> bool:
    try:
        return actor.is_alive()
    except ValueError:  # closed: Lava joined it (after a worker's error)
        return False


def end_runtime(runtime: Any, grace: float = 1.0) -> None:
    """End a Lava runtime whose orderly stop cannot finish: its worker processes terminated
    (killed after ``grace`` seconds) and reaped, its channel threads released and its shared
    memory unlinked; Lava's own ``Runtime.__del__`` is kept from stopping it again."""
    from multiprocessing.connection import wait

    runtime._is_started = runtime._is_running = False
    actors = [a for a in _actors(runtime) if _alive(a)]
    for actor in actors:
        actor.terminate()
    wait([a.sentinel for a in actors], timeout=grace)
    for actor in _actors(runtime):  # those dead before (a signal to the group) too
        if _alive(actor):  # an orderly stop past its bound may have joined (closed) it
            actor.kill()
        _reap(actor)
    ports = (*runtime._open_ports, *runtime.runtime_to_service, *runtime.service_to_runtime)
    for port in ports:
        port.join()  # releases the port's thread, blocked on a semaphore
    runtime._open_ports.clear()
    smm = getattr(runtime._messaging_infrastructure, "smm", None)
    if smm is not None:
        _release_memory(smm)


def _reap(actor: Any) -> None:
    """Join an ended worker and release its descriptors, as Lava's own ``SystemProcess.join``
    would: its error pipe (both ends) and its sentinel, which otherwise stayed open until a
    garbage collection found the runtime's cycles. No-ops where Lava did it already."""
    import multiprocessing as mp

    # closed meanwhile (ValueError): joined by an orderly stop that ran past its bound
    with contextlib.suppress(ValueError):
        if actor._popen is not None:  # started
            mp.Process.join(actor)  # Lava's SystemProcess.join has no timeout; this one's done
            mp.Process.close(actor)
    for conn in (getattr(actor, "_pconn", None), getattr(actor, "_cconn", None)):
        if conn is not None:
            conn.close()
    actor._is_done = True


def _release_memory(smm: Any) -> None:
    """Shut down the shared memory manager of a Lava runtime (its server unlinks every block),
    then unlink from here what a dead server could not. The handles' mappings stay (a port's
    arrays may still view them); their file descriptors are closed, which leaves a mapping
    valid (each mapping keeps its own until the runtime's objects are collected)."""
    handles, smm._shared_memory_handles = list(smm._shared_memory_handles), []
    manager, smm._manager = smm._manager, None
    if hasattr(manager, "shutdown"):  # set once started
        manager.shutdown()  # bounded: waits 1 s for its server, then terminates it
    for handle in handles:
        with contextlib.suppress(FileNotFoundError):
            handle.unlink()
        if getattr(handle, "_fd", -1) >= 0:  # POSIX; SharedMemory.close skips it once -1
            os.close(handle._fd)
            handle._fd = -1
