"""Backends: one module each (null, host, onnxrt, ...); see neuroedge.registry.BACKENDS."""
