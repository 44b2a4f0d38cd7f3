//! Build script of `dpdk-sys`: finds the system DPDK with pkg-config,
//! compiles the C shim for DPDK's static inline functions and the net_memif
//! teardown guard (`csrc/memif_guard.c`), and generates the Rust bindings
//! with bindgen into `OUT_DIR`.
//!
//! Linking: pkg-config's `--libs libdpdk` lists the shared libraries of
//! DPDK's core (EAL, mempool, mbuf, ethdev, ...) but no poll-mode driver.
//! That is enough for every PMD: a shared DPDK build loads each `.so` of its
//! driver directory (`/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0` on Debian 12,
//! compiled into librte_eal as `DPDK_PLUGIN_PATH`) during `rte_eal_init`, so
//! `--vdev=net_ring0`, `net_tap`, `net_af_packet`, `net_memif`, and the
//! `ring_mp_mc` mempool driver all work without `-d`. The one exception is
//! `rte_eth_from_rings`, an ordinary exported function of the net_ring PMD
//! that uwarp calls to build cross-connected port pairs, and
//! `rte_vdev_init`/`rte_vdev_uninit` of the vdev bus driver, which create and
//! remove virtual devices at run time; those two libraries are linked
//! explicitly below. Debian's `librte_net_ring.so.23` in the library
//! directory is a symlink to the same file in the driver directory, so the
//! dynamic loader sees one object and the driver registers once.

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// The oldest DPDK whose API (the `RTE_ETH_*` names, `rte_eth_fp_ops`) the
/// bindings and the shim are written against.
const MIN_DPDK: &str = "22.11";

