#!/usr/bin/env bash
# Builds the VMs' kernel and initramfs: a Debian 12 kernel and a busybox
# initramfs holding the RDMA modules, a siw.ko built out of tree, the
# kernel's NVMe-oF RDMA target and RAM disk modules (loaded on demand),
# rdma-core's user space (rping, perftest, rstream, the siw provider,
# `rdma`), and vfio-pci for a NIC given to DPDK. Everything comes from
# Debian's archive through apt, into a cache directory; nothing is
# installed on the host.
# The siw VM (run.sh here) boots it as it is; the PCI VMs of scripts/vm/
# append an archive with uwarp's binaries and DPDK's libraries.
#
# Usage: scripts/siw-vm/build.sh [CACHE_DIR]      (default: target/siw-vm)
#
# Prints the cache's out/ directory (vmlinuz, initramfs.cpio.gz, versions)
# on stdout. A second run does nothing unless a package version or one of
# this directory's scripts changed since the last build.
#
# Debian 12 builds its kernels without siw (CONFIG_RDMA_SIW unset), so
# siw.ko is compiled from linux-source-6.1's drivers/infiniband/sw/siw
# against linux-headers of the very linux-image the VM boots. Upstream,
# siw's MPA options are compile-time constants; a small edit applied here
# makes them module parameters (the VM's init passes them to insmod):
#   mpa_crc_required  (bool, 0)  ask for CRCs as initiator, insist as responder
#   mpa_crc_strict    (bool, 0)  reject a peer whose CRC setting differs
#   mpa_version       (byte, 2)  MPA revision siw's Requests use
#   peer_to_peer      (bool, 0)  siw's Requests ask for peer-to-peer mode
#   rtr_write, rtr_read (bool, 1 each)  the RTR types those Requests offer
#
# Needs apt-get (Debian 12's archive), gcc-12 and make (build-essential),
# modinfo (kmod), xz and gzip: scripts/setup.sh installs them.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="$(realpath -m "${1:-$repo/target/siw-vm}")"
out="$cache/out"
mkdir -p "$cache"

log() { echo "siw-vm build [${SECONDS}s]: $*" >&2; }
die() { log "$*"; exit 1; }

# --- which packages, at which versions ---------------------------------

# "PACKAGE=VERSION" lines: the candidate versions apt would install, with
# no line for a package apt knows no candidate of.
candidates() {
    apt-cache policy "$@" 2>/dev/null | awk '
        /^[^ ].*:$/ { pkg = substr($0, 1, length($0) - 1) }
        /^ *Candidate:/ && $2 != "(none)" { print pkg "=" $2 }'
}

# The first dependency of PACKAGE whose name starts with PREFIX.
dependency() {
    apt-cache depends "$1" | sed -n "s/^ *Depends: \($2[^ ]*\)$/\1/p" | head -n 1
}

