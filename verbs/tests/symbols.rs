//! The shared object as the dynamic loader sees it: the SONAME
//! applications ask for, and every export at an rdma-core symbol version
//! (an unversioned export would not satisfy `ibv_open_device@IBVERBS_1.1`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The library `cargo test` built (in `deps/`, beside this test).
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    exe.with_file_name("libuwarp_verbs.so")
}

fn readelf(args: &[&str]) -> String {
    readelf_of(&library(), args)
}

/// What `readelf args` prints about `file`.
fn readelf_of(file: &Path, args: &[&str]) -> String {
    let output = Command::new("readelf")
        .args(args)
        .arg(file)
        .output()
        .expect("readelf runs (binutils)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("readelf prints text")
}

#[test]
fn the_soname_is_libibverbs_so_1() {
    let dynamic = readelf(&["-d"]);
    assert!(
        dynamic.contains("Library soname: [libibverbs.so.1]"),
        "{dynamic}"
    );
}

#[test]
fn every_verbs_export_has_an_rdma_core_version() {
    let symbols = readelf(&["--dyn-syms", "-W"]);
    let exports: Vec<&str> = symbols
        .lines()
        .filter(|line| line.contains(" GLOBAL ") && !line.contains(" UND "))
        .filter_map(|line| line.split_whitespace().nth(7))
        .filter(|name| name.starts_with("ibv_") || name.starts_with("rdma_"))
        .collect();
    assert!(
        exports.contains(&"ibv_open_device@@IBVERBS_1.1"),
        "{exports:?}"
    );
    let unversioned: Vec<&&str> = exports
        .iter()
        .filter(|name| !name.contains("@@IBVERBS_") && !name.contains("@@RDMACM_"))
        .collect();
    assert!(
        unversioned.is_empty(),
        "exports without a version: {unversioned:?}"
    );
}

/// Debian's programs and libraries that reach rdma-core through
/// libibverbs and librdmacm (`scripts/setup.sh` installs them all): each
/// must find every symbol it imports, at its version, in the drop-in
/// library, or the dynamic loader refuses to start it (as it refused
/// libfabric, tgtd and rsockets before uwarp exported what they use).
const IMPORTERS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/libfabric.so.1",
    "/usr/lib/x86_64-linux-gnu/libiscsi.so.7",
    "/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so",
    "/usr/sbin/tgtd",
    "/usr/bin/qemu-system-x86_64",
    "/usr/bin/fio",
    "/usr/bin/qperf",
    "/usr/bin/ib_write_bw",
    "/usr/bin/ib_read_lat",
    "/usr/bin/ibv_devices",
    "/usr/bin/ibv_devinfo",
    "/usr/bin/rping",
    "/usr/bin/ucmatose",
    "/usr/bin/cmtime",
    "/usr/bin/udaddy",
    "/usr/bin/mckey",
    "/usr/bin/rdma_server",
    "/usr/bin/rdma_client",
    "/usr/bin/rdma_xserver",
    "/usr/bin/rdma_xclient",
    "/usr/bin/rstream",
    "/usr/bin/rcopy",
    "/usr/bin/riostream",
];

/// The libibverbs and librdmacm symbols `file` defines (`imported`
/// false) or imports (true), each as `name@VERSION`.
fn rdma_core_symbols(file: &Path, imported: bool) -> BTreeSet<String> {
    readelf_of(file, &["--dyn-syms", "-W"])
        .lines()
        .filter(|line| line.contains(" UND ") == imported)
        .filter_map(|line| line.split_whitespace().nth(7))
        .filter_map(|symbol| {
            let (name, version) = symbol.split_once('@')?;
            let version = version.trim_start_matches('@');
            (version.starts_with("IBVERBS_") || version.starts_with("RDMACM_"))
                .then(|| format!("{name}@{version}"))
        })
        .collect()
}

#[test]
fn debian_programs_find_every_symbol_they_import() {
    let exports = rdma_core_symbols(&library(), false);
    let mut checked = 0;
    for importer in IMPORTERS {
        let path = Path::new(importer);
        assert!(path.exists(), "{importer} is missing: run scripts/setup.sh");
        let imports = rdma_core_symbols(path, true);
        let missing: Vec<&String> = imports.difference(&exports).collect();
        assert!(
            missing.is_empty(),
            "{importer} imports what uwarp lacks: {missing:?}"
        );
        checked += imports.len();
    }
    // The importers do import from rdma-core (a parse that found nothing
    // would prove nothing).
    assert!(checked > 500, "only {checked} imports found");
}