fn main() {
    println!("cargo:rerun-if-changed=csrc/shim.c");
    println!("cargo:rerun-if-changed=csrc/shim.h");
    println!("cargo:rerun-if-changed=csrc/memif_guard.c");
    println!("cargo:rerun-if-changed=csrc/memif_guard.h");
    println!("cargo:rerun-if-changed=csrc/wrapper.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");
    println!("cargo:rerun-if-env-changed=LIBCLANG_PATH");

    let dpdk = match pkg_config::Config::new()
        .atleast_version(MIN_DPDK)
        .probe("libdpdk")
    {
        Ok(lib) => lib,
        Err(e) => panic!(
            "\n\ndpdk-sys: cannot find DPDK >= {MIN_DPDK} through pkg-config ({e}).\n\
             Install the development package and pkg-config, on Debian/Ubuntu:\n    \
             apt-get install libdpdk-dev pkg-config\n\
             (or point PKG_CONFIG_PATH at the directory holding libdpdk.pc).\n\n"
        ),
    };

    // Flags such as `-include rte_config.h -march=corei7` are part of
    // DPDK's cflags but not of pkg-config's include paths or defines.
    let other_cflags = pkg_config_output(&["--cflags-only-other", "libdpdk"]);
    let other_cflags: Vec<String> = other_cflags.split_whitespace().map(str::to_owned).collect();

    // net_ring and the vdev bus: see the module documentation.
    let libdir = pkg_config_output(&["--variable=libdir", "libdpdk"]);
    let libdir = libdir.trim();
    if !libdir.is_empty() {
        println!("cargo:rustc-link-search=native={libdir}");
    }
    println!("cargo:rustc-link-lib=dylib=rte_net_ring");
    println!("cargo:rustc-link-lib=dylib=rte_bus_vdev");
    println!("cargo:version={}", dpdk.version);

    let mut shim = cc::Build::new();
    shim.file("csrc/shim.c")
        .file("csrc/memif_guard.c")
        .include("csrc")
        .warnings(true)
        .flag_if_supported("-Wno-unused-parameter");
    for path in &dpdk.include_paths {
        shim.include(path);
    }
    for (name, value) in &dpdk.defines {
        shim.define(name, value.as_deref());
    }
    // `-include` takes the next word as its argument.
    for flag in &other_cflags {
        shim.flag(flag);
    }
    shim.compile("uwarp_dpdk_shim");

    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut clang_args: Vec<String> = dpdk
        .include_paths
        .iter()
        .map(|p| format!("-I{}", p.display()))
        .collect();
    clang_args.push("-Icsrc".to_owned());
    for (name, value) in &dpdk.defines {
        clang_args.push(match value {
            Some(v) => format!("-D{name}={v}"),
            None => format!("-D{name}"),
        });
    }
    clang_args.extend(other_cflags);

    let builder = bindgen::Builder::default()
        .header("csrc/wrapper.h")
        .clang_args(clang_args)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .parse_callbacks(Box::new(FlagWidth))
        // The RTE_ETH_*_OFFLOAD_*, RTE_ETH_RSS_* and RTE_MBUF_F_* flags
        // are `RTE_BIT64(n)`, a function-like macro that only clang itself
        // can evaluate.
        .clang_macro_fallback()
        .clang_macro_fallback_build_dir(&out_dir)
        .prepend_enum_name(false)
        .derive_default(true)
        .derive_debug(false)
        .allowlist_function(
            "rte_(eal_init|eal_cleanup|eal_iova_mode|eal_process_type|eal_hotplug_(add|remove)\
             |strerror|socket_id|lcore_to_socket_id|lcore_count|get_main_lcore\
             |eth_.*|pktmbuf_pool_create.*|pktmbuf_free_bulk|mempool_.*\
             |ring_(create|free|lookup)|vdev_(init|uninit)|mem_virt2iova|thread_(register|unregister)\
             |dev_bus|bus_name|vfio_container_dma_(map|unmap)|openlog_stream|log_get_stream)",
        )
        .allowlist_function("shim_.*")
        .allowlist_function("uwarp_memif_.*")
        // C's standard error stream, for `rte_openlog_stream`.
        .allowlist_var("stderr")
        .allowlist_type("rte_eth_(link|stats|xstat|xstat_name|dev_info|conf|rxconf|txconf)")
        .allowlist_type("rte_mbuf_ext_shared_info")
        .allowlist_var(
            "RTE_(ETH|MBUF|PKTMBUF|MEMPOOL|RING|IOVA|MAX|ETHER|PMD|MEMZONE|LOGTYPE)_.*\
             |RTE_ETH_(LINK|SPEED|RSS|MQ)_.*|RTE_MBUF_F_.*|RTE_BAD_IOVA|LCORE_ID_ANY|SOCKET_ID_ANY\
             |RING_F_.*|RTE_PKTMBUF_HEADROOM|RTE_MBUF_DEFAULT_.*|RTE_VFIO_DEFAULT_CONTAINER_FD",
        )
        // The errno values DPDK returns negated.
        .allowlist_var("E(NOTSUP|NODEV|INVAL|NOMEM|NOSPC|EXIST|OVERFLOW|NOENT|AGAIN|BUSY|PERM|IO)");

    let generated =
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || builder.generate())) {
            Ok(Ok(bindings)) => bindings,
            Ok(Err(e)) => panic!("dpdk-sys: bindgen failed on the DPDK headers: {e}"),
            Err(payload) => {
                let reason = payload
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| payload.downcast_ref::<&str>().copied())
                    .unwrap_or("unknown panic");
                panic!(
                    "\n\ndpdk-sys: bindgen could not run ({reason}).\n\
                 bindgen needs libclang; on Debian/Ubuntu:\n    apt-get install libclang-dev\n\
                 (or set LIBCLANG_PATH to the directory holding libclang.so).\n\n"
                )
            }
        };
    generated
        .write_to_file(out_dir.join("bindings.rs"))
        .expect("dpdk-sys: cannot write bindings.rs into OUT_DIR");
}

/// Gives the 64-bit flag families one Rust type, `u64`, as in C: bindgen
/// would otherwise pick the smallest type that holds each value.
#[derive(Debug)]
struct FlagWidth;

impl bindgen::callbacks::ParseCallbacks for FlagWidth {
    fn int_macro(&self, name: &str, _value: i64) -> Option<bindgen::callbacks::IntKind> {
        const FAMILIES: [&str; 5] = [
            "RTE_ETH_RX_OFFLOAD_",
            "RTE_ETH_TX_OFFLOAD_",
            "RTE_ETH_RSS_",
            "RTE_MBUF_F_",
            "RTE_ETH_LINK_SPEED_",
        ];
        FAMILIES
            .iter()
            .any(|f| name.starts_with(f))
            .then_some(bindgen::callbacks::IntKind::U64)
    }
}

/// Runs pkg-config (honouring `$PKG_CONFIG`) and returns its stdout.
fn pkg_config_output(args: &[&str]) -> String {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_owned());
    let out = Command::new(&program)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("dpdk-sys: cannot run `{program}` ({e}); on Debian/Ubuntu: apt-get install pkg-config")
        });
    assert!(
        out.status.success(),
        "dpdk-sys: `{program} {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("pkg-config prints UTF-8")
}
