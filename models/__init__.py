"""Models and methods, one folder each (spec.py, functional.py, module.py, train.py, data.py).

Also callable: ``neuroedge.models()`` is the verb ``neuroedge.api.models`` (see verbs.py).
"""

from neuroedge.verbs import callable_as_verb

callable_as_verb(__name__)
