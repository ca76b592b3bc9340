//! The listening socket of a binary of the shop, and the one sentence its user reads when the
//! address cannot be had: which address, why, and how to choose another.

use std::{fmt, io, net::SocketAddr};

use tokio::net::{TcpListener, TcpSocket};

use super::LISTEN_BACKLOG;

/// A listener on `addr` with an accept queue of [`LISTEN_BACKLOG`], as the shop's binaries use.
///
/// `choose` says how the binary's user picks another address, for the message of a failure:
/// the shop passes `--addr HOST:PORT or SHOP_ADDR`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let taken = shop::server::bind("127.0.0.1:0".parse().unwrap(), "--addr").unwrap();
/// let addr = taken.local_addr().unwrap();
/// let error = shop::server::bind(addr, "--addr HOST:PORT").unwrap_err();
/// assert_eq!(error.addr(), addr);
/// assert!(error.to_string().starts_with(&format!("cannot listen on {addr}: ")));
/// assert!(error.to_string().ends_with("; choose another address with --addr HOST:PORT"));
/// # }
/// ```
///
/// # Errors
///
/// When the address cannot be bound (it is in use, say, or not one of this machine's).
pub fn bind(addr: SocketAddr, choose: &str) -> Result<TcpListener, BindError> {
    listen(addr).map_err(|source| BindError {
        addr,
        choose: choose.to_owned(),
        source,
    })
}

fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    // As `TcpListener::bind` does: a restarted shop can listen again at once.
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// An address [`bind`] could not listen on. Its message is one sentence:
/// `cannot listen on 127.0.0.1:3000: Address already in use (os error 98); choose another
/// address with --addr HOST:PORT or SHOP_ADDR`.
#[derive(Debug)]
pub struct BindError {
    addr: SocketAddr,
    choose: String,
    source: io::Error,
}

impl BindError {
    /// The address that could not be had.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the system said (`ErrorKind::AddrInUse`, say).
    pub fn kind(&self) -> io::ErrorKind {
        self.source.kind()
    }
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot listen on {}: {}; choose another address with {}",
            self.addr, self.source, self.choose
        )
    }
}

impl std::error::Error for BindError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}
