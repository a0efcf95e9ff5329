"""gpufleet lab: the local test lab of the gpufleet.node collection (docker daemon, node images)."""
