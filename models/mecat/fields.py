"""DATE's tie band per MECAT caption field (the authors' ``subset_data_delta``); no heavy
imports, so the spec and the bench defaults can read it without loading torch."""

from __future__ import annotations

DELTA = {
    "long": 0.1703,
    "short": 0.1772,
    "speech": 0.2078,
    "music_pure": 0.1566,
    "music_mixed": 0.1851,
    "sound_pure": 0.1988,
    "sound_mixed": 0.2593,
    "environment": 0.2150,
}
DEFAULT_DELTA = 0.2  # the authors' fallback for a field not in the table
