//! The network's fabric: segments sent on a connection's pipes, scheduled along the link as
//! driver events (`net.deliver`), delivered into the receiving end (Linux loopback semantics),
//! and the closing, aborting and forgetting of ends and listeners. One driver event at a time
//! delivers a pipe's due segments; the next is scheduled from the queue's head. Faults are asked
//! of [`super::rules`]. Everything runs under the network's mutex; nothing starts a task.

use std::sync::Arc;
use std::time::Duration;

use super::kernel::*;
use super::rules;
use super::state::{Core, State};
use crate::driver::Event;

/// Schedules the delivery of pipe `from` of `conn` if its head is due and nothing is scheduled.
pub(crate) fn schedule_pipe(core: &Arc<Core>, st: &mut State, conn: ConnId, from: usize) {
    let Some(c) = st.conns.get(&conn) else { return };
    let Some(head_due) = c.pipes[from].queue.front().map(|s| s.due) else {
        return;
    };
    if let Some((_, due)) = c.pipes[from].scheduled
        && due <= head_due
    {
        return;
    }
    if c.silent {
        return;
    }
    // With no rule and no silent host nothing else can hold the pipe.
    if !st.rules.is_empty() || st.silent_hosts > 0 {
        if rules::held(&st.view(), conn, from) {
            return;
        }
        let head_is_data = matches!(c.pipes[from].queue.front().map(|s| &s.kind), Some(SegKind::Data(_)));
        if head_is_data && rules::hold_allowance(&st.view(), conn, from) == Some(0) {
            return; // held after its byte allowance: rescheduled when a rule changes
        }
    }
    let label = Arc::clone(&c.labels[from]);
    let core2 = Arc::clone(core);
    let event = Event::new("net.deliver", label).unrecorded().action(move || deliver(&core2, conn, from));
    let id = core.driver.at(head_due, event);
    if let Some(c) = st.conns.get_mut(&conn)
        && let Some((old, _)) = c.pipes[from].scheduled.replace((id, head_due))
    {
        core.driver.cancel(old);
    }
}

/// Queues a segment on a pipe with the link's latency and jitter, preserving order.
pub(crate) fn send_segment(core: &Arc<Core>, st: &mut State, conn: ConnId, from: usize, kind: SegKind) {
    let now = core.now();
    let Some(link) = st.conns.get(&conn).map(|c| c.links[from]) else { return };
    let jitter = if link.jitter.is_zero() { Duration::ZERO } else { st.draws.duration(Duration::ZERO..=link.jitter) };
    let Some(c) = st.conns.get_mut(&conn) else {
        return;
    };
    let pipe = &mut c.pipes[from];
    let due = (now + link.latency + jitter).max(pipe.last_due);
    pipe.last_due = due;
    if let SegKind::Data(b) = &kind {
        pipe.queued_bytes += b.len();
        pipe.sent_bytes += b.len() as u64;
    }
    pipe.push(Seg { due, kind });
    schedule_pipe(core, st, conn, from);
}

