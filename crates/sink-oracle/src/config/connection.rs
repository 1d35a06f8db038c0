//! The connection side of the configuration: how the reference's python-oracledb connection
//! fields become one connect string for the ODPI-C (thick) driver.
//!
//! python-oracledb takes `ssl_server_dn_match`, `retry_count`, … as keyword arguments; the
//! thick driver takes them inside the connect string. [`connect_string`] appends them as
//! Easy Connect Plus parameters (`host:port/service?retry_count=20&…`, Oracle Client 19c and
//! later), or adds them to a full `(DESCRIPTION=…)` descriptor when the descriptor does not
//! set them already (the descriptor wins). A TNS alias cannot carry them: they are reported
//! as not applied (the alias's `tnsnames.ora` entry under `config_dir` must set them), and
//! the sink logs that at start-up.

use super::OracleSinkConfig;

/// A connect string and the configuration fields it could not carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectString {
    /// What the driver is given.
    pub value: String,
    /// `sink.<field>` names whose settings are not in `value`.
    pub unapplied: Vec<&'static str>,
}

/// The kind of `dsn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DsnKind {
    /// `host[:port][/service]`, optionally `tcp://` or `tcps://`.
    EasyConnect,
    /// `(DESCRIPTION=…)`.
    Descriptor,
    /// A `tnsnames.ora` alias.
    Alias,
}

pub(crate) fn dsn_kind(dsn: &str) -> DsnKind {
    let dsn = dsn.trim();
    if dsn.starts_with('(') {
        DsnKind::Descriptor
    } else if dsn.contains(['/', ':']) {
        DsnKind::EasyConnect
    } else {
        DsnKind::Alias
    }
}

/// The network parameters the configuration sets, as `(field, easy-connect name, value)`.
fn parameters(c: &OracleSinkConfig) -> Vec<(&'static str, &'static str, String)> {
    let mut p = Vec::new();
    if let Some(v) = c.ssl_server_dn_match {
        p.push(("ssl_server_dn_match", "ssl_server_dn_match", if v { "on" } else { "off" }.to_owned()));
    }
    if let Some(v) = &c.ssl_server_cert_dn {
        p.push(("ssl_server_cert_dn", "ssl_server_cert_dn", format!("\"{v}\"")));
    }
    if let Some(v) = c.tcp_connect_timeout {
        p.push(("tcp_connect_timeout", "transport_connect_timeout", format!("{}", v.ceil() as u64)));
    }
    if let Some(v) = c.retry_count {
        p.push(("retry_count", "retry_count", v.to_string()));
    }
    if let Some(v) = c.retry_delay {
        p.push(("retry_delay", "retry_delay", v.to_string()));
    }
    if let Some(v) = &c.https_proxy {
        p.push(("https_proxy", "https_proxy", v.clone()));
    }
    if let Some(v) = c.https_proxy_port {
        p.push(("https_proxy_port", "https_proxy_port", v.to_string()));
    }
    if let Some(v) = &c.wallet_location {
        p.push(("wallet_location", "wallet_location", format!("\"{v}\"")));
    }
    p
}

