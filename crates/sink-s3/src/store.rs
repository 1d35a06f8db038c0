//! Builds the object-store client (`object_store`'s `AmazonS3`) from the configuration and
//! the credential source. Reads secrets (environment variables or the shared credentials
//! file) and nothing else; makes no request.
//!
//! Client settings: path-style requests with a custom endpoint (virtual-hosted style for
//! AWS), conditional puts as `If-None-Match: *`, conditional copies (the multipart path of a
//! conditional create) as `If-None-Match: *` on `CopyObject`, SSE-S3 when asked, each request
//! bounded by `request_timeout_seconds`, and the client's own retries switched off: the sink
//! retries (per `max_retries`) and otherwise leaves the retry to the JetStream redelivery.

use std::path::PathBuf;
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut, S3CopyIfNotExists};
use object_store::{BackoffConfig, ClientOptions, RetryConfig};
use sinks_contract::SinkError;

use crate::config::{CredentialMode, S3SinkConfig, ServerSideEncryption};

/// Static credentials handed to the sink by an embedding program (instead of a
/// `credential_mode`). Never printed.
#[derive(Clone)]
pub struct S3Credentials {
    /// Access key id.
    pub access_key_id: String,
    /// Secret access key.
    pub secret_access_key: String,
    /// Session token of temporary credentials.
    pub session_token: Option<String>,
}

impl std::fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("S3Credentials(..)")
    }
}

/// The client of one sink, built on first use (reading the credentials then, not at
/// construction, so `validate` reads no secrets); shared by the per-message writes and the
/// batch mode.
pub(crate) struct Client {
    config: S3SinkConfig,
    credentials: Option<S3Credentials>,
    store: std::sync::OnceLock<AmazonS3>,
}

impl Client {
    /// A client for `config`, with `credentials` replacing `credential_mode` when given.
    pub(crate) fn new(config: S3SinkConfig, credentials: Option<S3Credentials>) -> Self {
        Self { config, credentials, store: std::sync::OnceLock::new() }
    }

    /// The object store client. A missing credential is a configuration error.
    pub(crate) fn get(&self) -> Result<&AmazonS3, SinkError> {
        if let Some(store) = self.store.get() {
            return Ok(store);
        }
        let built = build(&self.config, self.credentials.as_ref())?;
        Ok(self.store.get_or_init(|| built))
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &S3SinkConfig {
        &self.config
    }

    /// `[prefix/]name`.
    pub(crate) fn under_prefix(&self, name: &str) -> String {
        match &self.config.prefix {
            Some(prefix) => format!("{prefix}/{name}"),
            None => name.to_owned(),
        }
    }

    /// The object path of `[prefix/]name`.
    pub(crate) fn path(&self, name: &str) -> Result<object_store::path::Path, SinkError> {
        object_store::path::Path::parse(self.under_prefix(name))
            .map_err(|_| SinkError::permanent("s3 object key is not a valid path"))
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("bucket", &self.config.bucket).finish_non_exhaustive()
    }
}

/// Builds the client. Missing credentials are configuration errors naming their field.
pub(crate) fn build(config: &S3SinkConfig, explicit: Option<&S3Credentials>) -> Result<AmazonS3, SinkError> {
    let credentials = match explicit {
        Some(c) => Some(c.clone()),
        None => match config.credential_mode {
            CredentialMode::DefaultChain => None,
            CredentialMode::Environment => Some(from_environment(config)?),
            CredentialMode::Profile => Some(from_profile(config.profile_name.as_deref().unwrap_or_default())?),
        },
    };
    let mut builder = if explicit.is_none() && config.credential_mode == CredentialMode::DefaultChain {
        // AWS_* variables, then web identity, ECS and instance metadata (object_store's chain).
        AmazonS3Builder::from_env()
    } else {
        AmazonS3Builder::new()
    };
    builder = builder.with_bucket_name(&config.bucket);
    if let Some(region) = &config.region_name {
        builder = builder.with_region(region);
    }
    if let Some(endpoint) = &config.endpoint_url {
        builder = builder.with_endpoint(endpoint.trim_end_matches('/')).with_virtual_hosted_style_request(false);
    }
    if let Some(c) = credentials {
        builder = builder.with_access_key_id(c.access_key_id).with_secret_access_key(c.secret_access_key);
        if let Some(token) = c.session_token {
            builder = builder.with_token(token);
        }
    }
    if config.server_side_encryption == ServerSideEncryption::Aes256 {
        let key: AmazonS3ConfigKey = "aws_server_side_encryption"
            .parse()
            .map_err(|_| SinkError::config("s3 client does not support server-side encryption settings"))?;
        builder = builder.with_config(key, "AES256");
    }
    let timeout = Duration::from_secs_f64(config.request_timeout_seconds);
    // Validation allowed http only to a loopback host with allow_http_for_local_testing.
    let allow_http = config.endpoint_url.as_deref().is_some_and(|e| e.starts_with("http://"));
    let options = ClientOptions::new()
        .with_allow_http(allow_http)
        .with_timeout(timeout)
        .with_connect_timeout(timeout)
        .with_pool_idle_timeout(Duration::from_secs(60));
    let retry = RetryConfig { max_retries: 0, retry_timeout: timeout, backoff: BackoffConfig::default() };
    builder
        .with_client_options(options)
        .with_retry(retry)
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .with_copy_if_not_exists(S3CopyIfNotExists::Header("If-None-Match".into(), "*".into()))
        .build()
        .map_err(|e| SinkError::config(format!("s3 client cannot be built: {}", builder_problem(&e))))
}

/// A builder error's text names a setting, never a secret; keep only its first line.
fn builder_problem(err: &object_store::Error) -> String {
    err.to_string().lines().next().unwrap_or_default().to_owned()
}

fn env_value(field: &str, name: Option<&str>) -> Result<String, SinkError> {
    let name = name.unwrap_or_default();
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() && v.trim() == v => Ok(v),
        Ok(_) => Err(SinkError::config(format!("sink.{field}: environment variable {name} is empty or padded"))),
        Err(_) => Err(SinkError::config(format!("sink.{field}: environment variable {name} is not set"))),
    }
}

