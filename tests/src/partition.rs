//! [`Partition`]: a TCP proxy a test puts between one service and its store, which cuts that
//! service off (a network partition) and heals it, while every other service reaches the
//! store directly.
//!
//! A cut holds bytes rather than refusing them, as a partition does: connections stay open,
//! nothing reaches the other side, and new connections are accepted and left waiting. Once
//! healed, what was held is delivered, as TCP delivers what it retransmitted, so that a
//! write sent before or during the cut lands late, which is what a fence must refuse.
//!
//! ```
//! use idem_tests::partition::Partition;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//! let partition = Partition::start(upstream.local_addr().unwrap().port()).await;
//! assert_ne!(partition.port(), upstream.local_addr().unwrap().port());
//! partition.cut();
//! partition.heal();
//! # });
//! ```

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{
        TcpListener, TcpStream,
        tcp::{OwnedReadHalf, OwnedWriteHalf},
    },
    sync::watch,
    task::{JoinHandle, JoinSet},
};

/// A proxy to `127.0.0.1:<port>` that the test cuts and heals; stopped when dropped.
#[derive(Debug)]
pub struct Partition {
    port: u16,
    cut: watch::Sender<bool>,
    accepting: JoinHandle<()>,
}

impl Partition {
    /// A proxy, on a free port, to the server at `127.0.0.1:<target>`; not cut.
    pub async fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port for the proxy");
        let port = listener.local_addr().expect("a bound address").port();
        let (cut, watching) = watch::channel(false);
        let accepting = tokio::spawn(accept(listener, target, watching));
        Self {
            port,
            cut,
            accepting,
        }
    }

    /// The port the service connects to instead of the server's.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Cuts the service off: from now on no byte passes, either way.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Heals the cut: what was held passes, and so does what comes.
    pub fn heal(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        // Its connections' tasks are in the accepting task's set, dropped with it.
        self.accepting.abort();
    }
}

async fn accept(listener: TcpListener, target: u16, cut: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    while let Ok((client, _)) = listener.accept().await {
        connections.spawn(connect(client, target, cut.clone()));
    }
}

/// Connects `client` to the server once no cut stands, then carries bytes both ways.
async fn connect(client: TcpStream, target: u16, mut cut: watch::Receiver<bool>) {
    if healed(&mut cut).await.is_none() {
        return;
    }
    let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        carry(client_read, server_write, cut.clone()),
        carry(server_read, client_write, cut),
    );
}

/// Carries bytes from `from` to `to`, holding them while a cut stands.
async fn carry(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut cut: watch::Receiver<bool>) {
    let mut buffer = vec![0; 16 * 1024];
    loop {
        // Not read while cut: the bytes wait in the socket, as they would on the wire.
        if healed(&mut cut).await.is_none() {
            return;
        }
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        // A read that was waiting when the cut came is held until it heals.
        if healed(&mut cut).await.is_none() || to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
    let _ = to.shutdown().await;
}

/// Waits until no cut stands; `None` once the proxy is gone.
async fn healed(cut: &mut watch::Receiver<bool>) -> Option<()> {
    cut.wait_for(|cut| !cut).await.ok().map(|_| ())
}
