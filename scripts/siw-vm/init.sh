#!/bin/sh
# The VMs' /init (busybox sh), put into the initramfs by build.sh.
#
# It loads the kernel modules in /modules/order (siw.ko with the
# parameters of uwsiw.siw; those of /modules/later are for the command to
# load, e.g. the NVMe-oF target), gives eth0 the address uwsiw.ip, attaches siw
# to it (`rdma link add siw0 type siw netdev eth0`), runs the command of
# uwsiw.cmd, and powers off. uwsiw.siw is base64 on the kernel command
# line and uwsiw.cmd base64 of its gzip (run.sh writes them), so they may
# hold any octets, and a long command (a test's whole sequence) still
# fits the kernel's 2048-octet command line.
#
# The PCI VMs (scripts/vm/run.sh) also name their DPDK NICs, uwsiw.vfio=
# BDF[,BDF...]: the kernel's drivers never take them (driver_override is
# set before the modules load), vfio-pci does, and hugetlbfs is mounted
# at /dev/hugepages (the pages come from hugepages=N on the command line).
#
# Everything the command prints goes to the second serial port, which
# run.sh reads: first the line "uwsiw: ready" (siw is attached, the command
# starts), then the command's output, then "uwsiw: exit STATUS". A failure
# before the command ends with status 125 and says what failed.
export PATH=/usr/bin:/usr/sbin:/bin:/sbin LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu
/bin/busybox --install -s

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
out=/dev/ttyS1

# The value of kernel parameter $1, empty when absent.
param() {
    read -r cmdline < /proc/cmdline
    for word in $cmdline; do
        case "$word" in "$1="*) echo "${word#"$1"=}" ;; esac
    done
}

finish() {
    echo "uwsiw: exit $1" > "$out"
    sync
    reboot -f
}

# Keeps the PCI devices of uwsiw.vfio from the kernel's drivers.
reserve_for_vfio() {
    for bdf in $(param uwsiw.vfio | tr , ' '); do
        [ -e "/sys/bus/pci/devices/$bdf" ] || { echo "no PCI device $bdf"; return 1; }
        echo vfio-pci > "/sys/bus/pci/devices/$bdf/driver_override" || return 1
    done
}

# Gives the devices of uwsiw.vfio to vfio-pci, for DPDK.
bind_vfio() {
    vfio="$(param uwsiw.vfio | tr , ' ')"
    [ -n "$vfio" ] || return 0
    # The emulated IOMMU remaps no interrupts; vfio refuses it without this.
    echo 1 > /sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts || return 1
    for bdf in $vfio; do
        [ -e "/sys/bus/pci/drivers/vfio-pci/$bdf" ] || echo "$bdf" > /sys/bus/pci/drivers_probe
        [ -e "/sys/bus/pci/drivers/vfio-pci/$bdf" ] || { echo "vfio-pci did not take $bdf"; return 1; }
    done
    mkdir -p /dev/hugepages /var/run
    mount -t hugetlbfs nodev /dev/hugepages || return 1
}

setup() {
    reserve_for_vfio || return 1
    siw_params="$(param uwsiw.siw | base64 -d)" || return 1
    while read -r module; do
        args=""
        [ "$module" = siw ] && args="$siw_params"
        # Word splitting of $args is wanted: one module parameter per word.
        # shellcheck disable=SC2086
        insmod "/modules/$module.ko" $args || { echo "insmod $module $args failed"; return 1; }
    done < /modules/order
    ip link set lo up
    ip addr add "$(param uwsiw.ip)" dev eth0 || return 1
    ip link set eth0 up || return 1
    rdma link add siw0 type siw netdev eth0 || return 1
    bind_vfio
}

if ! setup > "$out" 2>&1; then
    finish 125
fi
cmd="$(param uwsiw.cmd | base64 -d | gunzip -c)"
echo "uwsiw: ready" > "$out"
sh -c "$cmd" > "$out" 2>&1 < /dev/null
finish $?
