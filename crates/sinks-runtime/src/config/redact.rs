//! Redaction of configuration output: secrets, and the names of the variables that hold
//! them, never appear in `show-effective-config` or in logs. What is redacted keeps its shape,
//! so the redacted config is still a config `validate` accepts: a variable's name becomes
//! [`REDACTED_VARIABLE`] (a valid name), a map of variables keeps its keys, a URL keeps its
//! host and loses its credentials.

use serde_json::Value;

/// The placeholder written instead of a redacted value.
pub const REDACTED: &str = "********";

/// The placeholder written instead of the name of an environment variable (`*_env`): a valid
/// variable name, so the redacted config reads back (`validate --no-environment` lists it as
/// unset).
pub const REDACTED_VARIABLE: &str = "REDACTED";

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

/// Replaces secret values in a JSON tree with [`REDACTED`] and every `*_env` variable name
/// with [`REDACTED_VARIABLE`] (in a map of names, each value), and masks the credentials of
/// URLs or DSNs that carry them (`user:pass@host`).
pub fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if matches!(k.as_str(), "sinks" | "target_sink_types") {
                    // Keys here are names the operator chose (`oracle_secret`), not settings.
                    if let Value::Object(named) = v {
                        named.values_mut().for_each(redact);
                    }
                } else if k.to_ascii_lowercase().ends_with("_env") {
                    redact_variables(v);
                } else if is_secret_key(k) && v.is_object() {
                    // A section named like a secret holds settings, each judged on its own.
                    redact(v);
                } else if is_secret_key(k) && !v.is_null() {
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

/// Every variable name in `value` (a name, a map or a list of names) becomes
/// [`REDACTED_VARIABLE`].
fn redact_variables(value: &mut Value) {
    match value {
        Value::String(_) => *value = Value::String(REDACTED_VARIABLE.into()),
        Value::Object(map) => map.values_mut().for_each(redact_variables),
        Value::Array(items) => items.iter_mut().for_each(redact_variables),
        _ => {}
    }
}

fn mask_urls(value: &mut Value) {
    match value {
        Value::String(s) if s.contains('@') => {
            // `scheme://user:pass@host/…` keeps its scheme and host (an `@` after the host is
            // no credential); a DSN without a scheme is masked whole.
            match s.split_once("://") {
                Some((scheme, rest)) => {
                    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
                    if let Some((_, host)) = authority.rsplit_once('@') {
                        let after = &rest[authority.len()..];
                        *s = format!("{scheme}://{REDACTED}@{host}{after}");
                    }
                }
                None => *s = REDACTED.into(),
            }
        }
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
        assert_eq!(v["nats"]["password_env"], REDACTED_VARIABLE);
        assert_eq!(v["nats"]["token_env"], Value::Null, "absent secrets stay null");
        assert_eq!(v["nats"]["url"], "nats://********@h:4222", "the credentials go, the host stays");
        assert_eq!(v["nats"]["urls"][0], "nats://a:4222");
        assert_eq!(v["nats"]["urls"][1], "nats://********@b:4222");
        assert_eq!(v["nats"]["tls_cert_file"], REDACTED);
        assert_eq!(v["nats"]["user"], "app");
        assert_eq!(
            v["sink"]["headers_env"],
            serde_json::json!({"Authorization": REDACTED_VARIABLE}),
            "a map keeps its keys"
        );
        assert_eq!(v["sink"]["directory"], "/out");
        assert_eq!(v["ws"]["websocket_headers"]["X-Route"], REDACTED, "header values are masked, names kept");
        assert_eq!(v["ws"]["websocket_headers_env"], serde_json::json!({"Authorization": REDACTED_VARIABLE}));
        // Names are not settings: a named sink or a target type keyed `*_secret` stays.
        let mut named = serde_json::json!({
            "sinks": {"oracle_secret": {"type": "oracle", "password_env": "ORA"}},
            "routing": {"target_sink_types": {"oracle_secret": "oracle"}},
        });
        redact(&mut named);
        assert_eq!(
            named["sinks"]["oracle_secret"],
            serde_json::json!({"type": "oracle", "password_env": REDACTED_VARIABLE})
        );
        assert_eq!(named["routing"]["target_sink_types"]["oracle_secret"], "oracle");
        // A DSN without a scheme is masked whole; redacting twice changes nothing more.
        let mut dsn = serde_json::json!({"dsn": "app/secret@db:1521/x", "url": "https://h/p@q"});
        redact(&mut dsn);
        assert_eq!(dsn, serde_json::json!({"dsn": REDACTED, "url": "https://h/p@q"}));
        let once = v.clone();
        redact(&mut v);
        assert_eq!(v, once);
    }
}
