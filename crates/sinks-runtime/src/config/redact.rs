//! Redaction of configuration output: secrets, and the names of the variables that hold
//! them, never appear in `show-effective-config` or in logs.

use serde_json::Value;

/// The placeholder written instead of a redacted value.
pub const REDACTED: &str = "********";

const SECRET_PARTS: [&str; 12] = [
    "password",
    "token",
    "secret",
    "private_key",
    "credentials",
    "creds",
    "cert_file",
    "key_file",
    "nkey_seed",
    "key_b64",
    "key_material",
    "api_key",
];

/// True when a key name looks like it holds (or names) a secret.
pub fn is_secret_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    SECRET_PARTS.iter().any(|p| lower.contains(p)) || lower.ends_with("_env")
}

/// Replaces secret values (and every `*_env` name) in a JSON tree with [`REDACTED`], and
/// masks URLs or DSNs that carry credentials (`user:pass@host`).
pub fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if is_secret_key(k) && !v.is_null() {
                    *v = Value::String(REDACTED.into());
                } else if k == "websocket_headers" {
                    // Header names stay visible; values may identify a tenant or a route.
                    if let Value::Object(headers) = v {
                        headers.values_mut().for_each(|h| *h = Value::String(REDACTED.into()));
                    }
                } else if matches!(k.as_str(), "url" | "urls" | "dsn" | "endpoint" | "endpoint_url") {
                    mask_urls(v);
                } else {
                    redact(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

fn mask_urls(value: &mut Value) {
    match value {
        Value::String(s) if s.contains('@') => *s = REDACTED.into(),
        Value::Array(items) => items.iter_mut().for_each(mask_urls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_secrets_env_names_and_credential_urls() {
        let mut v = serde_json::json!({
            "nats": {"user": "app", "password_env": "NATS_PASS", "token_env": null, "url": "nats://u:p@h:4222",
                     "urls": ["nats://a:4222", "nats://x:y@b:4222"], "tls_cert_file": "/c.pem", "stream": "S"},
            "sink": {"headers_env": {"Authorization": "TOKEN_VAR"}, "directory": "/out"},
            "ws": {"websocket_headers": {"X-Route": "edge-7"}, "websocket_headers_env": {"Authorization": "WS_AUTH"}}
        });
        redact(&mut v);
        assert_eq!(v["nats"]["password_env"], REDACTED);
        assert_eq!(v["nats"]["token_env"], Value::Null, "absent secrets stay null");
        assert_eq!(v["nats"]["url"], REDACTED);
        assert_eq!(v["nats"]["urls"][0], "nats://a:4222");
        assert_eq!(v["nats"]["urls"][1], REDACTED);
        assert_eq!(v["nats"]["tls_cert_file"], REDACTED);
        assert_eq!(v["nats"]["user"], "app");
        assert_eq!(v["sink"]["headers_env"], REDACTED);
        assert_eq!(v["sink"]["directory"], "/out");
        assert_eq!(v["ws"]["websocket_headers"]["X-Route"], REDACTED, "header values are masked, names kept");
        assert_eq!(v["ws"]["websocket_headers_env"], REDACTED);
    }
}
