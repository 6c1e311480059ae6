//! `TcpStream` and `TcpListener` on the simulated network, mirroring tokio's types.

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::fabric;
use super::kernel::{self, ConnId, ListenerId, SegKind, errno, os_error};
use super::network::Network;
use super::rules;
use crate::driver::Event;

/// One end of a connection, shared by a stream's halves; dropping the last closes the end.
struct EndHandle {
    net: Network,
    conn: ConnId,
    end: usize,
    local: SocketAddr,
    peer: SocketAddr,
}

/// What an operation on a socket of an ended incarnation returns: `ENETDOWN`, as every operation
/// through the ended incarnation's host handle does.
fn process_gone() -> io::Error {
    os_error(errno::ENETDOWN)
}

impl Drop for EndHandle {
    fn drop(&mut self) {
        let core = &self.net.core;
        let mut st = core.lock();
        fabric::close_end(core, &mut st, self.conn, self.end);
    }
}

impl EndHandle {
    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let core = &self.net.core;
        let now = core.now();
        let mut st = core.lock();
        let (max, every) = rules::read_limit(&st.view(), self.conn, self.end);
        let Some(c) = st.conns.get_mut(&self.conn) else {
            return Poll::Ready(Ok(()));
        };
        let (i, from) = (self.end, 1 - self.end);
        if c.ends[i].process_gone {
            return Poll::Ready(Err(process_gone()));
        }
        if c.pipes[from].recv_bytes > 0 {
            if buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            if let Some(until) = c.ends[i].throttle_until.filter(|u| *u > now) {
                c.ends[i].read_waker = Some(cx.waker().clone());
                let net = self.net.clone();
                let (conn, end) = (self.conn, self.end);
                drop(st);
                core.driver.at(
                    until,
                    Event::new("net.throttle", format!("conn#{conn}")).action(move || {
                        if let Some(c) = net.core.lock().conns.get_mut(&conn)
                            && let Some(w) = c.ends[end].read_waker.take()
                        {
                            w.wake();
                        }
                    }),
                );
                return Poll::Pending;
            }
            let mut want = buf.remaining().min(c.pipes[from].recv_bytes);
            if let Some(max) = max {
                want = want.min(max);
            }
            let filled = buf.filled().len();
            let mut copied = 0;
            while copied < want {
                let Some(front) = c.pipes[from].recv.front_mut() else {
                    break;
                };
                let take = front.len().min(want - copied);
                buf.put_slice(&front[..take]);
                if take == front.len() {
                    c.pipes[from].recv.pop_front();
                } else {
                    let _ = front.split_to(take);
                }
                copied += take;
            }
            c.pipes[from].recv_bytes -= copied;
            if i == 1 {
                c.exchange.inbound(&buf.filled()[filled..]);
            }
            if let Some(every) = every {
                c.ends[i].throttle_until = Some(now + every);
            }
            // Room in the send bound: the peer's blocked writer may go on once enough is free.
            let used = c.pipes[from].queued_bytes + c.pipes[from].recv_bytes;
            if (!c.ends[from].write_blocked || kernel::writable_again(used, c.send_bound[from]))
                && let Some(w) = c.ends[from].write_waker.take()
            {
                w.wake();
            }
            return Poll::Ready(Ok(()));
        }
        // After the peer's FIN, reads give EOF without consuming a pending error (Linux checks
        // SOCK_DONE first).
        if c.pipes[from].fin_delivered {
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = c.ends[i].pending_error.take() {
            return Poll::Ready(Err(os_error(e)));
        }
        if c.ends[i].reset || c.ends[i].read_shut {
            return Poll::Ready(Ok(()));
        }
        c.ends[i].read_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    fn poll_write(&self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let core = &self.net.core;
        let mut st = core.lock();
        let Some(c) = st.conns.get_mut(&self.conn) else {
            return Poll::Ready(Err(os_error(errno::EPIPE)));
        };
        let i = self.end;
        if c.ends[i].process_gone {
            return Poll::Ready(Err(process_gone()));
        }
        if let Some(e) = c.ends[i].pending_error.take() {
            return Poll::Ready(Err(os_error(e)));
        }
        if c.ends[i].reset || c.ends[i].wrote_fin {
            return Poll::Ready(Err(os_error(errno::EPIPE)));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let used = c.pipes[i].queued_bytes + c.pipes[i].recv_bytes;
        let bound = c.send_bound[i];
        if used >= bound || (c.ends[i].write_blocked && !kernel::writable_again(used, bound)) {
            c.ends[i].write_blocked = true;
            c.ends[i].write_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        c.ends[i].write_blocked = false;
        let mut n = data.len().min(bound - used);
        let mut cut = false;
        if let Some(budget) = c.ends[i].write_budget.as_mut() {
            n = n.min(*budget);
            *budget -= n;
            cut = *budget == 0;
        }
        if i == 1 {
            c.exchange.outbound(&data[..n]);
        }
        if n > 0 {
            fabric::send_segment(core, &mut st, self.conn, i, SegKind::Data(Bytes::copy_from_slice(&data[..n])));
        }
        if cut {
            // The partial-write fault: the stack aborts the connection after these bytes.
            if let Some(c) = st.conns.get_mut(&self.conn) {
                c.ends[i].write_budget = None;
                c.ends[i].reset = true;
                c.ends[i].pending_error = Some(errno::ECONNRESET);
            }
            fabric::send_segment(core, &mut st, self.conn, i, SegKind::Rst);
            if n == 0 {
                let e =
                    st.conns.get_mut(&self.conn).and_then(|c| c.ends[i].pending_error.take()).unwrap_or(errno::EPIPE);
                return Poll::Ready(Err(os_error(e)));
            }
        }
        Poll::Ready(Ok(n))
    }

    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        let core = &self.net.core;
        let mut st = core.lock();
        let Some(c) = st.conns.get_mut(&self.conn) else {
            return Err(os_error(errno::ENOTCONN));
        };
        let i = self.end;
        if c.finished(i) {
            return Err(os_error(errno::ENOTCONN));
        }
        if matches!(how, Shutdown::Read | Shutdown::Both) {
            c.ends[i].read_shut = true;
            if let Some(w) = c.ends[i].read_waker.take() {
                w.wake();
            }
        }
        if matches!(how, Shutdown::Write | Shutdown::Both) && !c.ends[i].wrote_fin {
            c.ends[i].wrote_fin = true;
            if let Some(w) = c.ends[i].write_waker.take() {
                w.wake();
            }
            fabric::send_segment(core, &mut st, self.conn, i, SegKind::Fin);
        }
        Ok(())
    }

    /// `AsyncWriteExt::shutdown`: `shutdown(Write)` as tokio does it, which maps `ENOTCONN` to
    /// `Ok(())` (tokio's `TcpStream::shutdown_std`): on a connection already over (reset by the
    /// peer, or both FINs exchanged) it succeeds, as user code on tokio sees it.
    fn poll_shutdown(&self) -> Poll<io::Result<()>> {
        let core = &self.net.core;
        let already =
            core.lock().conns.get(&self.conn).is_some_and(|c| c.ends[self.end].wrote_fin && !c.ends[self.end].reset);
        if already {
            return Poll::Ready(Ok(()));
        }
        match self.shutdown(Shutdown::Write) {
            Err(e) if e.raw_os_error() == Some(errno::ENOTCONN) => Poll::Ready(Ok(())),
            other => Poll::Ready(other),
        }
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        let st = self.net.core.lock();
        match st.conns.get(&self.conn) {
            Some(c) if !c.finished(self.end) => Ok(self.peer),
            _ => Err(os_error(errno::ENOTCONN)),
        }
    }

    fn take_error(&self) -> io::Result<Option<io::Error>> {
        let mut st = self.net.core.lock();
        Ok(st.conns.get_mut(&self.conn).and_then(|c| c.ends[self.end].pending_error.take()).map(os_error))
    }

    fn set_linger(&self, linger: Option<Duration>) {
        if let Some(c) = self.net.core.lock().conns.get_mut(&self.conn) {
            c.ends[self.end].linger_zero = linger == Some(Duration::ZERO);
        }
    }

    fn linger(&self) -> Option<Duration> {
        let st = self.net.core.lock();
        st.conns.get(&self.conn).and_then(|c| c.ends[self.end].linger_zero.then_some(Duration::ZERO))
    }
}

/// A TCP connection on the simulated network: tokio's `TcpStream`, on simulated sockets.
///
/// Reads and writes follow Linux loopback (see the [module docs](super)); errors carry Linux's
/// `errno`. Dropping it closes the socket (FIN, or RST if unread data remains or linger is 0).
pub struct TcpStream {
    handle: Arc<EndHandle>,
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("conn", &self.handle.conn)
            .field("local", &self.handle.local)
            .field("peer", &self.handle.peer)
            .finish()
    }
}

impl TcpStream {
    pub(crate) fn new(net: Network, conn: ConnId, end: usize) -> TcpStream {
        let (local, peer) = {
            let st = net.core.lock();
            let c = st.conns.get(&conn).expect("a stream is made for an existing connection");
            c.view(end)
        };
        TcpStream { handle: Arc::new(EndHandle { net, conn, end, local, peer }) }
    }

