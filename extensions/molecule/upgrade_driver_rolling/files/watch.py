"""API watcher of the upgrade scenario: every half second, one JSON line with the cordoned nodes, each node's
upgrade state, the GPU pod and the spread Deployment's ready replicas. Runs until killed."""
import json
import sys
import time

from kubernetes import client, config

config.load_kube_config(sys.argv[1])
core, apps = client.CoreV1Api(), client.AppsV1Api()
with open(sys.argv[2], "a", encoding="utf-8") as out:
    while True:
        try:
            nodes = core.list_node().items
            pods = core.list_namespaced_pod("default").items
            spread = apps.read_namespaced_deployment("spread", "default")
            out.write(json.dumps({
                "t": time.time(),
                "cordoned": sorted(n.metadata.name for n in nodes if n.spec.unschedulable),
                "state": {n.metadata.name: (n.metadata.labels or {}).get("gpufleet.io/driver-upgrade-state", "") for n in nodes},
                "gpu_pod": any(p.metadata.name == "gpu-job" for p in pods),
                "spread_ready": spread.status.ready_replicas or 0,
            }) + "\n")
            out.flush()
        except Exception as error:  # a failed poll is recorded, never fatal
            out.write(json.dumps({"t": time.time(), "error": str(error)}) + "\n")
        time.sleep(0.5)
