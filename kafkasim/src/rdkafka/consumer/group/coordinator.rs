//! The group coordinator: found with FindCoordinator (key type 0, the group id) on a bootstrap
//! or known broker, then one connection to it that carries every group request, one at a time
//! (a Kafka broker answers a connection's requests in order anyway). A lookup or request that
//! fails — transport, timeout, `NOT_COORDINATOR` (16), `COORDINATOR_NOT_AVAILABLE` (15),
//! `COORDINATOR_LOAD_IN_PROGRESS` (14) — drops the connection, and the coordinator is looked up
//! again after `retry.backoff.ms`, as librdkafka's `rd_kafka_cgrp_coord_dead` does.

use std::time::Duration;

use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::Request;

use crate::client::Client;
use crate::rdkafka::error::RDKafkaErrorCode as Code;
use crate::rdkafka::net::{Dialer, Stream};
use crate::requests::string;

/// The FindCoordinator version sent: librdkafka 2.12 sends up to 2 (v3+ is flexible, v4+ batches
/// keys); kafkasim serves 0–4, Apache Kafka 4.x 0–6.
pub(crate) const FIND_COORDINATOR_VERSION: i16 = 2;

/// A connection speaking the protocol.
pub(crate) type Conn = Client<Stream>;

/// Whether a group error code means "ask for the coordinator again".
pub(crate) fn coordinator_error(code: i16) -> bool {
    matches!(code, 14..=16)
}

/// Looks up `group`'s coordinator through `addr`: its node id and `host:port`.
pub(crate) async fn find(
    dialer: &Dialer,
    addr: &str,
    client_id: &str,
    group: &str,
    timeout: Duration,
) -> Result<(i32, String), Code> {
    let request = FindCoordinatorRequest::default().with_key(string(group)).with_key_type(0);
    let (_, r) = exchange(None, dialer, addr, client_id, request, FIND_COORDINATOR_VERSION, timeout).await;
    let r = r?;
    if r.error_code != 0 {
        return Err(Code::from(r.error_code));
    }
    Ok((r.node_id.0, format!("{}:{}", r.host.as_str(), r.port)))
}

/// Sends `request` at `version` on `conn` (dialing `addr` when there is none) and waits up to
/// `timeout`; the connection comes back when it is still usable.
pub(crate) async fn exchange<R: Request>(
    conn: Option<Conn>,
    dialer: &Dialer,
    addr: &str,
    client_id: &str,
    request: R,
    version: i16,
    timeout: Duration,
) -> (Option<Conn>, Result<R::Response, Code>) {
    let attempt = async {
        let mut conn = match conn {
            Some(c) => c,
            None => Client::new(dialer.dial(addr).await.map_err(|_| Code::BrokerTransportFailure)?, client_id),
        };
        let r = conn.send(request, version).await.map_err(|_| Code::BrokerTransportFailure)?;
        Ok((conn, r))
    };
    match tokio::time::timeout(timeout.max(Duration::from_millis(1)), attempt).await {
        Ok(Ok((conn, r))) => (Some(conn), Ok(r)),
        Ok(Err(code)) => (None, Err(code)),
        Err(_) => (None, Err(Code::OperationTimedOut)),
    }
}