    /// The connection's id (stable within the run; what [`super::ConnSel::Id`] selects).
    pub fn id(&self) -> u64 {
        self.handle.conn
    }

    /// This end's address.
    ///
    /// # Errors
    /// Never (the `Result` mirrors tokio).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.handle.local)
    }

    /// The peer's address.
    ///
    /// # Errors
    /// `ENOTCONN` once the connection was reset.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.handle.peer_addr()
    }

    /// Takes the pending socket error (`SO_ERROR`): a reset not yet reported to a read or write.
    ///
    /// # Errors
    /// Never (the `Result` mirrors tokio).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.handle.take_error()
    }

    /// `SO_LINGER`: `Some(Duration::ZERO)` makes close send RST. Other values behave like `None`.
    ///
    /// # Errors
    /// Never (the `Result` mirrors tokio).
    pub fn set_linger(&self, linger: Option<Duration>) -> io::Result<()> {
        self.handle.set_linger(linger);
        Ok(())
    }

    /// The linger setting (`Some(ZERO)` only when set so).
    ///
    /// # Errors
    /// Never.
    pub fn linger(&self) -> io::Result<Option<Duration>> {
        Ok(self.handle.linger())
    }

    /// `TCP_NODELAY`: accepted and ignored (segments are not coalesced here).
    ///
    /// # Errors
    /// Never.
    pub fn set_nodelay(&self, _nodelay: bool) -> io::Result<()> {
        Ok(())
    }

    /// `shutdown(2)` with any `how` (tokio only offers the write side, via `AsyncWriteExt::shutdown`).
    ///
    /// # Errors
    /// `ENOTCONN` when the connection is over (reset, or both FINs exchanged).
    pub fn shutdown_socket(&self, how: Shutdown) -> io::Result<()> {
        self.handle.shutdown(how)
    }

    /// Splits into owned halves. Dropping the write half shuts the write side down (as tokio's).
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        (
            OwnedReadHalf { handle: Arc::clone(&self.handle) },
            OwnedWriteHalf { handle: self.handle, shutdown_on_drop: true },
        )
    }

    /// Splits into borrowed halves.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        (ReadHalf { handle: &self.handle }, WriteHalf { handle: &self.handle })
    }

    /// Waits until the stream is readable: data, EOF or an error is there.
    ///
    /// # Errors
    /// Never (the `Result` mirrors tokio).
    pub async fn readable(&self) -> io::Result<()> {
        poll_fn(|cx| {
            let mut st = self.handle.net.core.lock();
            let Some(c) = st.conns.get_mut(&self.handle.conn) else {
                return Poll::Ready(Ok(()));
            };
            let (i, from) = (self.handle.end, 1 - self.handle.end);
            let ready =
                c.pipes[from].recv_bytes > 0 || c.pipes[from].fin_delivered || c.ends[i].reset || c.ends[i].read_shut;
            if ready {
                Poll::Ready(Ok(()))
            } else {
                c.ends[i].read_waker = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.handle.poll_read(cx, buf)
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.handle.poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.handle.poll_shutdown()
    }
}

/// The owned read half of a [`TcpStream`].
#[derive(Debug)]
pub struct OwnedReadHalf {
    handle: Arc<EndHandle>,
}

/// The owned write half of a [`TcpStream`]; dropping it shuts the write side down.
#[derive(Debug)]
pub struct OwnedWriteHalf {
    handle: Arc<EndHandle>,
    shutdown_on_drop: bool,
}

impl fmt::Debug for EndHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn#{} end {}", self.conn, self.end)
    }
}

