//! Rebalances and the close, as librdkafka's consumer poll serves them: the group's events
//! (Assign, Revoke, Lost, errors) applied one at a time with the context's callbacks, each
//! answered with `RebalanceDone`; and `rd_kafka_consumer_close` (rdkafka runs it when the
//! consumer is dropped): the events already decided served, a group assignment revoked through
//! the callbacks, the stored offsets committed (auto-commit), then LeaveGroup.

use tokio::sync::oneshot;

use crate::rdkafka::consumer::context::BaseConsumer;
use crate::rdkafka::consumer::context::{ConsumerContext, Rebalance};
use crate::rdkafka::consumer::group::assignor::RebalanceProtocol;
use crate::rdkafka::consumer::group::{GroupCommand, GroupEvent};
use crate::rdkafka::consumer::inner::{Inner, lock, tpl_of_tps};
use crate::rdkafka::consumer::positions::{Queued, Tp};
use crate::rdkafka::error::{KafkaError, KafkaResult};
use crate::rdkafka::message::OwnedMessage;
use crate::rdkafka::topic_partition_list::Offset;

impl<C: ConsumerContext> Inner<C> {
    /// The next thing for the application: a message or an error, after applying the group
    /// events and commit callbacks due; `None` when nothing is there.
    pub(crate) fn poll_once(&self, base: &BaseConsumer<C>) -> Option<KafkaResult<OwnedMessage>> {
        loop {
            if let Some(error) = self.apply_event(base) {
                match error {
                    Some(e) => return Some(Err(e)),
                    None => continue,
                }
            }
            let (entry, wake) = self.lock().pop(self.s.auto_offset_store);
            if wake {
                self.wake_fetcher();
            }
            match entry? {
                Queued::Message { message, .. } => return Some(Ok(message)),
                Queued::Error { error, .. } => return Some(Err(error)),
                Queued::Commit(result, tpl) => self.context.commit_callback(result, &tpl),
            }
        }
    }

    /// Applies the oldest group event, if any: `Some(None)` applied, `Some(Some(e))` an error
    /// for the application.
    pub(crate) fn apply_event(&self, base: &BaseConsumer<C>) -> Option<Option<KafkaError>> {
        let _one_at_a_time = lock(&self.rebalancing);
        let event = lock(&self.events).pop_front()?;
        let group = self.group.as_ref().expect("events come from the group");
        match event {
            GroupEvent::Error(e) => return Some(Some(e)),
            GroupEvent::Assign { partitions, protocol } => {
                let tpl = tpl_of_tps(&partitions);
                self.context.pre_rebalance(base, &Rebalance::Assign(&tpl));
                {
                    let mut st = self.lock();
                    st.lost = false;
                    if protocol != RebalanceProtocol::Cooperative {
                        let gone: Vec<Tp> =
                            st.partitions.keys().filter(|tp| !partitions.contains(tp)).cloned().collect();
                        for tp in &gone {
                            st.remove(tp);
                        }
                    }
                    for tp in partitions {
                        if protocol != RebalanceProtocol::Cooperative || !st.partitions.contains_key(&tp) {
                            st.add(tp, Offset::Invalid);
                        }
                    }
                }
                self.wake_fetcher();
                self.context.post_rebalance(base, &Rebalance::Assign(&tpl));
            }
            GroupEvent::Revoke { partitions, protocol } => self.revoke(base, &partitions, protocol),
            GroupEvent::Lost { partitions } => {
                let tpl = tpl_of_tps(&partitions);
                self.lock().lost = true;
                self.context.pre_rebalance(base, &Rebalance::Revoke(&tpl));
                let mut st = self.lock();
                for tp in &partitions {
                    st.remove(tp);
                }
                // librdkafka clears the lost flag with the assignment (rd_kafka_assignment_clear),
                // between rdkafka's pre_rebalance and post_rebalance.
                st.lost = false;
                drop(st);
                group.clear_lost();
                self.context.post_rebalance(base, &Rebalance::Revoke(&tpl));
            }
        }
        group.send(GroupCommand::RebalanceDone);
        Some(None)
    }

    /// A revoke that can commit (not lost): pre_rebalance(Revoke), auto-commit of the revoked
    /// partitions' stored offsets, the assignment changed, post_rebalance(Revoke).
    fn revoke(&self, base: &BaseConsumer<C>, partitions: &[Tp], protocol: RebalanceProtocol) {
        let tpl = tpl_of_tps(partitions);
        self.context.pre_rebalance(base, &Rebalance::Revoke(&tpl));
        // Lost while this revoke waited for the application: nothing is committed for it.
        let lost = self.group.as_ref().is_some_and(|g| g.lost());
        if self.s.auto_commit && !lost {
            let offsets = self.lock().to_commit(Some(partitions));
            if !offsets.is_empty() {
                self.auto_commit_offsets(offsets);
            }
        }
        let mut st = self.lock();
        if protocol == RebalanceProtocol::Cooperative {
            for tp in partitions {
                st.remove(tp);
            }
        } else {
            // Eager: the whole assignment goes (librdkafka's assign(NULL)).
            st.partitions.clear();
        }
        drop(st);
        // The eager revoke cleared the whole assignment (a cooperative one leaves the rest,
        // whose Lost event, if any, follows).
        if let Some(group) = self.group.as_ref().filter(|_| protocol != RebalanceProtocol::Cooperative) {
            group.clear_lost();
        }
        self.context.post_rebalance(base, &Rebalance::Revoke(&tpl));
    }

    /// librdkafka's `rd_kafka_consumer_close` (rdkafka runs it when the consumer is dropped),
    /// up to the LeaveGroup: the group events already decided are served (as rdkafka's drop
    /// polls the close queue), a group assignment is revoked through the rebalance callbacks
    /// (committing the stored offsets with auto-commit), then [`Inner::send_close`]. Once only;
    /// `None` the second time or without `group.id` (rdkafka closes only a group consumer).
    pub(crate) fn close(&self, base: &BaseConsumer<C>) -> Option<oneshot::Receiver<()>> {
        let group = self.group.as_ref()?;
        if self.closed.swap(true, std::sync::atomic::Ordering::SeqCst) || !self.process_alive() {
            return None;
        }
        while self.apply_event(base).is_some() {}
        let (assigned, subscribed) = {
            let st = self.lock();
            (st.partitions.keys().cloned().collect::<Vec<Tp>>(), !st.subscription.is_empty())
        };
        if subscribed && !assigned.is_empty() {
            self.revoke(base, &assigned, group.rebalance_protocol());
        }
        self.send_close()
    }
}

impl<C> Inner<C> {
    /// False when the consumer is dropped because its simulation node crashed or ended (its
    /// tasks are being aborted): a killed process runs no close, no callbacks, no commits.
    pub(crate) fn process_alive(&self) -> bool {
        self.dialer.is_live()
    }

    /// The rest of the close: a commit of what is still stored (auto-commit; a manual
    /// assignment), then `Close` (LeaveGroup unless static, after the queued commits); the
    /// receiver resolves when the group task is done.
    pub(crate) fn send_close(&self) -> Option<oneshot::Receiver<()>> {
        let g = self.group.as_ref()?;
        if self.s.auto_commit {
            let offsets = lock(&self.state).to_commit(None);
            if !offsets.is_empty() {
                let (reply, _) = oneshot::channel();
                g.send(GroupCommand::Commit { offsets, reply });
            }
        }
        let (done, rx) = oneshot::channel();
        g.send(GroupCommand::Close(done));
        Some(rx)
    }
}
