//! gRPC client.
#[allow(
    missing_docs,
    unreachable_pub,
    clippy::all,
    clippy::pedantic,
    missing_debug_implementations,
    non_camel_case_types
)]
pub(crate) mod pb {
    pub(crate) mod google {
        pub(crate) mod protobuf {
            tonic::include_proto!("google.protobuf");
        }
    }
    pub(crate) mod coherence {
        tonic::include_proto!("coherence");
        pub(crate) mod proxy {
            pub(crate) mod v1 {
                tonic::include_proto!("coherence.proxy.v1");
            }
        }
        pub(crate) mod cache {
            pub(crate) mod v1 {
                tonic::include_proto!("coherence.cache.v1");
            }
        }
    }
}