/// The halves given to [`OwnedReadHalf::reunite`] came from different streams.
#[derive(Debug)]
pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

impl fmt::Display for ReuniteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tried to reunite halves that are not from the same socket")
    }
}

impl std::error::Error for ReuniteError {}

impl OwnedReadHalf {
    /// Puts the halves back together.
    ///
    /// # Errors
    /// [`ReuniteError`] when they come from different streams.
    pub fn reunite(self, mut other: OwnedWriteHalf) -> Result<TcpStream, ReuniteError> {
        if Arc::ptr_eq(&self.handle, &other.handle) {
            other.shutdown_on_drop = false;
            Ok(TcpStream { handle: Arc::clone(&self.handle) })
        } else {
            Err(ReuniteError(self, other))
        }
    }

    /// The peer's address.
    ///
    /// # Errors
    /// As [`TcpStream::peer_addr`].
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.handle.peer_addr()
    }

    /// This end's address.
    ///
    /// # Errors
    /// Never.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.handle.local)
    }
}

impl OwnedWriteHalf {
    /// Drops the half without shutting the write side down.
    pub fn forget(mut self) {
        self.shutdown_on_drop = false;
    }

    /// The peer's address.
    ///
    /// # Errors
    /// As [`TcpStream::peer_addr`].
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.handle.peer_addr()
    }

    /// This end's address.
    ///
    /// # Errors
    /// Never.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.handle.local)
    }
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            let _ = self.handle.shutdown(Shutdown::Write);
        }
    }
}

