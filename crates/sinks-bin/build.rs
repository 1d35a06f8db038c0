//! Build script of `nats-sink`: in a build optimized for size (the `dist` profile's
//! `opt-level = "s"`, or `"z"`) for x86_64 Linux with glibc, linked by the toolchain's own
//! LLD (the default of that target since Rust 1.90: no `linker` configured, no linker flags
//! given), the linker folds identical functions and read-only data (`--icf=all`, as the Rust
//! compiler's own build does). It makes the file-only binary 143 KB smaller
//! (docs/operations.md). Every other build links as before: GNU ld has no `--icf`, and the
//! debug and test builds do not need it.

fn main() {
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if folds_identical_code(&var("OPT_LEVEL"), &var("TARGET"), &var("RUSTC_LINKER"), &var("CARGO_ENCODED_RUSTFLAGS")) {
        println!("cargo:rustc-link-arg-bins=-Wl,--icf=all");
    }
}

/// Whether this build folds identical code: optimized for size, for the one target whose
/// default linker is LLD, and neither a linker nor linker flags chosen by the builder.
pub(crate) fn folds_identical_code(opt_level: &str, target: &str, linker: &str, rustflags: &str) -> bool {
    matches!(opt_level, "s" | "z")
        && target == "x86_64-unknown-linux-gnu"
        && linker.is_empty()
        && !rustflags.contains("linker")
        && !rustflags.contains("link-arg")
}
