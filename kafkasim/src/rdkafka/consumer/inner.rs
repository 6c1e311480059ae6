//! What a consumer's handles share ([`Inner`]), and small helpers over it and over lists of
//! partitions. Its methods live with the concern they serve: `commit`, `rebalance`, `lookups`,
//! `base_consumer`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;

use crate::rdkafka::consumer::fetcher::Signals;
use crate::rdkafka::consumer::group::{GroupEvent, GroupHandle};
use crate::rdkafka::consumer::positions::{State, Tp};
use crate::rdkafka::consumer::settings::ConsumerSettings;
use crate::rdkafka::net::Dialer;
use crate::rdkafka::topic_partition_list::TopicPartitionList;

/// What the handles share.
pub(crate) struct Inner<C> {
    pub(crate) s: Arc<ConsumerSettings>,
    pub(crate) context: Arc<C>,
    pub(crate) state: Arc<Mutex<State>>,
    pub(crate) signals: Arc<Signals>,
    pub(crate) group: Option<GroupHandle>,
    pub(crate) events: Arc<Mutex<VecDeque<GroupEvent>>>,
    /// Held while one group event's callbacks run, so events apply one at a time, in order.
    pub(crate) rebalancing: Mutex<()>,
    /// Set once the close started (see [`Inner::close`]).
    pub(crate) closed: std::sync::atomic::AtomicBool,
    pub(crate) dialer: Dialer,
    pub(crate) _alive: mpsc::UnboundedSender<()>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn tps(tpl: &TopicPartitionList) -> Vec<Tp> {
    tpl.elements().iter().map(|e| (e.topic().to_string(), e.partition())).collect()
}

pub(crate) fn tpl_of_tps(partitions: &[Tp]) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::with_capacity(partitions.len());
    for (t, p) in partitions {
        tpl.add_partition(t, *p);
    }
    tpl
}

impl<C> Inner<C> {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub(crate) fn wake_fetcher(&self) {
        self.signals.fetcher.notify_one();
    }
}

impl<C> Drop for Inner<C> {
    fn drop(&mut self) {
        // Not closed through the StreamConsumer's drop: commit what is stored and leave.
        if !self.closed.swap(true, std::sync::atomic::Ordering::SeqCst) && self.process_alive() {
            drop(self.send_close());
        }
    }
}