/// The delivery event of a pipe: hands every due segment to the receiving end.
pub(crate) fn deliver(core: &Arc<Core>, conn: ConnId, from: usize) {
    let now = core.now();
    let mut st = core.lock();
    let st = &mut *st;
    if let Some(c) = st.conns.get_mut(&conn) {
        c.pipes[from].scheduled = None;
    }
    let to = 1 - from;
    let mut described = std::mem::take(&mut st.deliver_note);
    described.clear();
    let mut reply_rst = false;
    let mut acked = false;
    // No rule and no silent host: only the connection's own silence can hold its segments.
    let unruled = st.rules.is_empty() && st.silent_hosts == 0;
    loop {
        let (held, allowance) = if unruled {
            (st.conns.get(&conn).is_some_and(|c| c.silent), None)
        } else {
            (rules::held(&st.view(), conn, from), rules::hold_allowance(&st.view(), conn, from))
        };
        if held {
            break;
        }
        let Some(c) = st.conns.get_mut(&conn) else {
            return;
        };
        let Some(seg) = c.pipes[from].queue.front_mut() else {
            break;
        };
        if seg.due > now {
            break;
        }
        if let (Some(allow), SegKind::Data(bytes)) = (allowance, &mut seg.kind) {
            if allow == 0 {
                break;
            }
            if (allow as usize) < bytes.len() {
                // Deliver only what the hold-after-bytes control lets through.
                let head = bytes.split_to(allow as usize);
                c.pipes[from].delivered(head.len());
                note(&mut described, Some(head.len()), " bytes (held after)");
                receive(c, from, SegKind::Data(head), &mut reply_rst);
                break;
            }
        }
        let seg = c.pipes[from].queue.pop_front().expect("the head was just seen");
        if let SegKind::Data(b) = &seg.kind {
            c.pipes[from].delivered(b.len());
        }
        match &seg.kind {
            SegKind::Data(b) => note(&mut described, Some(b.len()), " bytes"),
            SegKind::Fin => note(&mut described, None, "FIN"),
            SegKind::Rst => note(&mut described, None, "RST"),
            SegKind::Ack => note(&mut described, None, "ACK"),
        }
        if matches!(seg.kind, SegKind::Ack) {
            acked = true;
            continue;
        }
        receive(c, from, seg.kind, &mut reply_rst);
    }
    if acked {
        established(st, conn, &mut reply_rst);
    }
    if !described.is_empty()
        && let Some(c) = st.conns.get(&conn)
    {
        core.record("net.deliver", c.label(from), &described);
    }
    st.deliver_note = described;
    if reply_rst {
        // Data reached an end that is closed: it answers with RST (Linux tcp_rcv_state_process).
        if let Some(c) = st.conns.get_mut(&conn) {
            c.ends[to].reset = true;
        }
        send_segment(core, st, conn, to, SegKind::Rst);
    }
    schedule_pipe(core, st, conn, from);
    maybe_forget(st, conn);
}

/// Appends one delivered segment to a delivery's history detail: `[count]text`, comma-separated
/// (`64 bytes`, `ACK, 224 bytes`), without the formatting machinery (it runs for every segment).
fn note(described: &mut String, count: Option<usize>, text: &str) {
    if !described.is_empty() {
        described.push_str(", ");
    }
    if let Some(mut n) = count {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        described.push_str(std::str::from_utf8(&digits[at..]).expect("ASCII digits"));
    }
    described.push_str(text);
}

/// The handshake's ACK reached the server: the connection joins its listener's accept queue, or,
/// when the listener is gone, the server's stack answers with RST.
fn established(st: &mut State, conn: ConnId, reply_rst: &mut bool) {
    let Some(lid) = st.conns.get(&conn).and_then(|c| c.listener) else { return };
    match st.listeners.get_mut(&lid) {
        Some(l) => {
            l.handshaking.remove(&conn);
            l.queue.push_back(conn);
            if let Some(w) = l.waker.take() {
                w.wake();
            }
        }
        None => {
            if let Some(c) = st.conns.get_mut(&conn)
                && !c.ends[1].closed
            {
                c.ends[1].closed = true;
                *reply_rst = true;
            }
        }
    }
}

