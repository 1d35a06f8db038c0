//! A private certificate authority for TLS tests: a CA and a server certificate for
//! `127.0.0.1` and `localhost`, written as PEM files into a directory.

use std::path::{Path, PathBuf};

/// The PEM files of a test CA and of a server certificate it issued.
#[derive(Debug, Clone)]
pub struct TestPki {
    /// The CA certificate (what a client trusts).
    pub ca_file: PathBuf,
    /// The server certificate for `127.0.0.1` and `localhost`.
    pub cert_file: PathBuf,
    /// The server's private key.
    pub key_file: PathBuf,
}

impl TestPki {
    /// Generates a CA and a server certificate into `dir` (`ca.pem`, `server.pem`,
    /// `server-key.pem`).
    pub fn generate(dir: &Path) -> Self {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
            KeyUsagePurpose,
        };
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "nats-sinks test ca");
        ca_params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, "nats-sinks test server");
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &issuer).unwrap();
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        Self {
            ca_file: write("ca.pem", ca_cert.pem()),
            cert_file: write("server.pem", cert.pem()),
            key_file: write("server-key.pem", key.serialize_pem()),
        }
    }
}
