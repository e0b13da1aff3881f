"""Event-camera data: numpy structured event arrays, file formats, streaming, a simulator.

Events are one numpy structured array with fields ``t`` (int64, microseconds), ``x``, ``y``
(int16, pixels) and ``p`` (uint8 polarity, 0 = OFF, 1 = ON), the layout tonic and expelliarmus
use, so arrays pass between them without copies. Submodules:

* ``neuroedge.events.core``: the dtype, ``make_events`` and ``check_events`` (order, negative
  times, out-of-sensor coordinates: rejected, or repaired only by an explicit option).
* ``neuroedge.events.codecs`` (with ``evt3``): Prophesee DAT, EVT 2.0, EVT 3.0 and the
  N-MNIST / N-Caltech101 ATIS ``.bin`` layouts, decoded with state carried between chunks.
* ``neuroedge.events.aedat4`` (with ``flatbuffer``): iniVation AEDAT 4.0 (DV; DAVIS,
  DVXplorer), packet by packet, LZ4 / Zstandard / uncompressed, the event stream chosen by id.
* ``neuroedge.events.io``: ``read_events``, ``stream_events`` (bounded-memory chunks),
  ``write_events`` (atomic), format detection from headers, magic bytes and suffixes.
* ``neuroedge.events.datasets``: N-CARS and Gen1 folder layouts, Gen1 ``*_bbox.npy`` boxes.
* ``neuroedge.events.simulator`` and ``neuroedge.events.generate``: a DVS pixel model and the
  N-CARS-like / Gen1-like dataset generators.
"""

from neuroedge.events.core import (
    EVENT_DTYPE,
    EventFormatError,
    SensorSize,
    check_events,
    make_events,
)

__all__ = ["EVENT_DTYPE", "EventFormatError", "SensorSize", "check_events", "make_events"]