/// One segment arrives at end `1 - from`.
fn receive(c: &mut Conn, from: usize, kind: SegKind, reply_rst: &mut bool) {
    let to = 1 - from;
    match kind {
        SegKind::Data(bytes) => {
            if c.ends[to].closed || c.ends[to].reset {
                *reply_rst |= !c.ends[to].reset;
                // The data is gone with the closed socket; the writer's bound frees up.
                c.ends[from].wake();
                return;
            }
            if c.ends[to].read_shut && c.ends[to].wrote_fin {
                // New data at a socket that shut reading after sending its FIN (FIN_WAIT1/2 with
                // RCV_SHUTDOWN): RFC 1122 says it MUST reset, and Linux does
                // (tcp_rcv_state_process, LINUX_MIB_TCPABORTONDATA): the socket itself is reset
                // (ECONNRESET once, to read, write or take_error; what it had queued stays
                // readable) and it answers with RST. Measured: the peer's next write fails
                // EPIPE (its RST comes after our FIN: CLOSE_WAIT) and its reads give EOF.
                let end = &mut c.ends[to];
                end.reset = true;
                end.reset_by_data = true;
                end.pending_error = Some(errno::ECONNRESET);
                *reply_rst = true;
                c.ends[to].wake();
                c.ends[from].wake();
                return;
            }
            c.pipes[from].recv_bytes += bytes.len();
            c.pipes[from].recv.push_back(bytes);
            c.ends[to].wake();
        }
        SegKind::Fin => {
            if c.ends[to].reset_by_data {
                return; // the socket is gone: a FIN after the data that reset it is not seen
            }
            c.pipes[from].fin_delivered = true;
            c.ends[to].wake();
        }
        SegKind::Ack => {}
        SegKind::Rst => {
            let end = &mut c.ends[to];
            if end.reset {
                return;
            }
            end.reset = true;
            // Linux tcp_reset: ECONNRESET, but EPIPE in CLOSE_WAIT (after the peer's FIN). Reads
            // after a FIN give EOF before they look at the error (SOCK_DONE); writes and
            // take_error report it (measured on Linux, point 8).
            if !end.closed {
                end.pending_error = Some(if c.pipes[from].fin_delivered { errno::EPIPE } else { errno::ECONNRESET });
            }
            // What this end had sent and not yet delivered, or not yet read by the peer, dies
            // with the connection: its send bound is free again. (A peer reset by data it would
            // not read still reads what it had queued: it is open and its queue is its own.)
            let pipe = &mut c.pipes[to];
            pipe.queue.clear();
            pipe.queued_bytes = 0;
            if !c.ends[from].reset_by_data {
                pipe.recv.clear();
                pipe.recv_bytes = 0;
            }
            c.ends[to].wake();
            c.ends[from].wake();
        }
    }
}

/// Resets both ends of a connection at once (a middlebox or a fault), as if each received RST.
pub(crate) fn reset_both(core: &Arc<Core>, st: &mut State, conn: ConnId) {
    let Some(c) = st.conns.get_mut(&conn) else {
        return;
    };
    for to in 0..2 {
        let mut ignored = false;
        receive(c, 1 - to, SegKind::Rst, &mut ignored);
    }
    for from in 0..2 {
        if let Some((id, _)) = c.pipes[from].scheduled.take() {
            core.driver.cancel(id);
        }
    }
}

/// The user dropped the last handle of end `i`.
pub(crate) fn close_end(core: &Arc<Core>, st: &mut State, conn: ConnId, i: usize) {
    note_unanswered(st, conn, i);
    let Some(c) = st.conns.get_mut(&conn) else {
        return;
    };
    if c.ends[i].closed {
        return;
    }
    let unread = c.pipes[1 - i].recv_bytes > 0;
    let (linger0, wrote_fin, reset) = (c.ends[i].linger_zero, c.ends[i].wrote_fin, c.ends[i].reset);
    if reset {
        c.ends[i].closed = true;
        maybe_forget(st, conn);
        return;
    }
    if unread || linger0 {
        // Linux tcp_close: unread data (or SO_LINGER 0) aborts the connection with RST.
        abort_end(core, st, conn, i);
        return;
    }
    c.ends[i].closed = true;
    if !wrote_fin {
        c.ends[i].wrote_fin = true;
        send_segment(core, st, conn, i, SegKind::Fin);
    }
    maybe_forget(st, conn);
}

