"""Unit-test setup: shared helpers in this directory are importable from every test module.

pytest.ini puts .build/collections (the gpufleet.node symlink made by `make collection`) and lab/
on sys.path, so `ansible_collections.gpufleet.node` and the lab's packages import directly.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
