//! Where an event was first stored, for a message that reached the consumed stream through a
//! mirror or a source: the key of `origin_sequence` (`sinks_contract::envelope::Origin`).
//!
//! What nats-server does (checked against 2.15.1; `docs/topology.md`):
//! - a **mirror** keeps its origin's sequences and adds no header: a message at sequence `n` of
//!   a mirror of `A` is message `n` of `A`;
//! - a **sourced** stream numbers its own messages, and each carries `Nats-Stream-Source:
//!   <origin> <sequence> <filter> <transform> <original subject> <id>`, the origin named as in
//!   the sourcing stream's config, `<name>:<hash>` for a source across JetStream domains (the
//!   hash is the first eight base-62 digits of the SHA-256 of the external API prefix);
//!   servers before 2.10 wrote the origin's acknowledgement subject instead
//!   (`$JS.ACK.<stream>.<consumer>.<delivered>.<sequence>…`);
//! - a source of a sourced stream writes its own header over the one the message had, so a
//!   chain is followed by reading the message it names in the intermediate stream.
//!
//! [`parse_source_header`] reads the header (pure, table-tested); `Resolver` follows mirrors
//! and chains through the streams' configs (cached) and, for a chain, one message read per
//! hop, and names the origin `{stream}` or, in a JetStream domain, `{stream}@{domain}`, so the
//! same event gets the same name whichever server's consumer reads it.
//!
//! A stream of the chain that does not answer (a leaf link or the link to another domain cut,
//! a request timed out) is waited for: the message is held and asked about again, never
//! refused for it. Only what cannot be told at all (a header that does not parse, a source
//! the config does not name, a stream or message the server says does not exist) refuses an
//! `origin_sequence` key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, Context};
use sha2::{Digest, Sha256};
use sinks_contract::envelope::{Envelope, Origin};

/// The header a sourced stream adds.
pub const SOURCE_HEADER: &str = sinks_contract::envelope::STREAM_SOURCE_HEADER;

/// How far a chain of mirrors and sources is followed.
const MAX_HOPS: usize = 8;

/// The first wait before a stream that did not answer is asked again; doubled up to
/// [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(200);
/// The longest wait between two questions to a stream that does not answer.
const MAX_RETRY: Duration = Duration::from_secs(5);

/// Why an origin is not known.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Untold {
    /// Not now: a stream of the chain does not answer (no responders, a timeout); asked again.
    Unreachable(String),
    /// Never: the origin cannot be told (a refused `origin_sequence` key).
    Refused(String),
}

impl From<String> for Untold {
    fn from(why: String) -> Self {
        Self::Refused(why)
    }
}

/// Whether a failed JetStream request is the server's answer (`false`) or no answer at all
/// (`true`: nobody responds on the API subject, or the request timed out), anywhere in
/// `error`'s chain of sources.
fn no_answer(error: &(dyn std::error::Error + 'static)) -> bool {
    use async_nats::jetstream::context::{RequestError, RequestErrorKind};
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(e) = e.downcast_ref::<RequestError>() {
            return matches!(e.kind(), RequestErrorKind::NoResponders | RequestErrorKind::TimedOut);
        }
        if let Some(e) = e.downcast_ref::<async_nats::RequestError>() {
            return matches!(
                e.kind(),
                async_nats::RequestErrorKind::NoResponders | async_nats::RequestErrorKind::TimedOut
            );
        }
        next = e.source();
    }
    false
}

/// `why` as [`Untold::Unreachable`] when `error` is no answer, else [`Untold::Refused`].
fn untold(error: &(dyn std::error::Error + 'static), why: String) -> Untold {
    if no_answer(error) { Untold::Unreachable(why) } else { Untold::Refused(why) }
}

/// What a `Nats-Stream-Source` header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceHeader {
    /// The origin's name as the sourcing stream's config gives it.
    pub stream: String,
    /// The hash of the origin's external API prefix (a source across domains).
    pub api_hash: Option<String>,
    /// The message's sequence in the origin.
    pub sequence: u64,
    /// The subject the message had in the origin, when the header says it.
    pub subject: Option<String>,
}

