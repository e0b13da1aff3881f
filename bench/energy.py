"""Energy estimate from operation counts: E = E_MAC * MACs + E_AC * SOPs.

Default constants are Horowitz (ISSCC 2014) 45 nm: 4.6 pJ per 32-bit MAC, 0.9 pJ per
accumulate, as the SNN papers use. It ignores neuron updates and memory traffic, so it is an
*estimate* and is always labelled so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from neuroedge.types import Measurement


@dataclass(frozen=True)
class EnergyModel:
    name: str = "horowitz45nm"
    e_mac_pj: float = 4.6  # picojoules per multiply-accumulate
    e_ac_pj: float = 0.9  # picojoules per accumulate (one synaptic operation)

    def __post_init__(self) -> None:
        if not (0 <= self.e_mac_pj < math.inf and 0 <= self.e_ac_pj < math.inf):
            raise ValueError(
                f"energy constants must be finite and >= 0, got {self.e_mac_pj}, {self.e_ac_pj}"
            )

    def energy_pj(self, macs: float, sops: float) -> float:
        return self.e_mac_pj * macs + self.e_ac_pj * sops

    def measurement(self, macs: float, sops: float) -> Measurement:
        """Energy per sample in microjoules, labelled estimated."""
        return Measurement(self.energy_pj(macs, sops) * 1e-6, "uJ", "estimated")


HOROWITZ_45NM = EnergyModel()
