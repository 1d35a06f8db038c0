//! The latency suite's probe: an open-loop publisher paced by an absolute schedule, and a
//! listener on the stream's ack subjects, each on a core-NATS connection of its own spoken
//! over a plain TCP socket on a thread of its own.
//!
//! Why by hand: `sinks-bench` runs as a debug build, where async-nats's parser would take
//! milliseconds over a burst of 500 acks and add them to every latency. Here a read is
//! stamped the moment it returns and the frames in it are cut with a few byte searches.
//! The publisher uses plain `PUB` (no JetStream publish ack): the stream is fresh for each
//! run and only this connection publishes to it, so message `i` is stream sequence `i + 1`,
//! which the run checks against the stream's state at its end.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::stats::{acked_sequence, due, intended};

/// Connects to the NATS server at `addr` (`host:port`) and says hello; returns the socket
/// once the server has answered a PING (so the connection is in use).
fn connect(addr: &str) -> Result<TcpStream> {
    let mut socket = TcpStream::connect(addr).with_context(|| format!("connecting to nats at {addr}"))?;
    socket.set_nodelay(true)?;
    socket.write_all(
        b"CONNECT {\"verbose\":false,\"pedantic\":false,\"echo\":false,\"lang\":\"sinks-bench\"}\r\nPING\r\n",
    )?;
    socket.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    while !seen.windows(6).any(|w| w == b"PONG\r\n") {
        let n = socket.read(&mut chunk).context("reading the server's hello")?;
        if n == 0 {
            bail!("nats at {addr} closed the connection during the hello");
        }
        seen.extend_from_slice(&chunk[..n]);
        if let Some(at) = seen.windows(4).position(|w| w == b"-ERR") {
            bail!("nats at {addr} refused the connection: {}", String::from_utf8_lossy(&seen[at..]).trim());
        }
    }
    Ok(socket)
}

/// One frame the server sent.
#[derive(Debug, PartialEq)]
enum Frame<'a> {
    /// `MSG`: its subject and body.
    Msg { subject: &'a str, body: &'a [u8] },
    /// `PING`: answered with `PONG`.
    Ping,
    /// `-ERR …`.
    Err(&'a str),
    /// Anything else (`PONG`, `+OK`, `INFO`).
    Other,
}

/// The complete frames at the start of `buf` and how many bytes they took (a frame cut off
/// at the end stays for the next read).
fn frames(buf: &[u8]) -> Result<(Vec<Frame<'_>>, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(eol) = buf[at..].windows(2).position(|w| w == b"\r\n").map(|p| at + p) {
        let line = std::str::from_utf8(&buf[at..eol]).context("a frame line that is not UTF-8")?;
        if let Some(rest) = line.strip_prefix("MSG ") {
            // MSG <subject> <sid> [reply-to] <#bytes>
            let tokens: Vec<&str> = rest.split(' ').collect();
            let (Some(subject), Some(size)) = (tokens.first(), tokens.last()) else { bail!("bad MSG line {line:?}") };
            let size: usize = size.parse().with_context(|| format!("bad MSG size in {line:?}"))?;
            let body_at = eol + 2;
            if buf.len() < body_at + size + 2 {
                break;
            }
            out.push(Frame::Msg { subject, body: &buf[body_at..body_at + size] });
            at = body_at + size + 2;
            continue;
        }
        out.push(match line {
            "PING" => Frame::Ping,
            l if l.starts_with("-ERR") => Frame::Err(l),
            _ => Frame::Other,
        });
        at = eol + 2;
    }
    Ok((out, at))
}

/// The listener on a stream's ack subjects (see the module docs).
pub(crate) struct Listener {
    thread: JoinHandle<Result<Vec<Option<Instant>>>>,
    stop: Arc<AtomicBool>,
}

impl Listener {
    /// Subscribes to `subject` (e.g. `$JS.ACK.LAT.>`) at `addr` and records, for stream
    /// sequences `1..=total`, the instant their first positive ack arrived. Subscribed when
    /// this returns.
    pub(crate) fn start(addr: &str, subject: &str, total: u64) -> Result<Self> {
        let mut socket = connect(addr)?;
        socket.write_all(format!("SUB {subject} 1\r\nPING\r\n").as_bytes())?;
        socket.set_read_timeout(Some(Duration::from_millis(200)))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("latency-acks".into())
            .spawn(move || listen(socket, total, &stopped))
            .context("starting the ack listener")?;
        Ok(Self { thread, stop })
    }

    /// Waits until every sequence is acked or `deadline` passes, then returns the instants.
    pub(crate) fn finish(self, deadline: Instant) -> Result<Vec<Option<Instant>>> {
        while !self.thread.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().map_err(|_| anyhow::anyhow!("the ack listener panicked"))?
    }
}