/// Reads a `Nats-Stream-Source` header: the current form (`<name>[:<hash>] <sequence> <filter>
/// <transform> <subject> [<id>]`, at least the first two) or the acknowledgement subject
/// older servers wrote. An error says what is wrong with it.
pub fn parse_source_header(value: &str) -> Result<SourceHeader, String> {
    let fields: Vec<&str> = value.split_ascii_whitespace().collect();
    if let [ack] = fields.as_slice() {
        return parse_ack_form(ack);
    }
    let [name, sequence, rest @ ..] = fields.as_slice() else {
        return Err(format!("`{SOURCE_HEADER}` is empty"));
    };
    let sequence = parse_sequence(sequence)?;
    let (stream, api_hash) = match name.split_once(':') {
        Some((stream, hash)) if !stream.is_empty() && !hash.is_empty() => (stream, Some(hash.to_owned())),
        Some(_) => return Err(format!("`{SOURCE_HEADER}` names no stream: `{name}`")),
        None => (*name, None),
    };
    check_name(stream)?;
    // `<filter> <transform> <subject>`: the subject is the third field after the sequence.
    let subject = rest.get(2).map(|s| (*s).to_owned());
    Ok(SourceHeader { stream: stream.to_owned(), api_hash, sequence, subject })
}

/// The older form: `$JS.ACK.<stream>.<consumer>.<delivered>.<sequence>.…`, optionally with a
/// domain and account hash after `ACK` (`$JS.ACK.<domain>.<hash>.<stream>…`).
fn parse_ack_form(ack: &str) -> Result<SourceHeader, String> {
    let tokens: Vec<&str> = ack.split('.').collect();
    let (stream, sequence) = match tokens.as_slice() {
        ["$JS", "ACK", stream, _consumer, _delivered, sequence, ..] if tokens.len() <= 9 => (stream, sequence),
        ["$JS", "ACK", _domain, _hash, stream, _consumer, _delivered, sequence, ..] => (stream, sequence),
        _ => return Err(format!("`{SOURCE_HEADER}` is neither an origin and sequence nor an acknowledgement subject")),
    };
    check_name(stream)?;
    Ok(SourceHeader {
        stream: (*stream).to_owned(),
        api_hash: None,
        sequence: parse_sequence(sequence)?,
        subject: None,
    })
}

