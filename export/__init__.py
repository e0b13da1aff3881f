"""Exports: ONNX (onnx.py), and further targets, each Program -> file on disk.

Also callable: ``neuroedge.export(...)`` is the verb ``neuroedge.api.export`` (see verbs.py).
"""

from neuroedge.verbs import callable_as_verb

callable_as_verb(__name__)
