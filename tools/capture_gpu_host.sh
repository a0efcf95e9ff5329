#!/usr/bin/env bash
# Capture what the collection's parsers read on a real NVIDIA GPU host, and what nvidia_gpu_check reports there,
# into DIR (one file per command: its output, then its exit status on the last line). Read-only: it changes nothing
# on the host. Runs from the collection's root; the module needs ansible-core importable (PYTHONPATH or a virtualenv).
#   tools/capture_gpu_host.sh DIR
# New fixtures go to tests/fixtures/nvidia/ with a line in their SOURCES.md naming the host, driver and command.
set -uo pipefail

dir=${1:?usage: tools/capture_gpu_host.sh DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"

capture() {  # capture NAME COMMAND...: stdout and stderr of COMMAND into DIR/NAME, then "# exit N"
  local name=$1
  shift
  { "$@" 2>&1; echo "# exit $?"; } >"$dir/$name"
}

fields=index,name,uuid,pci.bus_id,memory.total,persistence_mode,mig.mode.current,driver_version
capture host.txt bash -c 'uname -a; cat /etc/os-release; cat /proc/cmdline; nproc'
capture smi-version.txt nvidia-smi --version
capture smi-table.txt nvidia-smi
capture smi-L.txt nvidia-smi -L
capture query-gpu-csv-noheader-nounits.txt nvidia-smi --query-gpu=$fields --format=csv,noheader,nounits
capture query-gpu-csv.txt nvidia-smi --query-gpu=$fields --format=csv
capture smi-q.txt nvidia-smi -q
capture smi-q-x.xml nvidia-smi -q -x
capture smi-q-page-retirement.txt nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER
capture mig-lgip.txt nvidia-smi mig -lgip
capture mig-lgi.txt nvidia-smi mig -lgi
capture topo-m.txt nvidia-smi topo -m
capture proc-driver-nvidia-version.txt cat /proc/driver/nvidia/version
capture sys-module-nvidia-version.txt cat /sys/module/nvidia/version
capture proc-modules-nvidia.txt grep -i nvidia /proc/modules
capture proc-devices.txt cat /proc/devices
capture ls-l-dev-nvidia.txt bash -c 'ls -l /dev/nvidia*; ls -l /dev/nvidia-caps 2>&1; ls -l /dev/char | grep -e " 19[0-9]:" -e nvidia'
capture nvml-libraries.txt bash -c 'ldconfig -p | grep -i -e nvidia-ml -e libcuda; find / -xdev -name "libnvidia-ml.so*" 2>/dev/null'
capture kernel-log-nvidia.txt bash -c 'dmesg 2>&1 | grep -i -e nvrm -e xid -e nvidia | tail -n 200'
capture toolkit.txt bash -c 'for t in nvidia-ctk nvidia-container-cli nvidia-container-runtime nvidia-device-plugin; do
  command -v "$t" || echo "$t: not found"; done; nvidia-ctk --version; nvidia-container-cli --version; nvidia-container-cli info'
if command -v nvidia-ctk >/dev/null; then
  capture cdi-spec.yaml nvidia-ctk cdi generate --output=/dev/stdout
fi

# nvidia_gpu_check as a playbook runs it, from the collection's own files (ansible_collections/gpufleet/node -> root).
collections=$(mktemp -d)
mkdir -p "$collections/ansible_collections/gpufleet"
ln -s "$root" "$collections/ansible_collections/gpufleet/node"
module() {  # module NAME ARGS_JSON: run nvidia_gpu_check with ARGS_JSON, its JSON result into DIR/NAME
  local name=$1 args=$2
  printf '{"ANSIBLE_MODULE_ARGS": %s}' "$args" >"$collections/args.json"
  capture "$name" env PYTHONPATH="$collections${PYTHONPATH:+:$PYTHONPATH}" \
    python3 -m ansible_collections.gpufleet.node.plugins.modules.nvidia_gpu_check "$collections/args.json"
}
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
module check-expected.json "{\"expected_driver_version\": \"$driver\", \"expected_gpu_count\": $count,
  \"expected_mig_mode\": \"disabled\", \"fail_on_error\": false}"
module check-wrong-version.json '{"expected_driver_version": "535.261.03", "expected_gpu_count": 8, "fail_on_error": false}'
module check-fix-check-mode.json '{"fix_device_nodes": true, "fail_on_error": false, "_ansible_check_mode": true, "_ansible_diff": true}'
rm -rf "$collections"
echo "captured into $dir: $(ls "$dir" | wc -l) files"