if [ -z "$(candidates linux-image-amd64)" ]; then
    log "apt knows no linux-image-amd64: apt-get update"
    if [ "$(id -u)" -eq 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
fi

image="$(dependency linux-image-amd64 linux-image-)"
[ -n "$image" ] || die "linux-image-amd64 depends on no linux-image-* package"
krel="${image#linux-image-}"                     # e.g. 6.1.0-56-amd64
headers="linux-headers-$krel"
common="$(dependency "$headers" linux-headers-)"
kbuild="$(dependency "$headers" linux-kbuild-)"
source_pkg="linux-source-${kbuild#linux-kbuild-}"   # linux-source-6.1

kernel_pkgs=("$image" "$headers" "$common" "$kbuild" "$source_pkg")
# rdma-core's user space and what its programs link (the host's libc and
# the other base libraries come from the host, which is Debian 12 too).
user_pkgs=(busybox-static rdmacm-utils perftest librdmacm1 libibverbs1
    ibverbs-providers libnl-3-200 libnl-route-3-200 libibumad3 libpci3
    iproute2 libmnl0 libbpf1 libelf1 libcap2 libbsd0 libmd0 libdb5.3
    libselinux1 libtirpc3 libxtables12)

versions="$(candidates "${kernel_pkgs[@]}" "${user_pkgs[@]}")"$'\n'
for pkg in "${kernel_pkgs[@]}" "${user_pkgs[@]}"; do
    grep -q "^$pkg=" <<< "$versions" || die "apt has no candidate for $pkg"
done
versions+="scripts=$(cat "$here/build.sh" "$here/init.sh" | sha256sum | cut -d' ' -f1)"$'\n'

if [ -f "$out/versions" ] && [ "$(cat "$out/versions")" = "${versions%$'\n'}" ] \
    && [ -f "$out/vmlinuz" ] && [ -f "$out/initramfs.cpio.gz" ]; then
    echo "$out"
    exit 0
fi

# --- download and unpack -----------------------------------------------

debs="$cache/debs"
rm -rf "$cache/kernel" "$cache/user" "$cache/siw" "$cache/root" "$out"
mkdir -p "$debs" "$cache/kernel" "$cache/user" "$out"
# The .deb of PACKAGE at the version the stamp records (apt's file names
# write an epoch's colon as %3a); empty until it is downloaded.
deb() {
    local version
    version="$(sed -n "s/^$1=//p" <<< "$versions")"
    compgen -G "$debs/$1_${version/:/%3a}_*.deb" || true
}
missing=()
for pkg in "${kernel_pkgs[@]}" "${user_pkgs[@]}"; do
    [ -n "$(deb "$pkg")" ] || missing+=("$(grep "^$pkg=" <<< "$versions")")
done
if [ "${#missing[@]}" -gt 0 ]; then
    log "downloading ${#missing[@]} packages for $krel"
    (cd "$debs" && apt-get download -q -o APT::Sandbox::User="$(id -un)" "${missing[@]}" >/dev/null)
fi
# Versions no longer wanted.
keep=()
for pkg in "${kernel_pkgs[@]}" "${user_pkgs[@]}"; do keep+=("$(deb "$pkg")"); done
for file in "$debs"/*.deb; do
    [[ " ${keep[*]} " == *" $file "* ]] || rm -f "$file"
done

log "unpacking"
for pkg in "$image" "$headers" "$common" "$kbuild"; do
    dpkg-deb -x "$(deb "$pkg")" "$cache/kernel"
done
for pkg in "${user_pkgs[@]}"; do
    dpkg-deb -x "$(deb "$pkg")" "$cache/user"
done

# --- siw.ko ------------------------------------------------------------

log "extracting drivers/infiniband/sw/siw from $source_pkg"
mkdir -p "$cache/siw"
dpkg-deb --fsys-tarfile "$(deb "$source_pkg")" \
    | tar -xO "./usr/src/$source_pkg.tar.xz" \
    | tar -xJ -C "$cache/siw" --strip-components=5 --wildcards "$source_pkg/drivers/infiniband/sw/siw/*"
siw="$cache/siw"

# The compile-time options become module parameters (see the header).
sed -i -E 's/^extern const bool (mpa_crc_required|mpa_crc_strict|peer_to_peer);/extern bool \1;/' "$siw/siw.h"
sed -i -E \
    -e 's/^const bool (mpa_crc_required|mpa_crc_strict|peer_to_peer);/bool \1;\nmodule_param(\1, bool, 0644);/' \
    -e 's/^u_char mpa_version = MPA_REVISION_2;/&\nmodule_param(mpa_version, byte, 0644);/' \
    "$siw/siw_main.c"
sed -i -E 's/^static __be16 rtr_type = .*;$/static bool rtr_write = true, rtr_read = true;\nmodule_param(rtr_write, bool, 0644);\nmodule_param(rtr_read, bool, 0644);\n#define rtr_type ((rtr_write ? MPA_V2_RDMA_WRITE_RTR : 0) | (rtr_read ? MPA_V2_RDMA_READ_RTR : 0))/' \
    "$siw/siw_cm.c"
params="$(cat "$siw"/siw_main.c "$siw"/siw_cm.c | grep -c '^module_param(' || true)"
[ "$params" -eq 6 ] || die "the siw source changed: made $params of 6 module parameters"

kdir="$cache/kernel/usr/src/$headers"
# Debian's per-flavour Makefile includes the common headers by absolute path.
sed -i "s|^include /usr/src/|include $cache/kernel/usr/src/|" "$kdir/Makefile"
log "building siw.ko against $headers"
make -s -C "$kdir" M="$siw" CONFIG_RDMA_SIW=m modules -j"$(nproc)" >"$cache/siw-build.log" 2>&1 \
    || { cat "$cache/siw-build.log" >&2; die "siw.ko did not build"; }

# --- the initramfs -----------------------------------------------------

log "assembling the initramfs"
root="$cache/root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,etc/libibverbs.d,modules,usr/lib/x86_64-linux-gnu,lib64}
ln -s usr/lib "$root/lib"
cp "$cache/user/bin/busybox" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"   # the init links the other applets
install -m 0755 "$here/init.sh" "$root/init"

# Kernel modules: the ones named here and everything they depend on, in
# an order where each comes after its dependencies (the init insmods them).
moddir="$cache/kernel/lib/modules/$krel"
declare -A module_path=()
while IFS= read -r path; do
    name="$(basename "$path" .ko)"
    module_path["${name//-/_}"]="$path"
done < <(find "$moddir" -name '*.ko')
module_path[siw]="$siw/siw.ko"
order=()
declare -A placed=()
place() {
    local name="${1//-/_}" dep
    [ -z "${placed[$name]:-}" ] || return 0
    [ -n "${module_path[$name]:-}" ] || die "no module $name in $image"
    placed[$name]=1
    for dep in $(modinfo -F depends "${module_path[$name]}" | tr ',' ' '); do
        place "$dep"
    done
    order+=("$name")
}
for name in crc32c_generic virtio_pci virtio_net ib_core ib_uverbs iw_cm rdma_cm rdma_ucm siw \
    vfio_pci vfio_iommu_type1; do
    place "$name"
done
booted=${#order[@]}
# Modules the init does not load, for the commands that want them (in
# /modules/later, the same order; the command insmods them, with its own
# parameters): the kernel's NVMe over Fabrics target on RDMA (nvmet,
# nvmet_rdma, configfs to configure it) and the RAM disk it serves (brd).
for name in brd nvmet nvmet_rdma; do
    place "$name"
done
for name in "${order[@]}"; do
    cp "${module_path[$name]}" "$root/modules/$name.ko"
done
printf '%s\n' "${order[@]:0:booted}" > "$root/modules/order"
printf '%s\n' "${order[@]:booted}" > "$root/modules/later"

# User space: the programs, the siw provider, and every library they load.
libdirs="$cache/user/usr/lib/x86_64-linux-gnu:$cache/user/lib/x86_64-linux-gnu"
provider="$(ls "$cache"/user/usr/lib/x86_64-linux-gnu/libibverbs/libsiw-rdmav*.so)"
for program in rping ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_read_lat ib_send_lat rdma rstream; do
    install -D -m 0755 "$cache/user/usr/bin/$program" "$root/usr/bin/$program"
done
install -D -m 0644 "$provider" "$root/usr/lib/x86_64-linux-gnu/libibverbs/$(basename "$provider")"
cp "$cache/user/etc/libibverbs.d/siw.driver" "$root/etc/libibverbs.d/"
for file in "$root"/usr/bin/* "$root/usr/lib/x86_64-linux-gnu/libibverbs/$(basename "$provider")"; do
    [ -L "$file" ] && continue
    ldd_out="$(LD_LIBRARY_PATH="$libdirs" ldd "$file")"
    if grep -q 'not found' <<< "$ldd_out"; then
        die "$(basename "$file") needs libraries neither the packages nor the host have: $ldd_out"
    fi
    while read -r lib; do
        cp -L "$lib" "$root/usr/lib/x86_64-linux-gnu/$(basename "$lib")"
    done < <(sed -n 's/.*=> \(\/[^ ]*\) (0x.*/\1/p' <<< "$ldd_out")
done
cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
# glibc loads libgcc_s at run time when a thread exits (rping's threads do).
cp -L /lib/x86_64-linux-gnu/libgcc_s.so.1 "$root/usr/lib/x86_64-linux-gnu/"
log "packing the initramfs"

(cd "$root" && find . | LC_ALL=C sort | "$root/bin/busybox" cpio -o -H newc 2>/dev/null) \
    | gzip -1 > "$out/initramfs.cpio.gz"
cp "$cache/kernel/boot/vmlinuz-$krel" "$out/vmlinuz"
printf '%s' "${versions%$'\n'}" > "$out/versions"
# The unpacked packages (half a gigabyte) are not needed any more; the
# .debs stay for the next build.
rm -rf "$cache/kernel" "$cache/user" "$cache/root"
log "built $out: kernel $krel, siw from $(grep "^$source_pkg=" <<< "$versions"), initramfs $(du -h "$out/initramfs.cpio.gz" | cut -f1)"
echo "$out"
