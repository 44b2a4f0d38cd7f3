# shellcheck shell=bash
# Sourced by the VM runners (run.sh here, scripts/vm/run.sh): how to run
# qemu's guests on this host.

# vm_accel MODE KERNEL STAMPDIR: prints the accelerator for MODE (auto:
# kvm when it boots KERNEL here, tcg otherwise; kvm or tcg as given);
# fails on any other MODE.
#
# /dev/kvm may open where nested virtualization still cannot run a guest
# (the kernel then hangs right after the real-mode setup). A kernel with no
# root file system panics and reboots within a second under a working KVM;
# the answer is kept in STAMPDIR per host kernel and qemu.
vm_accel() {
    local mode="$1" kernel="$2" stamps="$3" stamp
    case "$mode" in
    kvm|tcg) echo "$mode"; return 0 ;;
    auto) ;;
    *) return 1 ;;
    esac
    if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
        echo tcg
        return 0
    fi
    stamp="$stamps/kvm-$(uname -r)-$(qemu-system-x86_64 --version | head -n 1 | tr -c 'A-Za-z0-9.\n' _)"
    if [ ! -f "$stamp" ]; then
        if timeout 10 qemu-system-x86_64 -accel kvm -cpu max -m 128 -nodefaults -display none \
            -no-reboot -kernel "$kernel" -append "console=ttyS0 panic=-1" -serial stdio \
            < /dev/null 2>/dev/null | grep -q "Kernel panic"; then
            echo yes > "$stamp"
        else
            echo no > "$stamp"
        fi
    fi
    if [ "$(cat "$stamp")" = yes ]; then echo kvm; else echo tcg; fi
}
