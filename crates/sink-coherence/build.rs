//! Compiles `proto/*.proto` (hand-written subsets of the Coherence gRPC protocols) with
//! `protox` (pure Rust, no `protoc` needed) and generates the tonic client code.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/legacy.proto", "proto/proxy_v1.proto", "proto/cache_v1.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        // Without this the wrapper types (BytesValue, Int32Value) map to Rust scalars and the
        // generated client refers to them by a path that does not exist.
        .compile_well_known_types(true)
        // Keys and values stay `Bytes` end to end (no copies of large values).
        .bytes(".")
        .compile_fds(descriptors)?;
    Ok(())
}
