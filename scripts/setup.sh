#!/usr/bin/env bash
# Installs every system package uwarp needs on Debian 12, idempotently.
#
# Usage: scripts/setup.sh [PACKAGE...]
#
# With no arguments it installs uwarp's packages (listed below); given
# package names it installs just those instead, the same way (this is how
# scripts/lint-scripts.sh and vagrant/provision.sh get their extra tools).
#
# With no arguments it also makes the venv /opt/uwarp/venv holding the
# Python packages of scripts/python-requirements.txt (pinned, hashed),
# with pip from PyPI; it is made again when that file changes.
#
# Works as root or as a user with sudo. Prints nothing when everything is
# already installed; otherwise says what it installs.
set -euo pipefail

# Packages, and why each one is here:
#   libdpdk-dev   DPDK 22.11 headers and shared libraries (the dataplane)
#   libclang-dev  libclang for bindgen (the dpdk-sys binding)
#   clang, libbpf-dev   compile uwarp's XDP steering program (dataplane/bpf/) for AF_XDP beside the kernel; link libbpf, which finds its map
#   pkg-config    finds libdpdk for the build
#   tshark        decodes uwarp's own frames in the interop tests
#   iproute2      network namespaces and veth pairs for test topologies
#   ethtool       turns checksum offloads off on the kernel side of a veth pair
#   iputils-ping  the kernel's ping, which the tap and veth tests aim at uwarp
#   dpdk-dev      dpdk-testpmd, the side-by-side reference of the poll-loop benchmark
#   build-essential, ca-certificates  C compiler for the DPDK shim (and siw.ko), TLS for crates.io
#   qemu-system-x86  boots the siw VM (scripts/siw-vm/)
#   kmod, xz-utils   modinfo and xz for scripts/siw-vm/build.sh's kernel modules and sources
#   cpio          packs uwarp's binaries into the PCI VMs' initramfs (scripts/vm/run.sh)
#   libibverbs-dev, librdmacm-dev   rdma-core's headers: the drop-in libraries' layout checks and C tests
#   ibverbs-utils, rdmacm-utils, perftest, qperf, fio   Debian's ibv_devinfo, rping, ib_*_bw/lat, qperf and fio, run unmodified on the drop-ins
#   libfabric-bin   libfabric's fi_info and fi_pingpong, its verbs provider run on the drop-ins
#   openmpi-bin, netpipe-openmpi, hpcc   Open MPI over libfabric on the drop-ins: NetPIPE, and hpcc's ping-pong and ring
#   tgt, libiscsi-bin, libiscsi-dev   tgt's iSER target and libiscsi's initiator (its tools, and a test program built on it) on the drop-ins
#   python3-venv  the venv for the Python packages (below)
#   gdb           the stacks of a program a test kills at its time limit
packages=(
    libdpdk-dev
    libclang-dev
    clang
    libbpf-dev
    pkg-config
    tshark
    iproute2
    ethtool
    iputils-ping
    dpdk-dev
    build-essential
    ca-certificates
    qemu-system-x86
    kmod
    xz-utils
    cpio
    libibverbs-dev
    librdmacm-dev
    ibverbs-utils
    rdmacm-utils
    perftest
    qperf
    fio
    libfabric-bin
    openmpi-bin
    netpipe-openmpi
    hpcc
    tgt
    libiscsi-bin
    libiscsi-dev
    python3-venv
    gdb
)

# The Python packages' venv, and the requirements it was made from (a copy
# kept in it says whether it is up to date).
venv=/opt/uwarp/venv
requirements="$(dirname "$0")/python-requirements.txt"
python=yes

if [ $# -gt 0 ]; then
    packages=("$@")
    python=no
fi

missing=()
for pkg in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done
if [ "$python" = yes ] && cmp -s "$requirements" "$venv/requirements.txt"; then
    python=no
fi

if [ "${#missing[@]}" -eq 0 ] && [ "$python" = no ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
else
    echo "setup.sh: missing packages (${missing[*]}) or Python packages, and neither root nor sudo is available" >&2
    exit 1
fi

if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    # wireshark-common asks whether non-root users may capture; answer "no" up front.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | "${sudo[@]}" debconf-set-selections
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$python" = yes ]; then
    echo "setup.sh: installing the Python packages of $requirements into $venv"
    "${sudo[@]}" rm -rf "$venv"
    "${sudo[@]}" /usr/bin/python3 -m venv "$venv"
    "${sudo[@]}" "$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir \
        --require-hashes -r "$requirements"
    "${sudo[@]}" cp "$requirements" "$venv/requirements.txt"
fi
echo "setup.sh: done"
