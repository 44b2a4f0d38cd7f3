//! Links the shared object the way rdma-core's libraries are linked:
//! SONAME `libibverbs.so.1` and the version nodes of `versions.map`, which
//! the `.symver` directive of every export (`src/export.rs`) binds to.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=versions.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/versions.map");
}
