//! The vendored NATS client's one patch (vendor/async-nats/PATCH.md): its fixed patterns run on
//! regex-lite instead of regex. The patterns are read from the vendored source itself, so a
//! pattern changed or added upstream is compared too; each must find the same matches, with
//! the same groups, as the full `regex` crate on every ASCII text. The four the sink's build
//! runs (server version, credentials file, KV bucket and key names) are also exercised
//! through the client against a real nats-server.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use sinks_testkit::{NatsServer, unique};

/// Every `Regex::new(r"…")` literal of the vendored client's source, with its file.
fn vendored_patterns() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, found: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let mut rest = text.as_str();
                while let Some(start) = rest.find("Regex::new(r\"") {
                    let body = &rest[start + "Regex::new(r\"".len()..];
                    let end = body.find("\")").expect("a raw pattern literal ends with \")");
                    found.push((path.clone(), body[..end].to_owned()));
                    rest = &body[end..];
                }
            }
        }
    }
    let src = sinks_testkit::workspace_root().join("vendor/async-nats/src");
    let mut found = Vec::new();
    walk(&src, &mut found);
    found.sort();
    found
}

/// Every match of `text`, each as the spans of all its groups (None: group did not take part).
type Spans = Vec<Vec<Option<(usize, usize)>>>;

fn full(re: &regex::Regex, text: &str) -> Spans {
    re.captures_iter(text).map(|c| (0..c.len()).map(|i| c.get(i).map(|m| (m.start(), m.end()))).collect()).collect()
}

fn lite(re: &regex_lite::Regex, text: &str) -> Spans {
    re.captures_iter(text).map(|c| (0..c.len()).map(|i| c.get(i).map(|m| (m.start(), m.end()))).collect()).collect()
}

#[test]
fn the_vendored_client_has_its_eight_patterns_and_no_use_of_regex() {
    let patterns = vendored_patterns();
    let listed: Vec<String> = patterns.iter().map(|(f, p)| format!("{}: {p}", f.display())).collect();
    assert_eq!(patterns.len(), 8, "the patched patterns changed; compare them again: {listed:#?}");
    let src = sinks_testkit::workspace_root().join("vendor/async-nats/src");
    let mut stack = vec![src];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let text = std::fs::read_to_string(&path).unwrap();
                assert!(!text.contains("regex::"), "{} still uses the regex crate", path.display());
            }
        }
    }
}

/// Texts made of what the patterns look at: digits, letters, the separators of versions,
/// names and credentials files, and whole credentials-file lines.
fn ascii_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[0-9]{1,4}",
        "[a-zA-Z]{1,6}",
        "[-._=/+ \t]{1,3}",
        Just("\n".to_owned()),
        Just("\r\n".to_owned()),
        Just("v".to_owned()),
        Just("-----BEGIN NATS USER JWT-----\n".to_owned()),
        Just("------END NATS USER JWT------\n".to_owned()),
        Just("---".to_owned()),
        "[ -~]{1,8}",
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_pattern_finds_the_same_matches_and_groups_as_regex(text in ascii_text()) {
        for (file, pattern) in vendored_patterns() {
            let full_re = regex::Regex::new(&pattern).unwrap();
            let lite_re = regex_lite::Regex::new(&pattern).unwrap();
            prop_assert_eq!(full(&full_re, &text), lite(&lite_re, &text), "{} `{}` on {:?}", file.display(), pattern, text);
        }
    }
}

/// The comparison above can tell engines apart: a pattern whose `\w` meets a non-ASCII letter
/// matches differently (regex-lite's classes are ASCII; NATS versions, names, JWTs and seeds
/// are ASCII, and a JWT or seed with another character is refused by its decoder either way).
#[test]
fn the_comparison_tells_unicode_classes_from_ascii_ones() {
    let pattern = r"([\w\-.=]+)";
    let text = "abcé-1";
    let (full_re, lite_re) = (regex::Regex::new(pattern).unwrap(), regex_lite::Regex::new(pattern).unwrap());
    assert_ne!(full(&full_re, text), lite(&lite_re, text));
}

#[tokio::test]
async fn the_patched_client_reads_versions_credentials_and_kv_names_against_a_real_server() {
    let server = NatsServer::start();
    let client = server.client().await;
    // Server version (the `VERSION_RE` pattern): nats-server 2.10 or later here.
    assert!(client.is_server_compatible(2, 10, 0), "server version {}", client.server_info().version);
    assert!(!client.is_server_compatible(99, 0, 0));

    // Credentials file (the `USER_CONFIG_RE` pattern): the JWT and the seed between their
    // decorations; a file without them is refused.
    let user = nkeys::KeyPair::new_user();
    let creds = format!(
        "-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.c2ln\n------END NATS USER JWT------\n\n\
         ************************* IMPORTANT *************************\n\n\
         -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
        user.seed().unwrap()
    );
    assert!(async_nats::ConnectOptions::with_credentials(&creds).is_ok());
    assert!(async_nats::ConnectOptions::with_credentials("no decorations here").is_err());
    let broken = creds.replace("------END USER NKEY SEED------", "");
    assert!(async_nats::ConnectOptions::with_credentials(&broken).is_err());

    // KV bucket and key names (`VALID_BUCKET_RE`, `VALID_KEY_RE`).
    let js = async_nats::jetstream::new(client);
    let bad = js
        .create_key_value(async_nats::jetstream::kv::Config { bucket: "no spaces".into(), ..Default::default() })
        .await;
    assert!(bad.is_err(), "a bucket name with a space is refused");
    let bucket = unique("PATCHKV");
    let kv = js
        .create_key_value(async_nats::jetstream::kv::Config { bucket: bucket.clone(), ..Default::default() })
        .await
        .unwrap();
    kv.put("a/b_c-d=e.f", "v".into()).await.unwrap();
    assert!(kv.put("no spaces", "v".into()).await.is_err(), "a key with a space is refused");
    assert!(kv.put("é", "v".into()).await.is_err(), "a non-ASCII key is refused");
    js.delete_key_value(&bucket).await.unwrap();
}