fn from_environment(config: &S3SinkConfig) -> Result<S3Credentials, SinkError> {
    Ok(S3Credentials {
        access_key_id: env_value("aws_access_key_id_env", config.aws_access_key_id_env.as_deref())?,
        secret_access_key: env_value("aws_secret_access_key_env", config.aws_secret_access_key_env.as_deref())?,
        session_token: match &config.aws_session_token_env {
            Some(name) => Some(env_value("aws_session_token_env", Some(name))?),
            None => None,
        },
    })
}

/// The shared credentials file: `AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`.
fn credentials_file() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("AWS_SHARED_CREDENTIALS_FILE") {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".aws").join("credentials"))
}

/// Static keys of `profile` in the shared credentials file. Profiles that resolve keys
/// another way (SSO, role assumption, `credential_process`) are not supported.
fn from_profile(profile: &str) -> Result<S3Credentials, SinkError> {
    let problem = |what: &str| SinkError::config(format!("sink.profile_name: {what}"));
    let path = credentials_file().ok_or_else(|| problem("no shared credentials file (HOME is not set)"))?;
    let text = std::fs::read_to_string(&path)
        .map_err(|e| problem(&format!("cannot read the shared credentials file {} ({e})", path.display())))?;
    profile_credentials(&text, profile).map_err(|what| problem(&what))
}

/// Parses the INI `text` of a credentials file for `profile`.
fn profile_credentials(text: &str, profile: &str) -> Result<S3Credentials, String> {
    let ini =
        ini::Ini::load_from_str(text).map_err(|e| format!("the shared credentials file is not valid INI ({e})"))?;
    let section = ini
        .section(Some(profile))
        .ok_or_else(|| format!("profile `{profile}` is not in the shared credentials file"))?;
    let get = |key: &str| section.get(key).map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    match (get("aws_access_key_id"), get("aws_secret_access_key")) {
        (Some(access_key_id), Some(secret_access_key)) => {
            Ok(S3Credentials { access_key_id, secret_access_key, session_token: get("aws_session_token") })
        }
        _ => Err(format!(
            "profile `{profile}` has no static aws_access_key_id / aws_secret_access_key (SSO, role and \
             credential_process profiles are not supported: use credential_mode `default_chain` or `environment`)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use sinks_contract::ErrorClass;

    use super::*;

    #[test]
    fn profiles_with_static_keys_resolve() {
        let text = "[default]\naws_access_key_id = A\naws_secret_access_key = B\n\n[ops]\naws_access_key_id=C\n\
                    aws_secret_access_key=D\naws_session_token=T\n[sso]\nsso_start_url=https://x\n";
        let ops = profile_credentials(text, "ops").unwrap();
        assert_eq!((ops.access_key_id.as_str(), ops.secret_access_key.as_str()), ("C", "D"));
        assert_eq!(ops.session_token.as_deref(), Some("T"));
        assert!(profile_credentials(text, "default").unwrap().session_token.is_none());
        assert!(profile_credentials(text, "sso").unwrap_err().contains("not supported"));
        assert!(profile_credentials(text, "missing").unwrap_err().contains("not in the shared credentials file"));
        assert_eq!(format!("{ops:?}"), "S3Credentials(..)", "keys are never printed");
    }

    #[test]
    fn missing_environment_credentials_name_their_field() {
        let mut config = S3SinkConfig::new("bucket-a");
        config.credential_mode = CredentialMode::Environment;
        config.aws_access_key_id_env = Some("NATS_SINKS_S3_TEST_SURELY_UNSET_KEY".into());
        config.aws_secret_access_key_env = Some("NATS_SINKS_S3_TEST_SURELY_UNSET_SECRET".into());
        let err = build(&config, None).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Config);
        assert!(err.message().contains("sink.aws_access_key_id_env"), "{}", err.message());
        assert!(err.message().contains("NATS_SINKS_S3_TEST_SURELY_UNSET_KEY"));
    }

    #[test]
    fn explicit_credentials_build_a_client_without_any_request() {
        let mut config = S3SinkConfig::new("bucket-a");
        config.endpoint_url = Some("http://127.0.0.1:1".into());
        config.allow_http_for_local_testing = true;
        config.server_side_encryption = ServerSideEncryption::Aes256;
        let creds = S3Credentials { access_key_id: "a".into(), secret_access_key: "b".into(), session_token: None };
        assert!(build(&config, Some(&creds)).is_ok());
    }
}
