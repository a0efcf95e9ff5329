"""The playbooks' Kubernetes identity in the lab: ``playbooks/access.yml`` run as the lab's admin at ``kube up``.

The lab's inventory points ``gpu_node_join_kubeconfig`` at the kubeconfig it writes, so that every playbook under
test runs with exactly the verbs the collection grants itself, not as cluster-admin (docs/access.md).
"""

from __future__ import annotations

import os
import sys

from gpufleet_lab.common import REPO_ROOT, LabSettings
from gpufleet_lab.gpuprofiles import _ansible_playbook
from gpufleet_lab.proc import LabError, log, run

PLAYBOOK = REPO_ROOT / "playbooks" / "access.yml"


def playbook_argv(settings: LabSettings, ansible_playbook: str, python: str) -> list[str]:
    """The access playbook as an admin runs it, on the implicit localhost with the lab's Python."""
    return [
        ansible_playbook, "-i", "localhost,", "-c", "local",
        "-e", f"ansible_python_interpreter={python}",
        "-e", f"access_admin_kubeconfig={settings.admin_kubeconfig}",
        "-e", f"access_kubeconfig={settings.node_kubeconfig}",
        str(PLAYBOOK),
    ]


def ensure(settings: LabSettings) -> None:
    """Create (or confirm) the identity and write its kubeconfig; idempotent."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"))
    result = run(playbook_argv(settings, _ansible_playbook(), sys.executable), env=env, check=False, quiet=True)
    if result.returncode != 0:
        raise LabError(f"playbooks/access.yml failed:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
    log(f"playbooks' identity: {settings.node_kubeconfig}")
