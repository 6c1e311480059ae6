//! The keyset: the key transfers are signed with (the wallet asks for the current one, the ledger
//! looks keys up by id to verify). One key per run, its secret drawn from the seed.

use std::time::Duration;

use sim::node::{BoxError, NodeCtx};
use tonic::{Request, Response, Status};

use super::KEYSET_PORT;
use super::pb::keyset_server::{Keyset, KeysetServer};
use super::pb::{CurrentRequest, Key, LookupRequest};

struct KeysetService {
    key: Key,
}

#[tonic::async_trait]
impl Keyset for KeysetService {
    async fn current(&self, _request: Request<CurrentRequest>) -> Result<Response<Key>, Status> {
        Ok(Response::new(self.key.clone()))
    }

    async fn lookup(&self, request: Request<LookupRequest>) -> Result<Response<Key>, Status> {
        if request.into_inner().key_id == self.key.key_id {
            Ok(Response::new(self.key.clone()))
        } else {
            Err(Status::not_found("unknown key"))
        }
    }
}

/// The keyset node.
///
/// # Errors
/// When it cannot listen.
pub async fn main(node: NodeCtx) -> Result<(), BoxError> {
    let listener = node.host().listen(&KEYSET_PORT.to_string())?;
    let mut secret = vec![0u8; 32];
    node.sim().source("wallet/keyset/secret").fill(&mut secret);
    let key = Key { key_id: "k1".into(), secret };
    let server = grpcsim::Server::new(&node).drain_bound(Duration::from_secs(2));
    let router = server.builder().add_service(KeysetServer::new(KeysetService { key }));
    server.serve(listener, router).await
}
