//! Build script of `uwarp-dataplane`: compiles the XDP steering program of
//! AF_XDP ports beside the kernel (`bpf/uwarp_steer.bpf.c`) into an
//! object in `OUT_DIR`, which `af_xdp::program` embeds, and links libbpf,
//! through which `af_xdp::port_map` finds the program's map of ports.
//!
//! The program is compiled with clang's BPF target (`CLANG` names another
//! clang); it includes the kernel's UAPI headers and libbpf's
//! `bpf_helpers.h` (Debian: `clang`, `libbpf-dev`, installed by
//! `scripts/setup.sh`). `-g` gives the BTF that libbpf reads the maps'
//! definitions from.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const SOURCE: &str = "bpf/uwarp_steer.bpf.c";

fn main() {
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rustc-link-lib=bpf");

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let object = out.join("uwarp_steer.bpf.o");
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".to_owned());
    // The kernel's headers include <asm/types.h>, which Debian keeps under
    // the multiarch directory of the machine the program is built on.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
        .arg(format!("-I{multiarch}"))
        .args(["-c", SOURCE, "-o"])
        .arg(&object)
        .status();
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => panic!(
            "\n\nuwarp-dataplane: {clang} could not compile {SOURCE} ({status}).\n\
             It needs the kernel's headers and libbpf's: on Debian/Ubuntu\n    \
             apt-get install clang libbpf-dev linux-libc-dev\n\n"
        ),
        Err(e) => panic!(
            "\n\nuwarp-dataplane: cannot run {clang} to compile {SOURCE} ({e}).\n\
             Install clang (set CLANG to use another), on Debian/Ubuntu:\n    \
             apt-get install clang libbpf-dev\n\n"
        ),
    }
}
