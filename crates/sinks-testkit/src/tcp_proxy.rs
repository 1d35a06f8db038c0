//! [`TcpProxy`]: a TCP link on loopback that a test can cut and restore (a leaf node's link
//! to its hub, say). While cut, every connection through it is closed and nothing listens on
//! its port (connections are refused); restored, it listens on the same port again.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy to one upstream address; stopped when dropped.
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    cut: Arc<watch::Sender<bool>>,
    stop: watch::Sender<bool>,
}

impl TcpProxy {
    /// Starts a proxy on a free loopback port to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let cut = Arc::new(watch::Sender::new(false));
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(serve(listener, upstream, Arc::clone(&cut), stopped));
        Ok(Self { addr, cut, stop })
    }

    /// The proxy's address (`127.0.0.1:PORT`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Cuts (`true`) or restores the link.
    pub fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// A listener on one port that a switch turns off (nothing listens: connections are refused)
/// and on again (the same port bound again, retried while the kernel still holds it): the
/// proxy's cut, and the HTTP test server's down mode.
pub(crate) struct SwitchedListener {
    addr: Option<SocketAddr>,
    listener: Option<TcpListener>,
    off: watch::Receiver<bool>,
}

impl SwitchedListener {
    /// Serves `listener` while `off` holds `false`.
    pub(crate) fn new(listener: TcpListener, off: watch::Receiver<bool>) -> Self {
        Self { addr: listener.local_addr().ok(), listener: Some(listener), off }
    }

    /// The next connection accepted while the switch is on; `None` once `stop` changes (or
    /// the port can no longer be known).
    pub(crate) async fn accept(&mut self, stop: &mut watch::Receiver<bool>) -> Option<TcpStream> {
        loop {
            if *self.off.borrow_and_update() {
                self.listener = None;
                tokio::select! {
                    _ = self.off.wait_for(|off| !*off) => {}
                    _ = stop.changed() => return None,
                }
                continue;
            }
            let Some(bound) = &self.listener else {
                match TcpListener::bind(self.addr?).await {
                    Ok(l) => self.listener = Some(l),
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
                continue;
            };
            tokio::select! {
                accepted = bound.accept() => match accepted {
                    Ok((tcp, _)) => return Some(tcp),
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                },
                _ = self.off.changed() => {}
                _ = stop.changed() => return None,
            }
        }
    }
}

async fn serve(
    listener: TcpListener,
    upstream: SocketAddr,
    cut: Arc<watch::Sender<bool>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut switched = SwitchedListener::new(listener, cut.subscribe());
    while let Some(client) = switched.accept(&mut stop).await {
        let mut link_cut = cut.subscribe();
        let mut link_stop = stop.clone();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(upstream).await else { return };
            let (mut client, mut server) = (client, server);
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                _ = link_cut.wait_for(|c| *c) => {}
                _ = link_stop.changed() => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn a_cut_link_refuses_and_closes_and_a_restored_one_carries_again() {
        let echo = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let upstream = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let proxy = TcpProxy::start(upstream).await.unwrap();
        let mut open = TcpStream::connect(proxy.addr()).await.unwrap();
        open.write_all(b"hi").await.unwrap();
        let mut buf = [0u8; 2];
        open.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hi");
        proxy.set_cut(true);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(open.read(&mut buf).await.unwrap_or(0), 0, "the open connection was closed");
        assert!(TcpStream::connect(proxy.addr()).await.is_err(), "a new one is refused");
        proxy.set_cut(false);
        let restored = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Ok(s) = TcpStream::connect(proxy.addr()).await {
                    return s;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        let mut again = restored.await.unwrap();
        again.write_all(b"ok").await.unwrap();
        again.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ok");
    }
}