fn parse_sequence(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{SOURCE_HEADER}` has no sequence: `{text}`")),
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let bad = name.is_empty() || name.contains(['.', '*', '>', '/', '\\']) || name.chars().any(char::is_whitespace);
    if bad { Err(format!("`{SOURCE_HEADER}` names no valid stream: `{name}`")) } else { Ok(()) }
}

/// The hash nats-server gives an external API prefix in a source's name: the first eight
/// base-62 digits of its SHA-256.
pub fn api_hash(prefix: &str) -> String {
    const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    Sha256::digest(prefix.as_bytes()).iter().take(8).map(|b| DIGITS[usize::from(*b) % 62] as char).collect()
}

/// The JetStream domain an external API prefix names (`$JS.<domain>.API`), else the prefix.
pub fn domain_of(prefix: &str) -> &str {
    prefix
        .strip_prefix("$JS.")
        .and_then(|rest| rest.strip_suffix(".API"))
        .filter(|d| !d.contains('.'))
        .unwrap_or(prefix)
}

/// A stream reached from the consumed one: its name and the external API prefix it is read
/// through (`None`: the consumed stream's own domain).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct At {
    api: Option<String>,
    name: String,
}

/// What a stream is, as far as origins go.
#[derive(Debug, Clone)]
enum Kind {
    /// Messages are stored directly (a plain stream; a sourced stream's own publishes too).
    Plain,
    /// A mirror of that stream.
    Mirror(At),
    /// Sourced from these streams (and maybe subjects of its own).
    Sourced(Vec<At>),
}

/// Follows mirrors and sources back to where each event was first stored (see the module
/// documentation). One per run; stream configs are cached until [`Resolver::forget`].
#[derive(Debug)]
pub(crate) struct Resolver {
    client: async_nats::Client,
    js: Context,
    consumed: String,
    /// The consumed stream's JetStream domain, if it has one.
    domain: Option<String>,
    kinds: Mutex<HashMap<At, Arc<Kind>>>,
}

impl Resolver {
    /// A resolver for messages of stream `consumed` read through `js`, or `None` when there is
    /// nothing to resolve: a plain stream outside any domain (the origin of each message is
    /// the consumed stream itself, and keys stay exactly `stream_sequence`'s).
    pub(crate) async fn prepare(client: async_nats::Client, js: Context, consumed: &str) -> Option<Self> {
        let domain = js.query_account().await.ok().and_then(|a| a.domain).filter(|d| !d.is_empty());
        let resolver = Self { client, js, consumed: consumed.to_owned(), domain, kinds: Mutex::new(HashMap::new()) };
        let at = At { api: None, name: consumed.to_owned() };
        match resolver.kind(&at).await {
            Ok(kind) if matches!(*kind, Kind::Plain) && resolver.domain.is_none() => None,
            _ => Some(resolver),
        }
    }

    /// Forgets the cached stream configs (a stream was re-created).
    pub(crate) fn forget(&self) {
        self.kinds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }

    /// `envelopes` with their origins set, in order.
    pub(crate) async fn resolve_all(&self, envelopes: Vec<Envelope>) -> Vec<Envelope> {
        let mut out = Vec::with_capacity(envelopes.len());
        for envelope in envelopes {
            out.push(self.resolve(envelope).await);
        }
        out
    }

    /// `envelope` with its origin set. While a stream of its chain does not answer, the
    /// question is asked again (a growing wait, said once); the caller holds the message
    /// meanwhile and may stop waiting by dropping the future.
    pub(crate) async fn resolve(&self, envelope: Envelope) -> Envelope {
        let mut wait = FIRST_RETRY;
        let mut waited = false;
        let origin = loop {
            match self.origin_of(&envelope).await {
                Ok(origin) => break origin,
                Err(Untold::Refused(why)) => {
                    tracing::warn!(
                        stream_sequence = envelope.jetstream().stream_sequence,
                        reason = %why,
                        "the origin of a message cannot be told; an origin_sequence key is refused for it"
                    );
                    break Origin::Unresolved(why.into());
                }
                Err(Untold::Unreachable(why)) => {
                    if !waited {
                        tracing::warn!(
                            stream_sequence = envelope.jetstream().stream_sequence,
                            reason = %why,
                            "a stream the message came through does not answer; the message is held and its \
                             origin asked for again until it does"
                        );
                    }
                    waited = true;
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(MAX_RETRY);
                }
            }
        };
        if waited {
            tracing::info!(
                stream_sequence = envelope.jetstream().stream_sequence,
                "the origin of the held message is known again"
            );
        }
        envelope.with_origin(Some(origin))
    }

    async fn origin_of(&self, envelope: &Envelope) -> Result<Origin, Untold> {
        let sequence = envelope.jetstream().stream_sequence;
        let consumed = At { api: None, name: self.consumed.clone() };
        let header =
            envelope.headers().get(SOURCE_HEADER).map(parse_source_header).transpose().map_err(Untold::Refused)?;
        self.follow(consumed, sequence, header, None, 0).await.map(|(at, sequence, subject)| {
            let stream = if at.api.is_none() && at.name == self.consumed {
                envelope.keyed_stream().into_owned()
            } else {
                at.name.clone()
            };
            let subject = subject.filter(|s| s != envelope.subject()).map(Into::into);
            Origin::Stored { stream: self.qualified(&stream, at.api.as_deref()).into(), sequence, subject }
        })
    }

    /// The origin of message `sequence` of stream `at`, whose (authoritative) source header is
    /// `header`; `subject` the original subject known so far.
    async fn follow(
        &self,
        at: At,
        sequence: u64,
        header: Option<SourceHeader>,
        subject: Option<String>,
        hops: usize,
    ) -> Result<(At, u64, Option<String>), Untold> {
        if hops > MAX_HOPS {
            return Err(Untold::Refused(format!("more than {MAX_HOPS} mirrors and sources lead to it")));
        }
        match (&*self.kind(&at).await?, header) {
            (Kind::Plain, _) => Ok((at, sequence, subject)),
            (Kind::Mirror(next), header) => {
                let next = self.within(&at, next);
                Box::pin(self.follow(next, sequence, header, subject, hops + 1)).await
            }
            // A sourced stream's own publishes carry no header: stored here first.
            (Kind::Sourced(_), None) => Ok((at, sequence, subject)),
            (Kind::Sourced(sources), Some(header)) => {
                let source = sources
                    .iter()
                    .find(|s| {
                        s.name == header.stream
                            && match (&header.api_hash, &s.api) {
                                (None, None) => true,
                                (Some(hash), Some(api)) => api_hash(api) == *hash,
                                _ => false,
                            }
                    })
                    .ok_or_else(|| {
                        format!("stream `{}` has no source `{}` as its header names", at.name, header.stream)
                    })?;
                let origin = self.within(&at, source);
                let subject = subject.or(header.subject);
                // The header the message has there, when that stream is a mirror or sourced
                // too (a chain): the source over it wrote its own.
                let next = match &*self.kind(&origin).await? {
                    Kind::Plain => None,
                    Kind::Mirror(_) | Kind::Sourced(_) => self.source_header_of(&origin, header.sequence).await?,
                };
                Box::pin(self.follow(origin, header.sequence, next, subject, hops + 1)).await
            }
        }
    }

    /// `next`, named from `from`: a stream reached through `from`'s API prefix unless it has
    /// one of its own.
    fn within(&self, from: &At, next: &At) -> At {
        At { api: next.api.clone().or_else(|| from.api.clone()), name: next.name.clone() }
    }

    /// `{stream}` or `{stream}@{domain}`: the domain of the API prefix it is read through, or
    /// the consumed stream's own.
    fn qualified(&self, stream: &str, api: Option<&str>) -> String {
        match api.map(domain_of).or(self.domain.as_deref()) {
            Some(domain) => format!("{stream}@{domain}"),
            None => stream.to_owned(),
        }
    }

    fn context(&self, api: Option<&str>) -> Context {
        match api {
            Some(prefix) => jetstream::with_prefix(self.client.clone(), prefix),
            None => self.js.clone(),
        }
    }

    /// What stream `at` is (cached).
    async fn kind(&self, at: &At) -> Result<Arc<Kind>, Untold> {
        if let Some(kind) = self.kinds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(at) {
            return Ok(Arc::clone(kind));
        }
        let mut stream = self
            .context(at.api.as_deref())
            .get_stream(&at.name)
            .await
            .map_err(|e| untold(&e, format!("stream `{}` cannot be read: {e}", at.name)))?;
        let info = stream.info().await.map_err(|e| untold(&e, format!("stream `{}` cannot be read: {e}", at.name)))?;
        let at_of = |s: &jetstream::stream::Source| At {
            api: s.external.as_ref().map(|x| x.api_prefix.clone()),
            name: s.name.clone(),
        };
        let kind = match (&info.config.mirror, &info.config.sources) {
            (Some(mirror), _) => Kind::Mirror(at_of(mirror)),
            (None, Some(sources)) if !sources.is_empty() => Kind::Sourced(sources.iter().map(at_of).collect()),
            _ => Kind::Plain,
        };
        let kind = Arc::new(kind);
        self.kinds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(at.clone(), Arc::clone(&kind));
        Ok(kind)
    }

    /// The source header of message `sequence` of stream `at` (`None`: it has none).
    async fn source_header_of(&self, at: &At, sequence: u64) -> Result<Option<SourceHeader>, Untold> {
        let stream = self
            .context(at.api.as_deref())
            .get_stream_no_info(&at.name)
            .await
            .map_err(|e| untold(&e, format!("stream `{}` cannot be read: {e}", at.name)))?;
        let message = stream.get_raw_message(sequence).await.map_err(|e| {
            let why = format!("message {sequence} of `{}`, which it came through, cannot be read: {e}", at.name);
            untold(&e, why)
        })?;
        message.headers.get(SOURCE_HEADER).map(|v| parse_source_header(v.as_str())).transpose().map_err(Untold::Refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_headers_are_read_in_every_form_and_refused_when_they_say_nothing() {
        let ok = |value: &str, stream: &str, hash: Option<&str>, sequence: u64, subject: Option<&str>| {
            let want = SourceHeader {
                stream: stream.into(),
                api_hash: hash.map(Into::into),
                sequence,
                subject: subject.map(Into::into),
            };
            assert_eq!(parse_source_header(value), Ok(want), "{value}");
        };
        // What nats-server 2.15.1 writes (checked there): same domain, a transform, another
        // domain, and without the optional fields.
        ok("A 6 > > a.x rfexqmGM", "A", None, 6, Some("a.x"));
        ok("A 1 a.> t.> a.k0 7pq7NdcR", "A", None, 1, Some("a.k0"));
        ok("E:n1VdnVvB 2 > > e.k1 snBM5Aff", "E", Some("n1VdnVvB"), 2, Some("e.k1"));
        ok("ORDERS 42", "ORDERS", None, 42, None);
        // Servers before 2.10: the origin's acknowledgement subject.
        ok("$JS.ACK.ORDERS.src.1.42.40.1700000000000000000.0", "ORDERS", None, 42, None);
        ok("$JS.ACK.hub.ACCHASH.ORDERS.src.1.42.40.1700000000000000000.0.xyz", "ORDERS", None, 42, None);
        for bad in ["", "   ", "A", "A x", "A 0", "A -1", ":hash 3", "A: 3", "a.b 3", "A* 3", "$JS.ACK.X.c.1"] {
            assert!(parse_source_header(bad).is_err(), "`{bad}` must be refused");
        }
    }

    #[test]
    fn no_answer_is_told_from_the_servers_answer() {
        use async_nats::jetstream::context::{GetStreamError, GetStreamErrorKind, RequestError, RequestErrorKind};
        let cut = RequestError::new(RequestErrorKind::NoResponders);
        assert!(no_answer(&cut), "nobody answers the API subject (a link cut)");
        assert!(no_answer(&RequestError::new(RequestErrorKind::TimedOut)));
        assert!(!no_answer(&RequestError::new(RequestErrorKind::Other)));
        let wrapped = GetStreamError::with_source(GetStreamErrorKind::Request, cut);
        assert!(no_answer(&wrapped), "found through the chain of sources");
        assert_eq!(untold(&wrapped, "x".into()), Untold::Unreachable("x".into()));
        let missing = GetStreamError::new(GetStreamErrorKind::InvalidStreamName);
        assert_eq!(untold(&missing, "y".into()), Untold::Refused("y".into()));
    }

    #[test]
    fn an_external_prefix_hashes_as_the_server_names_it() {
        // The name nats-server 2.15.1 gave a source read through `$JS.edge.API`.
        assert_eq!(api_hash("$JS.edge.API"), "n1VdnVvB");
        assert_eq!(domain_of("$JS.edge.API"), "edge");
        assert_eq!(domain_of("$JS.a.b.API"), "$JS.a.b.API", "not one domain: the prefix itself");
        assert_eq!(domain_of("ACME.JS"), "ACME.JS");
    }
}
