//! The WebSocket relay: NATS over WebSocket with handshake headers.
//!
//! async-nats opens `ws://` and `wss://` connections itself (its `websockets` feature, used
//! whenever `nats.websocket_headers*` are empty) but sends no handshake headers. With headers
//! configured, the client instead talks plain NATS to this relay on a loopback port, and the
//! relay opens each WebSocket itself (tokio-websockets, the library async-nats uses) with the
//! headers, TLS verified against `nats.tls_ca_file` (or the system roots) and the client
//! certificate when one is configured, trying the configured URLs in turn. A lost WebSocket
//! closes the client's connection, and the client reconnects as it always does. The server's
//! first `INFO` line reaches the client with `tls_required: false`: the TLS is the relay's.
//!
//! The headers may carry credentials, so the relay serves this process only: a connection
//! whose socket does not belong to this process (looked up in `/proc/net/tcp` and
//! `/proc/self/fd`) is closed at once, unanswered. Header values are never logged.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_websockets::{ClientBuilder, Connector, Message};

use crate::config::{ConfigError, NatsConfig};

/// True when `cfg` needs the relay: WebSocket URLs with handshake headers.
pub(crate) fn needed(cfg: &NatsConfig) -> bool {
    cfg.websocket() && !(cfg.websocket_headers.is_empty() && cfg.websocket_headers_env.is_empty())
}

/// What every relayed connection uses.
struct Upstream {
    urls: Vec<String>,
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
    tls: Option<Connector>,
    next: AtomicUsize,
}

/// The handshake headers of `cfg`, with the `_env` values read now.
fn headers(cfg: &NatsConfig) -> Result<Vec<(http::HeaderName, http::HeaderValue)>, ConfigError> {
    let mut out = Vec::new();
    let values = cfg.websocket_headers.iter().map(|(n, v)| (n, v.clone(), "nats.websocket_headers"));
    let mut from_env = Vec::new();
    for (name, var) in &cfg.websocket_headers_env {
        let path = "nats.websocket_headers_env";
        match std::env::var(var) {
            Ok(v) if !v.is_empty() => from_env.push((name, v, path)),
            _ => {
                return Err(ConfigError::single(
                    format!("{path}.{name}"),
                    format!("environment variable {var} is not set or empty"),
                ));
            }
        }
    }
    for (name, value, path) in values.chain(from_env) {
        let bad = || ConfigError::single(format!("{path}.{name}"), "not a valid header");
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
        let value = http::HeaderValue::from_str(&value).map_err(|_| bad())?;
        out.push((name, value));
    }
    Ok(out)
}

/// The TLS connector of `wss://` URLs: the private CA of `nats.tls_ca_file` (else the
/// system's roots) and the client certificate, on aws-lc-rs.
fn tls(cfg: &NatsConfig) -> Result<Connector, ConfigError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let read = |path: &str, field: &str| {
        std::fs::read(path).map_err(|e| ConfigError::single(field, format!("cannot read {path}: {e}")))
    };
    let mut roots = rustls::RootCertStore::empty();
    match &cfg.tls_ca_file {
        Some(path) => {
            let pem = read(path, "nats.tls_ca_file")?;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| ConfigError::single("nats.tls_ca_file", e.to_string()))?;
                roots.add(cert).map_err(|e| ConfigError::single("nats.tls_ca_file", e.to_string()))?;
            }
        }
        None => {
            let _ = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::single("nats", e.to_string()))?
        .with_root_certificates(roots);
    let config = match (&cfg.tls_cert_file, &cfg.tls_key_file) {
        (Some(cert), Some(key)) => {
            let certs: Vec<CertificateDer<'static>> =
                CertificateDer::pem_slice_iter(&read(cert, "nats.tls_cert_file")?)
                    .collect::<Result<_, _>>()
                    .map_err(|e| ConfigError::single("nats.tls_cert_file", e.to_string()))?;
            let key = PrivateKeyDer::from_pem_slice(&read(key, "nats.tls_key_file")?)
                .map_err(|e| ConfigError::single("nats.tls_key_file", e.to_string()))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| ConfigError::single("nats.tls_cert_file", e.to_string()))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Connector::Rustls(tokio_rustls::TlsConnector::from(Arc::new(config))))
}

/// `127.0.0.1:port` as `/proc/net/tcp` writes it (`0100007F:1F90`).
fn proc_hex(addr: SocketAddr) -> Option<String> {
    match addr {
        SocketAddr::V4(v4) => Some(format!("{:08X}:{:04X}", u32::from_le_bytes(v4.ip().octets()), v4.port())),
        SocketAddr::V6(_) => None,
    }
}

/// True when the connection from `peer` to `relay` is a socket of this process.
fn from_this_process(peer: SocketAddr, relay: SocketAddr) -> bool {
    let (Some(peer), Some(relay)) = (proc_hex(peer), proc_hex(relay)) else { return false };
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else { return false };
    let inode = table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.len() > 9 && fields[1] == peer && fields[2] == relay).then(|| fields[9].to_owned())
    });
    let Some(inode) = inode else { return false };
    let wanted = format!("socket:[{inode}]");
    std::fs::read_dir("/proc/self/fd").is_ok_and(|fds| {
        fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == wanted.as_str()))
    })
}

