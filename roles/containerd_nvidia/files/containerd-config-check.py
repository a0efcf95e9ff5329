"""Load a containerd configuration with the installed containerd and check its nvidia runtime.

Installed by the gpufleet.node.containerd_nvidia role and used as the ``validate`` command of the
configuration file: the candidate is loaded by ``containerd --config FILE config dump`` (the
containerd that will run it), the dump is parsed as TOML and must show the nvidia runtime with the
expected BinaryName and SystemdCgroup, and the chosen default runtime. Prints a JSON summary.
Exit codes: 0 ok, 1 check failed, 2 containerd could not load the file.
"""

import argparse
import json
import subprocess
import sys

try:
    import tomllib

    def parse_toml(text):
        return tomllib.loads(text)

except ImportError:  # Python < 3.11: Debian/Ubuntu package python3-toml
    import toml

    def parse_toml(text):
        return toml.loads(text)


def str2bool(value):
    if value.lower() in ("true", "yes", "1"):
        return True
    if value.lower() in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError("expected true or false, got %r" % value)


def cri_runtime_section(dump):
    """Return (config version, the CRI section that holds `containerd.runtimes`)."""
    version = int(dump.get("version", 1))
    plugins = dump.get("plugins", {})
    name = "io.containerd.cri.v1.runtime" if version >= 3 else "io.containerd.grpc.v1.cri"
    return version, name, plugins.get(name, {}).get("containerd", {})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--containerd", default="containerd")
    parser.add_argument("--config", required=True)
    parser.add_argument("--runtime-name", required=True)
    parser.add_argument("--binary-name", required=True)
    parser.add_argument("--default-runtime", required=True)
    parser.add_argument("--systemd-cgroup", type=str2bool)
    parser.add_argument("--privileged-without-host-devices", type=str2bool)
    parser.add_argument("--config-version", type=int)
    args = parser.parse_args()

    proc = subprocess.run(
        [args.containerd, "--config", args.config, "config", "dump"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write("containerd could not load %s: %s\n" % (args.config, proc.stderr.strip() or proc.stdout.strip()))
        return 2
    try:
        dump = parse_toml(proc.stdout)
    except Exception as exc:  # pylint: disable=broad-except
        sys.stderr.write("output of 'containerd config dump' is not TOML: %s\n" % exc)
        return 2

    version, section_name, section = cri_runtime_section(dump)
    runtimes = section.get("runtimes", {})
    runtime = runtimes.get(args.runtime_name)
    errors = []
    if args.config_version is not None and version != args.config_version:
        errors.append("config version is %s, expected %s" % (version, args.config_version))
    if runtime is None:
        errors.append("no runtime %r in plugins.%r.containerd.runtimes (found: %s)"
                      % (args.runtime_name, section_name, ", ".join(sorted(runtimes)) or "none"))
    else:
        options = runtime.get("options", {}) or {}
        if runtime.get("runtime_type") != "io.containerd.runc.v2":
            errors.append("runtime %r has runtime_type %r, expected 'io.containerd.runc.v2'"
                          % (args.runtime_name, runtime.get("runtime_type")))
        if options.get("BinaryName") != args.binary_name:
            errors.append("runtime %r has BinaryName %r, expected %r"
                          % (args.runtime_name, options.get("BinaryName"), args.binary_name))
        if args.systemd_cgroup is not None and options.get("SystemdCgroup", False) != args.systemd_cgroup:
            errors.append("runtime %r has SystemdCgroup %r, expected %r"
                          % (args.runtime_name, options.get("SystemdCgroup"), args.systemd_cgroup))
        if (args.privileged_without_host_devices is not None
                and runtime.get("privileged_without_host_devices", False) != args.privileged_without_host_devices):
            errors.append("runtime %r has privileged_without_host_devices %r, expected %r"
                          % (args.runtime_name, runtime.get("privileged_without_host_devices"),
                             args.privileged_without_host_devices))
    default_runtime = section.get("default_runtime_name")
    if default_runtime != args.default_runtime:
        errors.append("default_runtime_name is %r, expected %r" % (default_runtime, args.default_runtime))

    summary = {
        "config_version": version,
        "cri_section": section_name,
        "default_runtime_name": default_runtime,
        "runtimes": runtimes,
    }
    if errors:
        sys.stderr.write("containerd loaded %s but: %s\n" % (args.config, "; ".join(errors)))
        return 1
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