/// The connect string for `config` (see the module documentation).
pub fn connect_string(config: &OracleSinkConfig) -> ConnectString {
    let dsn = config.dsn.trim();
    let params = parameters(config);
    match dsn_kind(dsn) {
        DsnKind::Alias => ConnectString { value: dsn.to_owned(), unapplied: params.iter().map(|p| p.0).collect() },
        DsnKind::EasyConnect => {
            let mut value = dsn.to_owned();
            let mut sep = if value.contains('?') { '&' } else { '?' };
            let lower = value.to_ascii_lowercase();
            for (_, name, v) in &params {
                if lower.contains(&format!("{name}=")) {
                    continue;
                }
                value.push(sep);
                value.push_str(&format!("{name}={v}"));
                sep = '&';
            }
            ConnectString { value, unapplied: Vec::new() }
        }
        DsnKind::Descriptor => {
            let lower = dsn.to_ascii_lowercase();
            let mut top = String::new();
            let mut security = String::new();
            let mut unapplied = Vec::new();
            for (field, name, v) in &params {
                if lower.contains(&format!("({name}=")) || lower.contains(&format!("({name} =")) {
                    continue;
                }
                match *name {
                    "retry_count" | "retry_delay" | "transport_connect_timeout" => {
                        top.push_str(&format!("({}={v})", name.to_ascii_uppercase()));
                    }
                    "ssl_server_dn_match" | "ssl_server_cert_dn" if !lower.contains("(security") => {
                        security.push_str(&format!("({}={v})", name.to_ascii_uppercase()));
                    }
                    "wallet_location" if !lower.contains("(security") => {
                        security.push_str(&format!("(MY_WALLET_DIRECTORY={v})"));
                    }
                    _ => unapplied.push(*field),
                }
            }
            if !security.is_empty() {
                top.push_str(&format!("(SECURITY={security})"));
            }
            let single = lower.starts_with("(description=") || lower.starts_with("(description =");
            let value = match dsn.rfind(')') {
                Some(end) if single && !top.is_empty() => format!("{}{top}{}", &dsn[..end], &dsn[end..]),
                _ => {
                    if !top.is_empty() {
                        for (field, _, _) in &params {
                            if !unapplied.contains(field) {
                                unapplied.push(field);
                            }
                        }
                    }
                    dsn.to_owned()
                }
            };
            ConnectString { value, unapplied }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(v: serde_json::Value) -> OracleSinkConfig {
        let mut base = serde_json::json!({"type": "oracle", "dsn": "x", "user": "u", "password_env": "P"});
        if let (Some(b), serde_json::Value::Object(e)) = (base.as_object_mut(), v) {
            b.extend(e);
        }
        let serde_json::Value::Object(m) = base else { unreachable!() };
        OracleSinkConfig::from_section(&sinks_contract::config::SinkSection(m)).unwrap()
    }

    #[test]
    fn easy_connect_gets_easy_connect_plus_parameters() {
        let c = config(serde_json::json!({"dsn": "db.example:1521/FREEPDB1", "retry_count": 20, "retry_delay": 3,
            "ssl_server_dn_match": true, "tcp_connect_timeout": 2.5}));
        assert_eq!(
            connect_string(&c).value,
            "db.example:1521/FREEPDB1?ssl_server_dn_match=on&transport_connect_timeout=3&retry_count=20&retry_delay=3"
        );
        let already = config(serde_json::json!({"dsn": "tcps://h:2484/s?retry_count=5", "retry_count": 20}));
        assert_eq!(connect_string(&already).value, "tcps://h:2484/s?retry_count=5", "the dsn wins");
    }

    #[test]
    fn descriptors_get_what_they_do_not_set_and_aliases_get_nothing() {
        let walletless = "(description=(retry_count=20)(retry_delay=3)(address=(protocol=tcps)(port=1521)(host=adb.example.oraclecloud.com))(connect_data=(service_name=example_low.adb.oraclecloud.com))(security=(ssl_server_dn_match=yes)))";
        let c = config(
            serde_json::json!({"dsn": walletless, "retry_count": 20, "retry_delay": 3, "ssl_server_dn_match": true}),
        );
        let cs = connect_string(&c);
        assert_eq!(cs.value, walletless, "everything is in the descriptor already");
        assert!(cs.unapplied.is_empty());
        let bare = "(DESCRIPTION=(ADDRESS=(PROTOCOL=TCPS)(HOST=h)(PORT=2484))(CONNECT_DATA=(SERVICE_NAME=s)))";
        let c = config(serde_json::json!({"dsn": bare, "retry_count": 2, "ssl_server_dn_match": true}));
        assert_eq!(
            connect_string(&c).value,
            "(DESCRIPTION=(ADDRESS=(PROTOCOL=TCPS)(HOST=h)(PORT=2484))(CONNECT_DATA=(SERVICE_NAME=s))(RETRY_COUNT=2)(SECURITY=(SSL_SERVER_DN_MATCH=on)))"
        );
        let alias = config(serde_json::json!({"dsn": "mydb_low", "retry_count": 20, "wallet_location": "/w"}));
        let cs = connect_string(&alias);
        assert_eq!(cs.value, "mydb_low");
        assert_eq!(cs.unapplied, ["retry_count", "wallet_location"]);
    }
}