impl AsyncRead for OwnedReadHalf {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.handle.poll_read(cx, buf)
    }
}

impl AsyncWrite for OwnedWriteHalf {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.handle.poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.handle.poll_shutdown()
    }
}

/// The borrowed read half of a [`TcpStream`].
#[derive(Debug)]
pub struct ReadHalf<'a> {
    handle: &'a EndHandle,
}

/// The borrowed write half of a [`TcpStream`].
#[derive(Debug)]
pub struct WriteHalf<'a> {
    handle: &'a EndHandle,
}

impl AsyncRead for ReadHalf<'_> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.handle.poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteHalf<'_> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.handle.poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.handle.poll_shutdown()
    }
}

/// A listening socket on the simulated network.
pub struct TcpListener {
    net: Network,
    id: ListenerId,
    addr: SocketAddr,
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener").field("addr", &self.addr).finish()
    }
}

impl TcpListener {
    pub(crate) fn new(net: Network, id: ListenerId, addr: SocketAddr) -> TcpListener {
        TcpListener { net, id, addr }
    }

    /// The address it listens on.
    ///
    /// # Errors
    /// Never (the `Result` mirrors tokio).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }

    /// Accepts the next connection from the accept queue (connections complete their handshake
    /// before `accept`; one reset while queued is still returned, and its reads fail).
    ///
    /// # Errors
    /// Never in practice (the `Result` mirrors tokio).
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for the next connection (see [`TcpListener::accept`]).
    ///
    /// # Errors
    /// As [`TcpListener::accept`].
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let mut guard = self.net.core.lock();
        let paused = rules::listener_paused(&guard.view(), self.addr);
        let st = &mut *guard;
        let conns = &st.conns;
        let Some(l) = st.listeners.get_mut(&self.id) else {
            // The network removed it: its incarnation ended. A dead process accepts nothing, and
            // a leftover task of it waits here for good rather than spinning on errors.
            return Poll::Pending;
        };
        if paused || l.queue.is_empty() {
            l.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let mut found = None;
        while let Some(conn) = l.queue.pop_front() {
            if conns.contains_key(&conn) {
                found = Some(conn);
                break;
            }
        }
        let Some(conn) = found else {
            if let Some(l) = st.listeners.get_mut(&self.id) {
                l.waker = Some(cx.waker().clone());
            }
            return Poll::Pending;
        };
        let peer = match st.conns.get_mut(&conn) {
            Some(c) => {
                c.ends[1].handles = 1;
                c.view(1).1
            }
            None => unreachable!("checked above"),
        };
        drop(guard);
        self.net.core.record("net.accept", &format!("conn#{conn}"), format!("{} <- {peer}", self.addr));
        Poll::Ready(Ok((TcpStream::new(self.net.clone(), conn, 1), peer)))
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        let core = &self.net.core;
        let mut st = core.lock();
        fabric::drop_listener(core, &mut st, self.id, true);
        drop(st);
        core.record("net.unlisten", &self.addr.to_string(), "");
    }
}
