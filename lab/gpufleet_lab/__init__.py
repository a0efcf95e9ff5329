"""gpufleet lab: the test lab of the gpufleet.node collection, one package with one command line (labctl).

The Docker daemon, the node images, the Kubernetes lab (a real control plane and kubelets on SIMULATED GPU
hosts), its generated inventory and the bench; see lab/README.md.
"""
