"""``python -m kubelab``: command-line entry of the Kubernetes lab."""

from __future__ import annotations

import sys

from kubelab.cli import main

sys.exit(main())
