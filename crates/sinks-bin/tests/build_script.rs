//! The build script's one decision: which builds fold identical code (`--icf=all`).

// `main` is the build script's; cargo runs it, this test only reads the decision.
#[allow(dead_code, clippy::print_stdout)]
#[path = "../build.rs"]
mod build_script;

use build_script::folds_identical_code as folds;

#[test]
fn only_a_size_optimized_x86_64_glibc_build_on_the_default_linker_folds() {
    let gnu = "x86_64-unknown-linux-gnu";
    assert!(folds("s", gnu, "", ""), "the dist profile");
    assert!(folds("z", gnu, "", ""));
    assert!(folds("s", gnu, "", "-Ctarget-cpu=native"), "flags that do not touch the link");
    for opt in ["0", "1", "2", "3"] {
        assert!(!folds(opt, gnu, "", ""), "opt-level {opt}: debug, test and release builds link as before");
    }
    assert!(!folds("s", "x86_64-unknown-linux-musl", "", ""), "musl targets link with their own cc");
    assert!(!folds("s", "aarch64-unknown-linux-gnu", "", ""));
    assert!(!folds("s", gnu, "/usr/bin/cc", ""), "a linker chosen by the builder may be GNU ld");
    assert!(!folds("s", gnu, "", "-Clinker-features=-lld"));
    assert!(!folds("s", gnu, "", "-Clink-arg=-fuse-ld=bfd"));
}
