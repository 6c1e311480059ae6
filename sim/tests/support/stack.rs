//! One test body, two implementations: the conformance suite's abstraction over a TCP stack.
//!
//! [`Real`] is tokio over real loopback sockets (socket2 for the options tokio does not expose);
//! [`Sim`] is the simulated network, with a client host and a server host. A body written against
//! [`Stack`] observes the same things on both, and the suite compares the observations with each
//! other and with what Linux was measured to do.

#![allow(dead_code, reason = "each test binary uses a different part of the support code")]

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// What a body needs from a TCP stack.
pub trait Stack {
    type Stream: AsyncRead + AsyncWrite + Unpin + 'static;
    type Listener: 'static;

    /// Listens on a fresh port with this backlog; returns the listener and the address to dial.
    async fn listen(&self, backlog: u32) -> io::Result<(Self::Listener, String)>;
    /// Listens on exactly this address (to test EADDRINUSE).
    async fn listen_on(&self, addr: &str) -> io::Result<Self::Listener>;
    async fn accept(&self, listener: &Self::Listener) -> io::Result<Self::Stream>;
    async fn connect(&self, addr: &str) -> io::Result<Self::Stream>;
    /// Connects with `TCP_SYNCNT` set.
    async fn connect_with_syn_retries(&self, addr: &str, retries: u32) -> io::Result<Self::Stream>;
    /// An address nothing listens on.
    fn closed_addr(&self) -> String;
    /// Listens on an ephemeral port (port 0); returns the port.
    async fn listen_ephemeral(&self) -> io::Result<(Self::Listener, u16)>;
    /// Dials this port on the server's own host through its loopback address (as the server).
    async fn connect_loopback(&self, port: u16) -> io::Result<Self::Stream>;
    fn shutdown(&self, stream: &Self::Stream, how: Shutdown) -> io::Result<()>;
    fn set_linger_zero(&self, stream: &Self::Stream) -> io::Result<()>;
    fn peer_addr(&self, stream: &Self::Stream) -> io::Result<SocketAddr>;
    fn take_error(&self, stream: &Self::Stream) -> io::Result<Option<io::Error>>;
    fn local_addr(&self, stream: &Self::Stream) -> io::Result<SocketAddr>;
    /// Listens on exactly this `ip:port` (port 0: an ephemeral one) on the server's own host.
    async fn listen_local(&self, addr: &str) -> io::Result<Self::Listener>;
    fn listener_addr(&self, listener: &Self::Listener) -> io::Result<SocketAddr>;
    /// Dials `ip:port` (or `name:port`) from the server's own host.
    async fn connect_local(&self, addr: &str) -> io::Result<Self::Stream>;
    /// Resolves a name as the server's host does.
    async fn resolve(&self, name: &str) -> io::Result<Vec<std::net::IpAddr>>;
}

/// Waits long enough for loopback to deliver everything in flight (and far longer than the
/// simulated links' latency).
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(30)).await;
}

/// `Ok(n)` / `Ok(0) [EOF]` / `Err(ECONNRESET)` — the suite's observation of an I/O result.
pub fn obs<T: std::fmt::Debug>(result: &io::Result<T>) -> String {
    match result {
        Ok(v) => format!("Ok({v:?})"),
        Err(e) => err(e),
    }
}

pub fn err(e: &io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(32) => "EPIPE".to_string(),
        Some(98) => "EADDRINUSE".to_string(),
        Some(99) => "EADDRNOTAVAIL".to_string(),
        Some(101) => "ENETUNREACH".to_string(),
        Some(104) => "ECONNRESET".to_string(),
        Some(107) => "ENOTCONN".to_string(),
        Some(110) => "ETIMEDOUT".to_string(),
        Some(111) => "ECONNREFUSED".to_string(),
        Some(n) => format!("os {n}"),
        None => format!("{:?}", e.kind()),
    };
    format!("Err({name})")
}