fn listen(mut socket: TcpStream, total: u64, stop: &AtomicBool) -> Result<Vec<Option<Instant>>> {
    let mut acked: Vec<Option<Instant>> = vec![None; usize::try_from(total)?];
    let mut count = 0u64;
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut chunk = vec![0u8; 1 << 16];
    while count < total && !stop.load(Ordering::Relaxed) {
        let n = match socket.read(&mut chunk) {
            Ok(0) => bail!("nats closed the ack listener's connection"),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) => return Err(e).context("reading acks"),
        };
        let now = Instant::now();
        buf.extend_from_slice(&chunk[..n]);
        let (found, used) = frames(&buf)?;
        let mut pong = false;
        for frame in found {
            match frame {
                Frame::Msg { subject, body } => {
                    let Some(seq) = acked_sequence(subject, body) else { continue };
                    let slot = usize::try_from(seq).ok().and_then(|s| s.checked_sub(1)).and_then(|s| acked.get_mut(s));
                    if let Some(slot @ None) = slot {
                        *slot = Some(now);
                        count += 1;
                    }
                }
                Frame::Ping => pong = true,
                Frame::Err(e) => bail!("nats: {e}"),
                Frame::Other => {}
            }
        }
        buf.drain(..used);
        if pong {
            socket.write_all(b"PONG\r\n")?;
        }
    }
    Ok(acked)
}

/// What the publisher did: when each message actually left (offsets from the run's start),
/// and its connection, still open.
pub(crate) struct Sent {
    pub(crate) actual: Vec<Duration>,
    pub(crate) open: Open,
}

/// The publisher's connection, kept open until the run's acks are in: a publisher that
/// disconnects right after its last message is not what a sink meets in service.
pub(crate) struct Open {
    writer: Arc<Mutex<TcpStream>>,
    pinger: std::thread::JoinHandle<()>,
}

impl Open {
    /// Closes the connection (a PING flushed first) and ends its reader.
    pub(crate) fn close(self) -> Result<()> {
        {
            let mut w = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            w.write_all(b"PING\r\n")?;
            w.flush()?;
            let _ = w.shutdown(std::net::Shutdown::Write);
        }
        let _ = self.pinger.join();
        Ok(())
    }
}

/// Publishes `total` messages to `addr` at `rate` msgs/s, message `i` to `subject(i)` with
/// `payload(i)`, on the absolute schedule `start + i / rate`: whatever is due is written at
/// once (one write for all of it), then the thread sleeps until the next message is due.
/// A late wake-up shows as a late send, and the latencies count from the intended instant.
pub(crate) fn publish(
    addr: &str,
    rate: f64,
    total: u64,
    start: Instant,
    subject: impl Fn(u64) -> String,
    payload: impl Fn(u64) -> bytes::Bytes,
) -> Result<Sent> {
    let socket = connect(addr)?;
    let writer = Arc::new(Mutex::new(socket.try_clone()?));
    // The server's PINGs on this connection are answered by a reader of their own.
    let answering = Arc::clone(&writer);
    let mut reader = socket;
    reader.set_read_timeout(None)?;
    let pinger = std::thread::Builder::new().name("latency-pub-reader".into()).spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = reader.read(&mut chunk) {
            if n == 0 {
                break;
            }
            if chunk[..n].windows(4).any(|w| w == b"PING") {
                let mut w = answering.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let _ = w.write_all(b"PONG\r\n");
            }
        }
    })?;
    let mut actual = Vec::with_capacity(usize::try_from(total)?);
    let mut sent = 0u64;
    let mut out = Vec::with_capacity(1 << 16);
    while sent < total {
        let now = start.elapsed();
        let until = due(now, rate, total);
        if until > sent {
            out.clear();
            for i in sent..until {
                let body = payload(i);
                out.extend_from_slice(format!("PUB {} {}\r\n", subject(i), body.len()).as_bytes());
                out.extend_from_slice(&body);
                out.extend_from_slice(b"\r\n");
            }
            writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner).write_all(&out)?;
            let left = start.elapsed();
            actual.extend((sent..until).map(|_| left));
            sent = until;
        }
        if sent < total {
            let next = intended(sent, rate);
            if let Some(wait) = next.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    }
    Ok(Sent { actual, open: Open { writer, pinger } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_cut_whole_and_a_partial_one_waits() {
        let wire =
            b"INFO {}\r\nMSG $JS.ACK.S.c.1.7.7.1.0 1 4\r\n+ACK\r\nPING\r\nMSG a.b 1 r.x 0\r\n\r\nMSG x 1 10\r\n+AC";
        let (found, used) = frames(wire).expect("frames");
        assert_eq!(
            found,
            vec![
                Frame::Other,
                Frame::Msg { subject: "$JS.ACK.S.c.1.7.7.1.0", body: b"+ACK" },
                Frame::Ping,
                Frame::Msg { subject: "a.b", body: b"" },
            ]
        );
        assert_eq!(&wire[used..], b"MSG x 1 10\r\n+AC");
        let (found, used) = frames(b"-ERR 'Stale Connection'\r\nMSG x 1").expect("frames");
        assert_eq!(found, vec![Frame::Err("-ERR 'Stale Connection'")]);
        assert_eq!(used, 25);
        assert!(frames(b"MSG x 1 notanumber\r\n").is_err());
    }
}
