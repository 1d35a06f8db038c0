//! Classification of HTTP answers and client errors into [`SinkError`] classes.
//!
//! An HTTP failure is the endpoint's business unless the endpoint said otherwise: only a
//! status outside every configured list refuses a message permanently, and only that
//! message. Outages, throttling and ambiguous timeouts are retried, never dead-lettered.
//!
//! | answer or error | class | why |
//! |---|---|---|
//! | status in `success_statuses` (200, 201, 202, 204) | committed | the endpoint took it |
//! | status in `duplicate_statuses` (409, 412) on a request with a key | duplicate | the key was committed before |
//! | status in `conflict_statuses` (none by default) on a request with a key | conflict, existing kept | the key holds other content |
//! | status in `retry_statuses` (408, 425, 429, 500, 502, 503, 504) | temporary | try later; `Retry-After` (seconds or HTTP-date, at most 1 h) becomes the redelivery delay |
//! | 429 among them | throttled (temporary) | the endpoint's own limit: the runner holds the message and writes it again after `Retry-After`, never spending a delivery on it |
//! | 3xx not listed | permanent | redirects are never followed, so the request can never land |
//! | any other status (400, 401, 404, 413, 422, 501, …) | permanent, that message only | the endpoint refuses this message |
//! | timeout after the request was sent (`is_timeout`) | temporary, ambiguous | the endpoint may have committed; `inquiry_url` can tell, else the idempotency key absorbs the redelivery |
//! | connect error, connect timeout, TLS handshake failure (`is_connect`) | temporary | endpoint unreachable; nothing was sent |
//! | connection reset or closed before the answer (`is_request`), body error (`is_body`, `is_decode`) | temporary | transport trouble; redelivery is safe |
//! | redirect error (`is_redirect`) | permanent | cannot happen with redirects off; kept for completeness |
//! | request builder error (`is_builder`) | config | the configured URL or a header cannot form a request |
//! | environment variable of `headers_env` missing or unusable | config | an operator fixes it; fatal at start-up, retried with a loud log at run time |
//! | key required but underivable, payload refused by `payload_mode`, body over `max_request_bytes` | permanent, that message only | this message can never be sent |
//! | any other client error | temporary | unknown trouble is retried, never dead-lettered |

use std::time::Duration;

use sinks_contract::{ErrorClass, SinkError};

use crate::request::StatusClass;

/// What a client error means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ErrorKind {
    /// The class (see the module table).
    pub(crate) class: ErrorClass,
    /// The request may have reached the endpoint and been committed (a timeout after
    /// sending): worth an inquiry.
    pub(crate) ambiguous: bool,
    /// What went wrong, lowercase.
    pub(crate) what: &'static str,
}

/// The class of a client error (see the module table).
pub(crate) fn kind_of(err: &reqwest::Error) -> ErrorKind {
    let kind = |class, ambiguous, what| ErrorKind { class, ambiguous, what };
    if err.is_builder() {
        kind(ErrorClass::Config, false, "request cannot be built")
    } else if err.is_redirect() {
        kind(ErrorClass::Permanent, false, "endpoint redirected the request")
    } else if err.is_connect() {
        kind(ErrorClass::Temporary, false, "cannot connect to the endpoint")
    } else if err.is_timeout() {
        kind(ErrorClass::Temporary, true, "request timed out; the endpoint may have committed it")
    } else if err.is_request() {
        kind(ErrorClass::Temporary, false, "request failed before an answer arrived")
    } else if err.is_body() || err.is_decode() {
        kind(ErrorClass::Temporary, false, "request body or answer failed in transit")
    } else {
        kind(ErrorClass::Temporary, false, "request failed")
    }
}

/// Wraps a client error into a [`SinkError`] of its class, with the error as the source.
pub(crate) fn classify(err: reqwest::Error) -> SinkError {
    let kind = kind_of(&err);
    error_of_class(kind.class, kind.what).with_source(err)
}

/// A [`SinkError`] of `class` with `message`.
pub(crate) fn error_of_class(class: ErrorClass, message: impl Into<String>) -> SinkError {
    match class {
        ErrorClass::Temporary => SinkError::temporary(message),
        ErrorClass::Permanent => SinkError::permanent(message),
        ErrorClass::Config => SinkError::config(message),
    }
}

