"""The gpufleet.node Kubernetes lab: a real control plane and real kubelets on SIMULATED GPU nodes.

Entry points for the lab CLI (``python -m kubelab --help``)::

    build_binaries()                        build/cache kube-* binaries, kubectl, pause
    up()                                    control plane (etcd, apiserver, controller-manager, scheduler)
    node_add(name, gpu_profile, kubelet_root_dir=None)
    node_rm(name)
    write_inventory(path=None)              Ansible inventory of the lab's nodes
    down()                                  remove everything the lab started
"""

from __future__ import annotations

from kubelab.binaries import build_binaries
from kubelab.inventory import write_inventory
from kubelab.lab import down, up
from kubelab.node import node_add, node_rm

__all__ = ["build_binaries", "up", "down", "node_add", "node_rm", "write_inventory"]