/// Aborts end `i` (close with unread data or linger 0, or its process was killed): the end is
/// closed, what it had not read is discarded — but its peer's send bound stays taken until the
/// RST reaches the peer (an aborting socket sends no window update) — and bytes of its own that a
/// control was holding back are discarded (unacknowledged, so never sent); bytes already on their
/// way still arrive ahead of the RST.
pub(crate) fn abort_end(core: &Arc<Core>, st: &mut State, conn: ConnId, i: usize) {
    let held = rules::held(&st.view(), conn, i) || rules::hold_allowance(&st.view(), conn, i) == Some(0);
    note_unanswered(st, conn, i);
    let Some(c) = st.conns.get_mut(&conn) else { return };
    c.ends[i].closed = true;
    if c.ends[i].reset {
        maybe_forget(st, conn);
        return;
    }
    c.ends[i].reset = true;
    c.pipes[1 - i].recv.clear();
    if held {
        let pipe = &mut c.pipes[i];
        pipe.queue.retain(|seg| !matches!(seg.kind, SegKind::Data(_)));
        pipe.queued_bytes = 0;
    }
    send_segment(core, st, conn, i, SegKind::Rst);
    maybe_forget(st, conn);
}

/// Removes a listener; with `reset`, its queued connections are reset (Linux
/// inet_csk_listen_stop), otherwise they are left to go silent with their host. Half-open
/// connections (SYN_RECV) are discarded either way, but keep the id of the listener they were
/// made to: when the dialer's ACK arrives, [`established`] finds that listener gone and the
/// server's stack answers with RST (Linux tcp_v4_rcv drops a request sock whose listener left
/// TCP_LISTEN and, finding no other socket, sends a reset), unless the server's end is closed
/// already (its incarnation vanished: nothing answers).
pub(crate) fn drop_listener(core: &Arc<Core>, st: &mut State, id: ListenerId, reset: bool) {
    let Some(l) = st.listeners.remove(&id) else { return };
    st.listening.retain(|_, lid| *lid != id);
    if let Some(w) = l.waker {
        w.wake();
    }
    for conn in l.queue {
        if let Some(c) = st.conns.get_mut(&conn) {
            c.ends[1].closed = true;
            c.listener = None;
            if !reset {
                c.silent = true;
                continue;
            }
            c.ends[1].reset = true;
        }
        if reset {
            send_segment(core, st, conn, 1, SegKind::Rst);
        }
        maybe_forget(st, conn);
    }
}

/// Forgets a connection once both ends are closed and nothing is in flight.
/// The server end (`i == 1`) of `conn` is closing (or aborting): if its incarnation is draining
/// and a request it read is unanswered while its client is still there, notes it for the drain
/// oracle, once (the exchange is not followed further).
fn note_unanswered(st: &mut State, conn: ConnId, i: usize) {
    if i != 1 || st.draining.is_empty() {
        return;
    }
    let Some(c) = st.conns.get_mut(&conn) else { return };
    let client_gone = c.ends[0].closed || c.ends[0].reset || c.pipes[0].fin_delivered;
    if c.ends[1].closed || c.ends[1].reset || client_gone {
        return;
    }
    let Some(what) = c.exchange.in_flight() else { return };
    c.exchange = super::exchange::Exchange::Opaque;
    let note = format!("conn#{conn} from {} ({}): {what}", c.hosts[0], c.addrs[0]);
    if let Some(notes) = st.draining.get_mut(&(c.hosts[1].clone(), c.incarnations[1])) {
        notes.push(note);
    }
}

pub(crate) fn maybe_forget(st: &mut State, conn: ConnId) {
    let done = st.conns.get(&conn).is_some_and(|c| {
        c.ends.iter().all(|e| e.closed) && c.pipes.iter().all(|p| p.queue.is_empty() && p.scheduled.is_none())
    });
    if !done {
        return;
    }
    let queued = st.listeners.values().any(|l| l.queue.contains(&conn));
    let dialing = st.dials.values().any(|d| d.conn == conn && matches!(d.state, DialState::Pending { .. }));
    if !queued && !dialing {
        st.remove_conn(conn);
    }
}
