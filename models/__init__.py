"""Models and methods, one folder each (spec.py, functional.py, module.py, train.py, data.py)."""
