#!/usr/bin/env bash
# Provisions one VM of the two-VM testbed; vagrant/Vagrantfile runs it as
# root on every boot. It installs the system packages (scripts/setup.sh)
# and, for the user vagrant, Rust (rustup) when cargo is missing; builds
# uwarp-perf in release and links it as /usr/local/bin/uwarp-perf; reserves
# hugepages (scripts/hugepages.sh); loads vfio-pci and binds the NIC with
# DPDK_MAC to it with dpdk-devbind.py, behind the VM's IOMMU (Debian 12's
# kernel has no VFIO no-IOMMU mode; the provider must give the VM one).
#
# Usage: vagrant/provision.sh DPDK_MAC HUGEPAGES
#          DPDK_MAC   the MAC the Vagrantfile gave the NIC for DPDK
#          HUGEPAGES  how many 2 MiB pages to reserve
#
# Idempotent: each step checks what is already there. The PCI address of
# the bound NIC is printed and kept in /run/uwarp-dpdk-nic, which lives
# exactly as long as the binding (until the next reboot).
set -euo pipefail

usage() { sed -n 's/^# \{0,1\}//;2,12p' "$0" >&2; exit 2; }

[ $# -eq 2 ] || usage
mac="${1,,}"
pages="$2"

repo=/uwarp
user=vagrant
home="$(getent passwd "$user" | cut -d: -f6)"
cargo="$home/.cargo/bin/cargo"
nic_state=/run/uwarp-dpdk-nic

# uwarp's packages; then dpdk (dpdk-devbind.py) and curl (for rustup).
bash "$repo/scripts/setup.sh"
bash "$repo/scripts/setup.sh" dpdk curl

# Debian 12's own cargo is older than the workspace's rust-version, so the
# toolchain is rustup's, in the user's home.
if [ ! -x "$cargo" ]; then
    echo "provision.sh: installing the Rust toolchain for $user with rustup"
    rustup_init="$(mktemp)"
    trap 'rm -f "$rustup_init"' EXIT
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs -o "$rustup_init"
    chmod a+r "$rustup_init"
    runuser -u "$user" -- sh "$rustup_init" -y --profile minimal
fi

echo "provision.sh: building uwarp-perf (release)"
cd "$repo"
runuser -u "$user" -- env PATH="$home/.cargo/bin:$PATH" \
    "$cargo" build --release -p uwarp-bench --bin uwarp-perf
ln -sfn "$repo/target/release/uwarp-perf" /usr/local/bin/uwarp-perf

bash "$repo/scripts/hugepages.sh" up "$pages"

# vfio-pci needs the VM's IOMMU: Debian 12's kernel is built without VFIO's
# no-IOMMU mode (CONFIG_VFIO_NOIOMMU), which a kernel that has it is put
# in instead. An emulated IOMMU without interrupt remapping is refused
# unless vfio_iommu_type1 allows it (as scripts/vm/ does).
modprobe vfio-pci
modprobe vfio_iommu_type1 allow_unsafe_interrupts=1
echo 1 > /sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts
if [ -z "$(ls -A /sys/kernel/iommu_groups 2>/dev/null)" ]; then
    # Debian's kernel leaves an Intel IOMMU off unless told: tell it, once,
    # and have the user reboot the VM (the Vagrantfile gives it one).
    if ! grep -q 'intel_iommu=on' /proc/cmdline; then
        if ! grep -q 'intel_iommu=on' /etc/default/grub; then
            sed -i 's/^GRUB_CMDLINE_LINUX="/&intel_iommu=on /' /etc/default/grub
            update-grub
        fi
        echo "provision.sh: the kernel now boots with intel_iommu=on;" \
            "run 'vagrant reload' to boot it and finish" >&2
        exit 1
    fi
    if [ -e /sys/module/vfio/parameters/enable_unsafe_noiommu_mode ]; then
        echo 1 > /sys/module/vfio/parameters/enable_unsafe_noiommu_mode
    else
        echo "provision.sh: this VM has no IOMMU and its kernel no VFIO no-IOMMU mode;" \
            "give the VM an IOMMU (see vagrant/README.md)" >&2
        exit 1
    fi
fi

iface=""
for dev in /sys/class/net/*; do
    if [ "$(cat "$dev/address")" = "$mac" ]; then
        iface="${dev##*/}"
    fi
done

if [ -n "$iface" ]; then
    # A virtio NIC's device link points at the virtio device under its PCI
    # function; the last PCI address on the path is the function's.
    pci="$(readlink -f "/sys/class/net/$iface/device" \
        | grep -oE '[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]' | tail -n 1)"
    dpdk-devbind.py --bind=vfio-pci "$pci"
    echo "$pci" > "$nic_state"
elif [ -e "$nic_state" ]; then
    pci="$(cat "$nic_state")"
else
    echo "provision.sh: no NIC has MAC $mac, and none was bound before" >&2
    exit 1
fi

driver=none
if [ -e "/sys/bus/pci/devices/$pci/driver" ]; then
    driver="$(basename "$(readlink -f "/sys/bus/pci/devices/$pci/driver")")"
fi
if [ "$driver" != vfio-pci ]; then
    echo "provision.sh: $pci is on driver $driver, not vfio-pci" >&2
    exit 1
fi
echo "provision.sh: DPDK NIC $pci (MAC $mac) on vfio-pci: --eal \"-a $pci\""