/// Starts the relay of `cfg`'s WebSocket URLs; returns its loopback address and the task
/// (abort it when the connection it serves is given up).
pub(crate) async fn start(cfg: &NatsConfig) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), ConfigError> {
    let wss = cfg.servers().iter().any(|u| u.starts_with("wss://"));
    let upstream = Arc::new(Upstream {
        urls: cfg.servers(),
        headers: headers(cfg)?,
        tls: if wss { Some(tls(cfg)?) } else { None },
        next: AtomicUsize::new(0),
    });
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| ConfigError::single("nats.websocket_headers", format!("cannot start the WebSocket relay: {e}")))?;
    let addr = listener.local_addr().map_err(|e| ConfigError::single("nats.websocket_headers", e.to_string()))?;
    let task = tokio::spawn(async move {
        while let Ok((socket, peer)) = listener.accept().await {
            if !from_this_process(peer, addr) {
                tracing::warn!(peer = %peer, "the WebSocket relay refused a connection from another process");
                continue;
            }
            tokio::spawn(relay(socket, Arc::clone(&upstream)));
        }
    });
    tracing::info!(address = %addr, servers = cfg.servers().len(), "NATS over WebSocket with handshake headers, through a loopback relay");
    Ok((addr, task))
}

/// The server's `INFO` line as the client must see it from the relay: TLS, when there is
/// any, is the WebSocket's (the relay's), so the client must not start TLS of its own.
/// Anything else passes unchanged.
fn plain_info(line: &[u8]) -> Vec<u8> {
    let parsed = line
        .strip_prefix(b"INFO ")
        .and_then(|json| serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(json).ok());
    match parsed {
        Some(mut info) => {
            info.insert("tls_required".into(), false.into());
            info.remove("tls_available");
            let mut out = b"INFO ".to_vec();
            out.extend(serde_json::to_vec(&info).unwrap_or_default());
            out
        }
        None => line.to_vec(),
    }
}

/// Relays one client connection over a WebSocket to the first server that accepts it.
async fn relay(mut client: TcpStream, upstream: Arc<Upstream>) {
    let start = upstream.next.fetch_add(1, Ordering::Relaxed);
    let mut ws = None;
    for i in 0..upstream.urls.len() {
        let url = &upstream.urls[(start + i) % upstream.urls.len()];
        let Ok(mut builder) = ClientBuilder::new().uri(url) else { continue };
        for (name, value) in &upstream.headers {
            match builder.add_header(name.clone(), value.clone()) {
                Ok(b) => builder = b,
                Err(_) => return,
            }
        }
        if let Some(tls) = &upstream.tls {
            builder = builder.connector(tls);
        }
        match builder.connect().await {
            Ok((stream, _)) => {
                ws = Some(stream);
                break;
            }
            Err(e) => tracing::debug!(url = %url, error = %e, "WebSocket connection failed"),
        }
    }
    let Some(ws) = ws else { return };
    let (mut to_server, mut from_server) = ws.split();
    let (mut read, mut write) = client.split();
    let up = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to_server.send(Message::binary(bytes::Bytes::copy_from_slice(&buf[..n]))).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to_server.close().await;
    };
    let down = async {
        // The server's first line is its INFO; until it is complete, it is held back.
        let mut greeting = Some(Vec::new());
        while let Some(Ok(message)) = from_server.next().await {
            if message.is_close() {
                break;
            }
            if !(message.is_binary() || message.is_text()) {
                continue;
            }
            let bytes: &[u8] = message.as_payload();
            let out = match &mut greeting {
                Some(held) => {
                    held.extend_from_slice(bytes);
                    let Some(end) = held.windows(2).position(|w| w == b"\r\n") else { continue };
                    let mut line = plain_info(&held[..end]);
                    line.extend_from_slice(&held[end..]);
                    greeting = None;
                    line
                }
                None => bytes.to_vec(),
            };
            if write.write_all(&out).await.is_err() {
                break;
            }
        }
        let _ = write.shutdown().await;
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relayed_info_asks_for_no_tls_of_the_client() {
        let info = br#"INFO {"server_id":"x","tls_required":true,"tls_available":true,"max_payload":1048576}"#;
        let out: serde_json::Value = serde_json::from_slice(&plain_info(info)[5..]).unwrap();
        assert_eq!(out["tls_required"], false);
        assert!(out.get("tls_available").is_none());
        assert_eq!(out["max_payload"], 1048576);
        assert_eq!(plain_info(b"PING"), b"PING", "anything else passes unchanged");
    }

    #[test]
    fn proc_net_tcp_addresses() {
        assert_eq!(proc_hex("127.0.0.1:8080".parse().unwrap()).as_deref(), Some("0100007F:1F90"));
        assert_eq!(proc_hex("[::1]:80".parse().unwrap()), None);
    }

    #[tokio::test]
    async fn a_connection_of_this_process_is_recognised() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (_server, peer) = listener.accept().await.unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        assert!(from_this_process(peer, addr), "our own socket");
        let other: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert!(!from_this_process(other, addr), "no such socket of ours");
    }
}
