//! Commits (librdkafka's `rd_kafka_commit`): offsets go to the group task as a
//! `GroupCommand::Commit` when the commit is made. A `CommitMode::Sync` commit returns its
//! result to the caller and runs no commit callback (librdkafka answers it on a temporary queue,
//! not as an OFFSET_COMMIT event). Auto-commits (the interval, a revoke, the close) and
//! `CommitMode::Async` commits queue their answer for `recv()`, which runs the commit callback —
//! a listed difference for the Async ones: rdkafka 0.39 reports nothing for them (it commits
//! without a reply queue, rust-rdkafka #856; PR #857 reports them as here). Without a group a
//! commit fails `ConsumerCommit(UnknownGroup)`; with nothing to commit `ConsumerCommit(NoOffset)`.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::rdkafka::consumer::api::CommitMode;
use crate::rdkafka::consumer::context::ConsumerContext;
use crate::rdkafka::consumer::group::{CommitReply, GroupCommand};
use crate::rdkafka::consumer::inner::{Inner, lock};
use crate::rdkafka::consumer::positions::{Queued, State, Tp};
use crate::rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode as Code};
use crate::rdkafka::topic_partition_list::{Offset, TopicPartitionList};

/// Offsets to commit: partition, next offset to read, metadata.
pub(crate) type Offsets = Vec<(Tp, i64, Option<String>)>;

pub(crate) fn tpl_of(offsets: &Offsets) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::with_capacity(offsets.len());
    for ((t, p), o, m) in offsets {
        let mut e = tpl.add_partition(t, *p);
        let _ = e.set_offset(Offset::Offset(*o));
        if let Some(m) = m {
            e.set_metadata(m);
        }
    }
    tpl
}

/// Waits for a commit's answer; notes what was committed; the result and the list (each
/// element with its partition's error).
async fn finish_commit(
    state: Arc<Mutex<State>>,
    offsets: Offsets,
    rx: oneshot::Receiver<CommitReply>,
) -> (KafkaResult<()>, TopicPartitionList) {
    let tpl = tpl_of(&offsets);
    let reply = rx.await.unwrap_or(Err(KafkaError::ConsumerCommit(Code::BrokerDestroy)));
    match reply {
        Err(e) => {
            let code = e.rdkafka_error_code().unwrap_or(Code::Fail);
            for ((t, p), _, _) in &offsets {
                tpl.set_error(t, *p, code);
            }
            (Err(e), tpl)
        }
        Ok(results) => {
            let mut first = Ok(());
            let mut st = lock(&state);
            for (tp, r) in results {
                match r {
                    Ok(()) => {
                        if let Some((_, o, _)) = offsets.iter().find(|(t, _, _)| *t == tp) {
                            st.committed(&tp, *o);
                        }
                    }
                    Err(e) => {
                        let code = e.rdkafka_error_code().unwrap_or(Code::Fail);
                        tpl.set_error(&tp.0, tp.1, code);
                        if first.is_ok() {
                            first = Err(KafkaError::ConsumerCommit(code));
                        }
                    }
                }
            }
            (first, tpl)
        }
    }
}

impl<C: ConsumerContext> Inner<C> {
    /// Queues the application's commit of `offsets`; the future of its result (see
    /// [`Consumer::commit`]). The commit callback runs for an Async one only.
    pub(crate) fn commit_offsets(
        &self,
        offsets: Offsets,
        mode: CommitMode,
    ) -> impl Future<Output = KafkaResult<()>> + Send + 'static {
        self.send_commit(offsets, mode, mode == CommitMode::Async)
    }

    /// Queues an auto-commit of `offsets` (the interval, a revoke, the close): its answer goes
    /// to the commit callback from `recv()`.
    pub(crate) fn auto_commit_offsets(&self, offsets: Offsets) {
        drop(self.send_commit(offsets, CommitMode::Async, true));
    }

    fn send_commit(
        &self,
        offsets: Offsets,
        mode: CommitMode,
        callback: bool,
    ) -> impl Future<Output = KafkaResult<()>> + Send + 'static {
        let (state, signals) = (Arc::clone(&self.state), Arc::clone(&self.signals));
        let mut early: Option<KafkaResult<()>> = None;
        let mut pending = None;
        match &self.group {
            None => early = Some(Err(KafkaError::ConsumerCommit(Code::UnknownGroup))),
            Some(_) if offsets.is_empty() => {
                let error = KafkaError::ConsumerCommit(Code::NoOffset);
                if mode == CommitMode::Async {
                    if callback {
                        self.lock().queue.push_back(Queued::Commit(Err(error), TopicPartitionList::new()));
                        self.signals.data.notify_waiters();
                    }
                    early = Some(Ok(()));
                } else {
                    early = Some(Err(error));
                }
            }
            Some(g) => {
                let (reply, rx) = oneshot::channel();
                g.send(GroupCommand::Commit { offsets: offsets.clone(), reply });
                if mode == CommitMode::Async {
                    let (state, signals, offsets) = (Arc::clone(&state), Arc::clone(&signals), offsets.clone());
                    crate::rdkafka::task::spawn_task(async move {
                        let (result, tpl) = finish_commit(Arc::clone(&state), offsets, rx).await;
                        if callback {
                            lock(&state).queue.push_back(Queued::Commit(result, tpl));
                            signals.data.notify_waiters();
                        }
                    });
                    early = Some(Ok(()));
                } else {
                    pending = Some(rx);
                }
            }
        }
        async move {
            if let Some(r) = early {
                return r;
            }
            let rx = pending.expect("a sync commit was sent");
            let (result, _) = finish_commit(state, offsets, rx).await;
            result
        }
    }
}