/// The failure for a status that is not a success, duplicate or conflict; `None` for those.
pub(crate) fn status_error(class: StatusClass, status: u16, retry_after: Option<Duration>) -> Option<SinkError> {
    match class {
        StatusClass::Success | StatusClass::Duplicate | StatusClass::Conflict => None,
        StatusClass::Retry => {
            let e = if status == 429 {
                SinkError::throttled(format!("endpoint answered {status}: throttled; retry later"))
            } else {
                SinkError::temporary(format!("endpoint answered {status}; retry later"))
            };
            Some(match retry_after {
                Some(delay) => e.with_retry_after(delay),
                None => e,
            })
        }
        StatusClass::Redirect => {
            Some(SinkError::permanent(format!("endpoint answered {status}; redirects are not followed")))
        }
        StatusClass::Rejected => Some(SinkError::permanent(format!("endpoint rejected the message with {status}"))),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::request::{StatusSets, classify_status};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn client(timeout_ms: u64) -> reqwest::Client {
        reqwest::Client::builder().timeout(Duration::from_millis(timeout_ms)).no_proxy().build().expect("client")
    }

    async fn closed_port() -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        addr
    }

    /// A loopback server that reads the request and then answers with `reply`
    /// (`None`: never answers; `Some(b"")`: closes the connection).
    async fn one_shot(reply: Option<&'static [u8]>) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let mut buf = vec![0u8; 64 * 1024];
            let _ = socket.read(&mut buf).await;
            match reply {
                None => tokio::time::sleep(Duration::from_secs(30)).await,
                Some(bytes) => {
                    let _ = socket.write_all(bytes).await;
                    let _ = socket.shutdown().await;
                }
            }
        });
        addr
    }

    #[test]
    fn a_429_is_throttling_and_other_retry_statuses_are_not() {
        let delay = Some(Duration::from_secs(1));
        let throttled = status_error(StatusClass::Retry, 429, delay).unwrap();
        assert!(throttled.is_throttled() && throttled.retry_after() == delay);
        for status in [408, 425, 500, 502, 503, 504] {
            assert!(!status_error(StatusClass::Retry, status, None).unwrap().is_throttled(), "{status}");
        }
    }

    #[test]
    fn status_rows() {
        let sets = StatusSets {
            success: vec![200, 201, 202, 204],
            retry: vec![408, 425, 429, 500, 502, 503, 504],
            duplicate: vec![409, 412],
            conflict: vec![422],
        };
        let delay = Some(Duration::from_secs(7));
        for (status, class, expected) in [
            (200, StatusClass::Success, None),
            (409, StatusClass::Duplicate, None),
            (422, StatusClass::Conflict, None),
            (429, StatusClass::Retry, Some(ErrorClass::Temporary)),
            (503, StatusClass::Retry, Some(ErrorClass::Temporary)),
            (302, StatusClass::Redirect, Some(ErrorClass::Permanent)),
            (400, StatusClass::Rejected, Some(ErrorClass::Permanent)),
        ] {
            assert_eq!(classify_status(status, &sets, true), class, "{status}");
            let error = status_error(class, status, delay);
            assert_eq!(error.as_ref().map(SinkError::class), expected, "{status}");
            if let Some(e) = error {
                assert!(e.message().contains(&status.to_string()));
                let wants_delay = class == StatusClass::Retry;
                assert_eq!(e.retry_after(), if wants_delay { delay } else { None }, "{status}");
            }
        }
        assert_eq!(status_error(StatusClass::Retry, 503, None).and_then(|e| e.retry_after()), None);
    }

    #[tokio::test]
    async fn connect_error_row() {
        let addr = closed_port().await;
        let err = client(2000).get(format!("http://{addr}/")).send().await.expect_err("refused");
        let kind = kind_of(&err);
        assert_eq!((kind.class, kind.ambiguous), (ErrorClass::Temporary, false));
        let e = classify(err);
        assert_eq!(e.class(), ErrorClass::Temporary);
        assert!(e.display_chain().starts_with("cannot connect to the endpoint: "));
    }

    #[tokio::test]
    async fn timeout_row_is_ambiguous() {
        let addr = one_shot(None).await;
        let err = client(200).post(format!("http://{addr}/")).body("x").send().await.expect_err("timeout");
        let kind = kind_of(&err);
        assert_eq!((kind.class, kind.ambiguous), (ErrorClass::Temporary, true), "{err:?}");
    }

    #[tokio::test]
    async fn closed_before_answer_row() {
        let addr = one_shot(Some(b"")).await;
        let err = client(2000).post(format!("http://{addr}/")).body("x").send().await.expect_err("closed");
        let kind = kind_of(&err);
        assert_eq!((kind.class, kind.ambiguous), (ErrorClass::Temporary, false), "{err:?}");
    }

    #[tokio::test]
    async fn garbage_answer_row() {
        let addr = one_shot(Some(b"NOT HTTP AT ALL\r\n\r\n")).await;
        let err = client(2000).post(format!("http://{addr}/")).body("x").send().await.expect_err("garbage");
        assert_eq!(kind_of(&err).class, ErrorClass::Temporary, "{err:?}");
    }

    #[tokio::test]
    async fn redirect_row() {
        // Only a client that follows redirects can get here; the sink's never does.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = vec![0u8; 16 * 1024];
                let _ = socket.read(&mut buf).await;
                let reply = b"HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
                let _ = socket.write_all(reply).await;
                let _ = socket.shutdown().await;
            }
        });
        let following = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::limited(1))
            .no_proxy()
            .build()
            .expect("client");
        let err = following.get(format!("http://{addr}/")).send().await.expect_err("redirect loop");
        assert!(err.is_redirect(), "{err:?}");
        assert_eq!(kind_of(&err).class, ErrorClass::Permanent);
    }

    #[test]
    fn builder_row() {
        let err = client(100).get("http://[not a host/").build().expect_err("bad url");
        assert_eq!(kind_of(&err).class, ErrorClass::Config);
        assert_eq!(classify(err).class(), ErrorClass::Config);
    }

    #[test]
    fn error_of_class_rows() {
        for class in [ErrorClass::Temporary, ErrorClass::Permanent, ErrorClass::Config] {
            assert_eq!(error_of_class(class, "x").class(), class);
        }
    }
}
