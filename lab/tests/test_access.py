"""The lab runs playbooks/access.yml as its admin, on the controller, and writes the identity's kubeconfig."""
from __future__ import annotations

from gpufleet_lab import access
from gpufleet_lab.common import LabSettings


def test_playbook_argv_runs_as_the_admin_on_localhost() -> None:
    settings = LabSettings.from_env({"GPUFLEET_LAB_NAME": "kube6", "GPUFLEET_LAB_API_PORT": "6449"})
    argv = access.playbook_argv(settings, "/venv/bin/ansible-playbook", "/venv/bin/python")
    assert argv[0] == "/venv/bin/ansible-playbook"
    assert argv[-1] == str(access.PLAYBOOK) and access.PLAYBOOK.is_file()
    assert argv[argv.index("-i") + 1] == "localhost,"
    extra = dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "-e")
    assert extra == {
        "ansible_python_interpreter": "/venv/bin/python",
        "access_admin_kubeconfig": "/var/lib/gpufleet-lab/kube6/admin.kubeconfig",
        "access_kubeconfig": "/var/lib/gpufleet-lab/kube6/gpufleet-node.kubeconfig",
    }
