"""Exports: ONNX (onnx.py), and further targets, each Program -> file on disk."""
