"""Measurement: latency, SOP/MAC counts, energy estimates, parity, reports and history."""