/// One read of up to 64 KiB: `Ok(5) "hello"`, `Ok(0) [EOF]`, `Err(ECONNRESET)`, or `pending`
/// when nothing comes within 200 ms.
pub async fn read<S: AsyncRead + Unpin>(stream: &mut S) -> String {
    let mut buf = vec![0u8; 64 * 1024];
    match tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf)).await {
        Err(_) => "pending".to_string(),
        Ok(Ok(0)) => "Ok(0) [EOF]".to_string(),
        Ok(Ok(n)) => format!("Ok({n}) {:?}", String::from_utf8_lossy(&buf[..n])),
        Ok(Err(e)) => err(&e),
    }
}

/// One write: `Ok(n)`, an error, or `pending` when it does not complete within 200 ms.
pub async fn write<S: AsyncWrite + Unpin>(stream: &mut S, data: &[u8]) -> String {
    match tokio::time::timeout(Duration::from_millis(200), stream.write(data)).await {
        Err(_) => "pending".to_string(),
        Ok(r) => obs(&r),
    }
}

/// tokio over real loopback sockets.
#[derive(Clone, Copy, Debug, Default)]
pub struct Real;

impl Stack for Real {
    type Stream = tokio::net::TcpStream;
    type Listener = tokio::net::TcpListener;

    async fn listen(&self, backlog: u32) -> io::Result<(Self::Listener, String)> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.set_reuseaddr(true)?;
        socket.bind("127.0.0.1:0".parse().expect("valid"))?;
        let listener = socket.listen(backlog)?;
        let addr = listener.local_addr()?.to_string();
        Ok((listener, addr))
    }

    async fn listen_on(&self, addr: &str) -> io::Result<Self::Listener> {
        tokio::net::TcpListener::bind(addr).await
    }

    async fn accept(&self, listener: &Self::Listener) -> io::Result<Self::Stream> {
        listener.accept().await.map(|(s, _)| s)
    }

    async fn connect(&self, addr: &str) -> io::Result<Self::Stream> {
        tokio::net::TcpStream::connect(addr).await
    }

    async fn connect_with_syn_retries(&self, addr: &str, retries: u32) -> io::Result<Self::Stream> {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        let value = retries as libc::c_int;
        // SAFETY: a valid socket and a c_int option value of the right size.
        let rc = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&socket),
                libc::IPPROTO_TCP,
                libc::TCP_SYNCNT,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        socket.set_nonblocking(true)?;
        let socket = tokio::net::TcpSocket::from_std_stream(socket.into());
        socket.connect(addr.parse().map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "addr"))?).await
    }

    fn closed_addr(&self) -> String {
        // Bind a port, then release it: nothing listens there now.
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").to_string()
    }

    async fn listen_ephemeral(&self) -> io::Result<(Self::Listener, u16)> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        Ok((listener, port))
    }

    async fn connect_loopback(&self, port: u16) -> io::Result<Self::Stream> {
        tokio::net::TcpStream::connect(("127.0.0.1", port)).await
    }

    fn shutdown(&self, stream: &Self::Stream, how: Shutdown) -> io::Result<()> {
        socket2::SockRef::from(stream).shutdown(how)
    }

    fn set_linger_zero(&self, stream: &Self::Stream) -> io::Result<()> {
        socket2::SockRef::from(stream).set_linger(Some(Duration::ZERO))
    }

    fn peer_addr(&self, stream: &Self::Stream) -> io::Result<SocketAddr> {
        stream.peer_addr()
    }

    fn take_error(&self, stream: &Self::Stream) -> io::Result<Option<io::Error>> {
        stream.take_error()
    }

    fn local_addr(&self, stream: &Self::Stream) -> io::Result<SocketAddr> {
        stream.local_addr()
    }

    async fn listen_local(&self, addr: &str) -> io::Result<Self::Listener> {
        tokio::net::TcpListener::bind(addr).await
    }

    fn listener_addr(&self, listener: &Self::Listener) -> io::Result<SocketAddr> {
        listener.local_addr()
    }

    async fn connect_local(&self, addr: &str) -> io::Result<Self::Stream> {
        tokio::net::TcpStream::connect(addr).await
    }

    async fn resolve(&self, name: &str) -> io::Result<Vec<std::net::IpAddr>> {
        Ok(tokio::net::lookup_host((name, 0)).await?.map(|a| a.ip()).collect())
    }
}

