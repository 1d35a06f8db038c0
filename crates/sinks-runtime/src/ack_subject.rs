//! The ack reply subject of a JetStream delivery (`$JS.ACK.…`, NATS ADR-15), read in one pass
//! over its bytes: the stream, consumer, sequences, delivery count, time stored and pending
//! count that the source puts in each envelope's `JetStreamInfo`.
//!
//! async-nats's `Message::info` reads the same subject, at about 2,000 instructions per
//! message (a token array filled through `str::split`, an `i128` parse of the time); this
//! reader costs a fraction of that on the forward path (issue 65, docs/performance.md). The
//! tests check it against `Message::info` on both subject formats. It is stricter in one way
//! only: a number must be plain ASCII digits (`Message::info` also takes a sign, and a
//! negative delivery count or time), which a server never sends.

use time::OffsetDateTime;

/// The prefix of every JetStream ack reply subject.
const PREFIX: &str = "$JS.ACK.";

/// Most tokens read after the prefix: the 9 of the current format and an optional 10th (a
/// random token); further ones are allowed by ADR-15 and ignored, as async-nats does.
const MAX_TOKENS: usize = 10;

/// What an ack reply subject says about its message, borrowed from the subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AckSubject<'a> {
    /// The JetStream domain (`None` for `_` or the older 7-token format).
    pub(crate) domain: Option<&'a str>,
    /// The stream the message is stored in.
    pub(crate) stream: &'a str,
    /// The consumer that delivered it.
    pub(crate) consumer: &'a str,
    /// How many times it has been delivered, this time included.
    pub(crate) delivered: u64,
    /// Its sequence in the stream.
    pub(crate) stream_sequence: u64,
    /// This delivery's sequence in the consumer.
    pub(crate) consumer_sequence: u64,
    /// When the stream stored it.
    pub(crate) published: OffsetDateTime,
    /// Messages pending for the consumer after this one.
    pub(crate) pending: u64,
}

impl<'a> AckSubject<'a> {
    /// Reads `reply`: `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer
    /// seq>.<time ns>.<pending>`, or the current format with `<domain>.<account hash>.` before
    /// the stream and optional tokens after the pending count.
    pub(crate) fn parse(reply: &'a str) -> Result<Self, &'static str> {
        let rest = reply.strip_prefix(PREFIX).ok_or("not a jetstream ack subject")?;
        let mut tokens = [""; MAX_TOKENS];
        let mut count = 0;
        let mut start = 0;
        for (at, byte) in rest.bytes().enumerate() {
            if byte == b'.' {
                if count == MAX_TOKENS {
                    break;
                }
                // `.` is ASCII, so both ends are character boundaries.
                tokens[count] = &rest[start..at];
                count += 1;
                start = at + 1;
            }
        }
        if count < MAX_TOKENS {
            tokens[count] = &rest[start..];
            count += 1;
        }
        let (domain, t) = match count {
            9.. => ((tokens[0] != "_").then_some(tokens[0]), &tokens[2..]),
            7 => (None, &tokens[..]),
            _ => return Err("wrong number of tokens in the ack subject"),
        };
        // The ranges async-nats reads them in: the delivery count an `i64`, the time `i128`
        // nanoseconds, the rest `u64`.
        let delivered = i64::try_from(digits(t[2])?).map_err(|_| TOO_LARGE)?;
        let nanos = i128::try_from(digits(t[5])?).map_err(|_| TOO_LARGE)?;
        Ok(Self {
            domain,
            stream: t[0],
            consumer: t[1],
            // Digits only, so never negative.
            delivered: delivered.unsigned_abs(),
            stream_sequence: number(t[3])?,
            consumer_sequence: number(t[4])?,
            published: OffsetDateTime::from_unix_timestamp_nanos(nanos)
                .map_err(|_| "ack subject's time out of range")?,
            pending: number(t[6])?,
        })
    }
}

/// A number of the subject beyond the range it is read in.
const TOO_LARGE: &str = "number too large in the ack subject";

/// `token` as a `u64`.
fn number(token: &str) -> Result<u64, &'static str> {
    u64::try_from(digits(token)?).map_err(|_| TOO_LARGE)
}

