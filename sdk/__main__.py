"""``python -m neuroedge ...``: the ``neuroedge`` command."""

import sys

from neuroedge.cli import main

sys.exit(main())