/// The simulated network: the body dials from host `client` to host `server`.
#[derive(Clone, Debug)]
pub struct Sim {
    pub client: sim::net::Host,
    pub server: sim::net::Host,
    next_port: std::rc::Rc<std::cell::Cell<u16>>,
}

impl Sim {
    /// A client and a server host on the run's network.
    pub fn new(ctx: &sim::Ctx) -> Sim {
        let net = ctx.net();
        Sim {
            client: net.host("client"),
            server: net.host("server"),
            next_port: std::rc::Rc::new(std::cell::Cell::new(8000)),
        }
    }
}

impl Stack for Sim {
    type Stream = sim::net::TcpStream;
    type Listener = sim::net::TcpListener;

    async fn listen(&self, backlog: u32) -> io::Result<(Self::Listener, String)> {
        let port = self.next_port.get();
        self.next_port.set(port + 1);
        let listener = self.server.listen_with_backlog(&port.to_string(), backlog as usize)?;
        Ok((listener, format!("server:{port}")))
    }

    async fn listen_on(&self, addr: &str) -> io::Result<Self::Listener> {
        let port = addr.rsplit(':').next().unwrap_or(addr);
        self.server.listen(port)
    }

    async fn accept(&self, listener: &Self::Listener) -> io::Result<Self::Stream> {
        listener.accept().await.map(|(s, _)| s)
    }

    async fn connect(&self, addr: &str) -> io::Result<Self::Stream> {
        self.client.dial(addr).await
    }

    async fn connect_with_syn_retries(&self, addr: &str, retries: u32) -> io::Result<Self::Stream> {
        self.client.dial_with(addr, sim::net::DialOptions { syn_retries: Some(retries) }).await
    }

    fn closed_addr(&self) -> String {
        "server:9".to_string()
    }

    async fn listen_ephemeral(&self) -> io::Result<(Self::Listener, u16)> {
        let listener = self.server.listen("0")?;
        let port = listener.local_addr()?.port();
        Ok((listener, port))
    }

    async fn connect_loopback(&self, port: u16) -> io::Result<Self::Stream> {
        self.server.dial(&format!("127.0.0.1:{port}")).await
    }

    fn shutdown(&self, stream: &Self::Stream, how: Shutdown) -> io::Result<()> {
        stream.shutdown_socket(how)
    }

    fn set_linger_zero(&self, stream: &Self::Stream) -> io::Result<()> {
        stream.set_linger(Some(Duration::ZERO))
    }

    fn peer_addr(&self, stream: &Self::Stream) -> io::Result<SocketAddr> {
        stream.peer_addr()
    }

    fn take_error(&self, stream: &Self::Stream) -> io::Result<Option<io::Error>> {
        stream.take_error()
    }

    fn local_addr(&self, stream: &Self::Stream) -> io::Result<SocketAddr> {
        stream.local_addr()
    }

    async fn listen_local(&self, addr: &str) -> io::Result<Self::Listener> {
        self.server.listen(addr)
    }

    fn listener_addr(&self, listener: &Self::Listener) -> io::Result<SocketAddr> {
        listener.local_addr()
    }

    async fn connect_local(&self, addr: &str) -> io::Result<Self::Stream> {
        self.server.dial(addr).await
    }

    async fn resolve(&self, name: &str) -> io::Result<Vec<std::net::IpAddr>> {
        self.server.resolve(name)
    }
}