/// `token` as a number: ASCII digits only, at most 38 of them (so that it fits a `u128`).
fn digits(token: &str) -> Result<u128, &'static str> {
    const NOT_A_NUMBER: &str = "not a number in the ack subject";
    if token.is_empty() {
        return Err("empty number in the ack subject");
    }
    // Up to 19 digits always fit a `u64`, whose arithmetic is cheaper: every number a server
    // sends today (a time in nanoseconds has 19 digits until the year 2286).
    if token.len() <= 19 {
        let mut n = 0u64;
        for byte in token.bytes() {
            let digit = byte.wrapping_sub(b'0');
            if digit > 9 {
                return Err(NOT_A_NUMBER);
            }
            n = n * 10 + u64::from(digit);
        }
        return Ok(u128::from(n));
    }
    if token.len() > 38 {
        return Err(TOO_LARGE);
    }
    token.bytes().try_fold(0u128, |n, byte| {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 { Err(NOT_A_NUMBER) } else { Ok(n * 10 + u128::from(digit)) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What async-nats's `Message::info` reads from `reply`, in this module's terms.
    async fn by_async_nats(reply: &str) -> Option<AckSubject<'static>> {
        // A client that never connects: `Message::info` only reads the reply subject.
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connect("nats://127.0.0.1:1")
            .await
            .expect("a client that connects later");
        let message = async_nats::jetstream::Message {
            message: async_nats::Message {
                subject: "s".into(),
                reply: Some(reply.to_owned().into()),
                payload: bytes::Bytes::new(),
                headers: None,
                status: None,
                description: None,
                length: 0,
            },
            context: async_nats::jetstream::new(client),
        };
        let info = message.info().ok()?;
        let leak = |s: &str| -> &'static str { Box::leak(s.to_owned().into_boxed_str()) };
        Some(AckSubject {
            domain: info.domain.map(leak),
            stream: leak(info.stream),
            consumer: leak(info.consumer),
            delivered: u64::try_from(info.delivered).ok()?,
            stream_sequence: info.stream_sequence,
            consumer_sequence: info.consumer_sequence,
            published: info.published,
            pending: info.pending,
        })
    }

    #[tokio::test]
    async fn reads_both_formats_as_async_nats_does() {
        let subjects = [
            // The 7-token format of older servers.
            "$JS.ACK.ORDERS.sink.1.42.40.1765000000123456789.7",
            // The current format: domain `_` (none) and account hash, with and without the
            // trailing token, and with tokens beyond it.
            "$JS.ACK._.ACCHASH.ORDERS.sink.3.42.40.1765000000123456789.0",
            "$JS.ACK._.ACCHASH.ORDERS.sink.3.42.40.1765000000123456789.0.tok",
            "$JS.ACK.hub.ACCHASH.ORDERS.sink.2.9.8.1.0.tok.more.tokens",
            // Numbers at their limits.
            "$JS.ACK.S.C.9223372036854775807.18446744073709551615.1.0.18446744073709551615",
            // A time past `u64` nanoseconds (the year 2600).
            "$JS.ACK.S.C.1.1.1.20000000000000000000.0",
        ];
        for reply in subjects {
            let ours = AckSubject::parse(reply).unwrap_or_else(|e| panic!("{reply}: {e}"));
            assert_eq!(Some(ours), by_async_nats(reply).await, "{reply}");
        }
        let ours = AckSubject::parse(subjects[3]).unwrap();
        assert_eq!((ours.domain, ours.stream, ours.consumer, ours.delivered), (Some("hub"), "ORDERS", "sink", 2));
        assert_eq!((ours.stream_sequence, ours.consumer_sequence, ours.pending), (9, 8, 0));
        let old = AckSubject::parse(subjects[0]).unwrap();
        assert_eq!(old.published.unix_timestamp_nanos(), 1_765_000_000_123_456_789);
        assert_eq!((old.domain, old.stream_sequence, old.consumer_sequence, old.pending), (None, 42, 40, 7));
    }

    #[tokio::test]
    async fn refuses_what_async_nats_refuses() {
        let subjects = [
            "$JS.NAK.ORDERS.sink.1.42.40.1.7",
            "$JS.ACK.ORDERS.sink.1.42.40.1",
            "$JS.ACK._.H.ORDERS.sink.1.42.40.1",
            "$JS.ACK.ORDERS.sink.x.42.40.1.7",
            "$JS.ACK.ORDERS.sink.1.42..1.7",
            "$JS.ACK.ORDERS.sink.1.18446744073709551616.40.1.7",
            "$JS.ACK.ORDERS.sink.1.42.40.1.7.8",
            "$JS.ACK.ORDERS.sink.9223372036854775808.42.40.1.7",
        ];
        for reply in subjects {
            assert!(AckSubject::parse(reply).is_err(), "{reply}");
            assert_eq!(by_async_nats(reply).await, None, "{reply}");
        }
    }
}
