//! `docs/observability.md` carries the metric catalogue as the registry exports it, and the
//! Grafana dashboard in `deploy/` queries only metrics the registry has: neither can drift
//! from the code. `NATS_SINKS_BLESS=1` rewrites the catalogue block of the document.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

const BEGIN: &str = "<!-- catalogue:begin -->\n";
const END: &str = "<!-- catalogue:end -->";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_catalogue_in_the_docs_is_the_registry_s() {
    let path = root().join("docs/observability.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let start = doc.find(BEGIN).expect("catalogue begin marker") + BEGIN.len();
    let end = doc[start..].find(END).expect("catalogue end marker") + start;
    let generated = sinks_runtime::metrics::catalogue_markdown();
    if std::env::var_os("NATS_SINKS_BLESS").is_some() {
        let updated = format!("{}{}{}", &doc[..start], generated, &doc[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        doc[start..end] == generated,
        "docs/observability.md does not match the registry; rerun this test with NATS_SINKS_BLESS=1 \
         and review the diff.\n--- in the docs:\n{}\n--- from the registry:\n{generated}",
        &doc[start..end]
    );
}

#[test]
fn the_dashboard_queries_only_metrics_that_exist() {
    let text = std::fs::read_to_string(root().join("deploy/grafana-dashboard.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(dashboard["panels"].as_array().is_some_and(|p| p.len() > 10));
    let exported: Vec<String> = sinks_runtime::metrics::catalogue_rows().into_iter().map(|r| r.name).collect();
    let mut used = 0;
    for (at, _) in text.match_indices("nats_sinks_") {
        let name: String =
            text[at..].chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_').collect();
        let base = ["_bucket", "_count", "_sum"].iter().fold(name.as_str(), |n, s| n.strip_suffix(s).unwrap_or(n));
        assert!(exported.iter().any(|e| e == base), "the dashboard queries `{name}`, which the registry lacks");
        used += 1;
    }
    assert!(used > 20, "the dashboard uses {used} metric references");
}
