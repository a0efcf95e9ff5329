"""Build a one-layer OCI image archive around a static binary, for `ctr images import`.

No registry is reachable from the test lab, so the containerd scenarios build their workload image
from Debian's busybox-static: ``/bin/busybox`` plus applet links (sh, sleep, cat, ...). The archive
uses the OCI image layout and names the image through the ``io.containerd.image.name`` annotation.

Usage: build_oci_image.py --binary /bin/busybox --name lab.invalid/busybox:1 --out image.tar [--arch amd64]
Runs with the Python standard library only (it runs on the node).
"""

import argparse
import hashlib
import io
import json
import sys
import tarfile

APPLETS = ("sh", "sleep", "cat", "echo", "ls", "true")


def _add_bytes(archive, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    archive.addfile(info, io.BytesIO(data))


def _add_dir(archive, name):
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    info.mtime = 0
    archive.addfile(info)


def layer_bytes(binary_path):
    """Return an uncompressed layer tar: /bin/busybox, applet links, /tmp."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for directory in ("bin", "tmp", "proc", "sys", "dev", "etc"):
            _add_dir(archive, directory)
        with open(binary_path, "rb") as handle:
            _add_bytes(archive, "bin/busybox", handle.read(), 0o755)
        for applet in APPLETS:
            link = tarfile.TarInfo("bin/" + applet)
            link.type = tarfile.SYMTYPE
            link.linkname = "busybox"
            link.mtime = 0
            archive.addfile(link)
    return buffer.getvalue()


def blob(content):
    """Return (digest, bytes) of a JSON document or raw bytes."""
    data = content if isinstance(content, bytes) else json.dumps(content, sort_keys=True).encode()
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def build(binary_path, name, arch):
    """Return the bytes of an OCI image layout archive."""
    layer_digest, layer = blob(layer_bytes(binary_path))
    config_digest, config = blob({
        "architecture": arch,
        "os": "linux",
        "config": {"Cmd": ["/bin/sleep", "infinity"], "Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    })
    manifest_digest, manifest = blob({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": len(layer)}],
    })
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest,
            "size": len(manifest),
            "platform": {"architecture": arch, "os": "linux"},
            "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]},
        }],
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        _add_bytes(archive, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        _add_bytes(archive, "index.json", json.dumps(index, sort_keys=True).encode())
        _add_dir(archive, "blobs")
        _add_dir(archive, "blobs/sha256")
        for digest, data in ((layer_digest, layer), (config_digest, config), (manifest_digest, manifest)):
            _add_bytes(archive, "blobs/sha256/" + digest.split(":", 1)[1], data)
    return buffer.getvalue()


def main(argv=None):
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, help="static binary to put at /bin/busybox")
    parser.add_argument("--name", required=True, help="image name, e.g. lab.invalid/busybox:1")
    parser.add_argument("--out", required=True, help="archive to write")
    parser.add_argument("--arch", default="amd64")
    args = parser.parse_args(argv)
    data = build(args.binary, args.name, args.arch)
    with open(args.out, "wb") as handle:
        handle.write(data)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
