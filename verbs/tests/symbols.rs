//! The shared object as the dynamic loader sees it: the SONAME
//! applications ask for, and every export at an rdma-core symbol version
//! (an unversioned export would not satisfy `ibv_open_device@IBVERBS_1.1`).

use std::path::PathBuf;
use std::process::Command;

/// The library `cargo test` built (in `deps/`, beside this test).
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    exe.with_file_name("libuwarp_verbs.so")
}

fn readelf(args: &[&str]) -> String {
    let output = Command::new("readelf")
        .args(args)
        .arg(library())
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
