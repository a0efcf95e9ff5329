#!/usr/bin/env bash
# Make VENV (the checkout's .venv) the virtualenv of requirements-dev.txt.
#
#   tools/venv.sh PYTHON VENV
#
# A virtualenv is not relocatable, so it is built once per requirements-dev.txt and Python under
# $GPUFLEET_VENV_CACHE (default /var/cache/gpufleet/venv/<key>) and VENV becomes a link to it: a fresh clone on a
# machine that built it before pays nothing. Where that directory cannot be written, it is built in VENV itself.
set -euo pipefail
python=$1 venv=$2
cache=${GPUFLEET_VENV_CACHE:-/var/cache/gpufleet/venv}

build() {  # build DIR: a virtualenv with the pinned requirements, marked complete only when everything installed
    rm -rf "$1"
    "$python" -m venv "$1"
    "$1/bin/pip" install -q --upgrade pip
    "$1/bin/pip" install -q -r requirements-dev.txt
    touch "$1/.complete"
}

if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
    build "$venv"
    exit 0
fi
# The interpreter's version and installation (base_prefix is the same through a shim or a link).
key=$( { cat requirements-dev.txt; "$python" -c 'import sys; print(sys.version); print(sys.base_prefix)'; } \
       | sha256sum | cut -c1-12)
target=$cache/$key
(
    flock 9
    if [ ! -e "$target/.complete" ]; then
        echo "virtualenv: building $target"
        build "$target"
    fi
) 9>"$cache/.lock"
rm -rf "$venv"
ln -sfn "$target" "$venv"
echo "virtualenv: $venv -> $target"
