//! What every scenario uses, written once and expanded once per client: [`real`] through
//! rdkafka (`use rdkafka as kafka;`), [`sim`] through kafkasim::rdkafka
//! (`use kafkasim::rdkafka as kafka;`). The scenario modules expand the same way (see
//! `per_client!` in `main.rs`) and import their client's kit.
//!
//! The clients' APIs differ where rdkafka blocks: `commit` (sync), `commit_consumer_state`,
//! `committed`, `committed_offsets`, `fetch_watermarks`, `offsets_for_times` are `async` in
//! kafkasim::rdkafka. Scenarios write such calls as `blocking!(call)`: in place for rdkafka (its
//! own threads do the work; each side has its own runtime thread), `.await`ed for ours.
//! Closing is `close(consumer).await`: rdkafka closes in `Drop` (leaving the group, serving the
//! revoke callbacks, committing when auto-commit is on); ours in `close().await`.

/// `blocking!(expr)` for rdkafka: the call blocks in place.
macro_rules! in_place {
    ($e:expr) => {
        $e
    };
}
pub(crate) use in_place;

/// `blocking!(expr)` for kafkasim::rdkafka: the call is `async`.
macro_rules! awaited {
    ($e:expr) => {
        $e.await
    };
}
pub(crate) use awaited;

/// Expands the kit's items once per client, with what differs between them first.
macro_rules! kit {
    (real { $($real:tt)* } sim { $($sim:tt)* } common { $($body:tt)* }) => {
        /// The kit through rdkafka (librdkafka).
        pub mod real {
            #[allow(unused_imports)]
            use rdkafka as kafka;
            #[allow(unused_imports)]
            use crate::kit::in_place as blocking;
            $($real)*
            $($body)*
        }
        /// The kit through kafkasim::rdkafka.
        pub mod sim {
            #[allow(unused_imports)]
            use kafkasim::rdkafka as kafka;
            #[allow(unused_imports)]
            use crate::kit::awaited as blocking;
            $($sim)*
            $($body)*
        }
    };
}

kit! {
real {
    /// Closes `consumer`: rdkafka closes in `Drop` (leaves the group, serves the revoke
    /// callbacks, commits when auto-commit is on), then destroys the handle. After some
    /// commits, librdkafka 2.12's destroy waits forever for a broker thread (seen with
    /// `commit_consumer_state`; the close itself has completed), so the drop runs on a thread
    /// of its own, waited for up to 10 s.
    pub async fn close<C: ConsumerContext + 'static>(consumer: StreamConsumer<C>) {
        let dropping = std::thread::spawn(move || drop(consumer));
        for _ in 0..100 {
            if dropping.is_finished() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}
sim {
    /// Closes `consumer`: ours closes in `Drop` in the background, or awaitably with
    /// `close()` (revoke callbacks, the final auto-commit, LeaveGroup), which is what rdkafka's
    /// blocking `Drop` does.
    pub async fn close<C: ConsumerContext + 'static>(consumer: StreamConsumer<C>) {
        consumer.close().await;
    }
}
common {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    pub use fidelity::runner::Ctx;
    pub use kafka::client::ClientContext;
    pub use kafka::config::ClientConfig;
    pub use kafka::consumer::{
        BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, RebalanceProtocol, StreamConsumer,
    };
    pub use kafka::error::{KafkaError, KafkaResult};
    pub use kafka::message::{Header, Headers, Message, OwnedHeaders};
    pub use kafka::producer::{FutureProducer, FutureRecord};
    pub use kafka::{Offset, TopicPartitionList};

    pub use crate::support::{R, connect, create_ready_topic};

    /// How long a client may take to deliver, read or rebalance before the scenario gives up.
    pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

    pub fn err(e: impl std::fmt::Debug) -> String {
        format!("{e:?}")
    }

    /// An error as users match on it: the variant and its code (`ConsumerCommit(NoOffset)`).
    pub fn render_err(e: &KafkaError) -> String {
        format!("{e:?}")
    }

    pub fn render_protocol(p: RebalanceProtocol) -> &'static str {
        match p {
            RebalanceProtocol::None => "None",
            RebalanceProtocol::Eager => "Eager",
            RebalanceProtocol::Cooperative => "Cooperative",
        }
    }

    /// `ok` or the error.
    pub fn render_result<T>(r: &KafkaResult<T>) -> String {
        match r {
            Ok(_) => "ok".into(),
            Err(e) => render_err(e),
        }
    }

    pub fn config(ctx: &Ctx) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &ctx.address).set("log_level", "3");
        c
    }

    pub fn consumer_config(ctx: &Ctx, group: &str, reset: &str) -> ClientConfig {
        let mut c = config(ctx);
        c.set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", reset)
            .set("session.timeout.ms", "6000")
            .set("heartbeat.interval.ms", "500")
            .set("fetch.wait.max.ms", "100");
        c
    }

    /// A topic named after `base`, created through the raw protocol and ready to produce to.
    pub async fn created(ctx: &Ctx, base: &str, partitions: i32) -> R<String> {
        let t = ctx.name(base);
        let mut c = connect(ctx, "setup").await?;
        create_ready_topic(&mut c, &t, partitions).await?;
        Ok(t)
    }

    pub fn values(range: std::ops::Range<i32>) -> Vec<String> {
        range.map(|i| format!("v{i}")).collect()
    }

    pub fn producer(ctx: &Ctx, settings: &[(&str, &str)]) -> R<FutureProducer> {
        let mut c = config(ctx);
        for (k, v) in settings {
            c.set(*k, *v);
        }
        c.create().map_err(err)
    }

    /// Sends `values` to `partition` and returns each delivery as `partition:offset` (or the error).
    pub async fn deliver_to(
        producer: &FutureProducer,
        topic: &str,
        partition: i32,
        values: &[String],
        timestamp: Option<i64>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        for v in values {
            let mut record = FutureRecord::to(topic).partition(partition).key(v.as_str()).payload(v.as_str());
            if let Some(ts) = timestamp {
                record = record.timestamp(ts);
            }
            out.push(match producer.send(record, Duration::from_secs(30)).await {
                Ok(d) => format!("{}:{}", d.partition, d.offset),
                Err((e, _)) => format!("error {}", render_err(&e)),
            });
        }
        out
    }

    /// [`deliver_to`] partition 0.
    pub async fn deliver(
        producer: &FutureProducer,
        topic: &str,
        values: &[String],
        timestamp: Option<i64>,
    ) -> Vec<String> {
        deliver_to(producer, topic, 0, values, timestamp).await
    }

    /// A message as `offset:payload`.
    pub fn render_message<M: Message>(m: &M) -> String {
        format!("{}:{}", m.offset(), m.payload().map(|p| String::from_utf8_lossy(p).to_string()).unwrap_or_default())
    }

    /// Receives until `n` records arrived or `timeout` passed; each as `offset:payload` (errors as
    /// `error …`).
    pub async fn read<C: ConsumerContext + 'static>(
        consumer: &StreamConsumer<C>,
        n: usize,
        timeout: Duration,
    ) -> Vec<String> {
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        while out.len() < n {
            match tokio::time::timeout_at(deadline, consumer.recv()).await {
                Err(_) => break,
                Ok(Ok(m)) => out.push(render_message(&m)),
                Ok(Err(e)) => out.push(format!("error {}", render_err(&e))),
            }
        }
        out
    }

    /// A list of `(partition, offset)` of `topic`.
    pub fn tpl(topic: &str, entries: &[(i32, Offset)]) -> R<TopicPartitionList> {
        let mut tpl = TopicPartitionList::new();
        for (p, o) in entries {
            tpl.add_partition_offset(topic, *p, *o).map_err(err)?;
        }
        Ok(tpl)
    }

    /// A list's entries as `partition:offset`, by partition (one topic per list in this suite).
    pub fn render_tpl(tpl: &TopicPartitionList) -> String {
        let mut e: Vec<(i32, String)> =
            tpl.elements().iter().map(|e| (e.partition(), format!("{}:{:?}", e.partition(), e.offset()))).collect();
        e.sort();
        e.into_iter().map(|(_, s)| s).collect::<Vec<_>>().join(" ")
    }

    /// The partitions of a list, sorted.
    pub fn partitions(tpl: &TopicPartitionList) -> Vec<i32> {
        let mut ps: Vec<i32> = tpl.elements().iter().map(|e| e.partition()).collect();
        ps.sort();
        ps
    }

    /// What a consumer saw, in order.
    pub type Events = Arc<Mutex<Vec<String>>>;

    /// A consumer context recording rebalance callbacks (`pre assign [0, 1]`, `post revoke [2]
    /// lost`, …) and commit callbacks (`ok 0:Offset(3)`).
    #[derive(Clone, Default)]
    pub struct Observer {
        pub rebalances: Events,
        pub commits: Events,
        /// Leave out rounds that move nothing (cooperative rounds come and go with timing).
        pub skip_empty: bool,
    }

    impl Observer {
        fn record(&self, when: &str, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
            let (kind, list) = match rebalance {
                Rebalance::Assign(tpl) => ("assign", *tpl),
                Rebalance::Revoke(tpl) => ("revoke", *tpl),
                Rebalance::Error(e) => {
                    self.rebalances.lock().expect("events lock").push(format!("{when} error {}", render_err(e)));
                    return;
                }
            };
            if self.skip_empty && list.count() == 0 {
                return;
            }
            let lost = if kind == "revoke" && consumer.assignment_lost() { " lost" } else { "" };
            self.rebalances.lock().expect("events lock").push(format!("{when} {kind} {:?}{lost}", partitions(list)));
        }
    }

    impl ClientContext for Observer {}

    impl ConsumerContext for Observer {
        fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
            self.record("pre", consumer, rebalance);
        }

        fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
            self.record("post", consumer, rebalance);
        }

        fn commit_callback(&self, result: KafkaResult<()>, offsets: &TopicPartitionList) {
            self.commits.lock().expect("events lock").push(format!(
                "{} {}",
                render_result(&result),
                render_tpl(offsets)
            ));
        }
    }

    /// Rebalance callbacks with the number of partitions in place of each list (`pre assign 3`).
    pub fn with_counts(events: &[String]) -> String {
        events
            .iter()
            .map(|e| match (e.find('['), e.find(']')) {
                (Some(a), Some(b)) => {
                    let n = e[a + 1..b].split(',').filter(|p| !p.trim().is_empty()).count();
                    format!("{}{n}{}", &e[..a], &e[b + 1..])
                }
                _ => e.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// One group member: its consumer, what its context saw, and what it received.
    pub struct Member {
        pub consumer: StreamConsumer<Observer>,
        pub observer: Observer,
        /// `partition:offset:payload`, in arrival order.
        pub got: Vec<String>,
        /// Errors `recv` returned.
        pub errors: Vec<String>,
    }

    impl Member {
        /// A member created from `config`, subscribed to `topic`.
        pub fn subscribed(config: &ClientConfig, topic: &str, skip_empty: bool) -> R<Member> {
            let observer = Observer { skip_empty, ..Observer::default() };
            let consumer: StreamConsumer<Observer> = config.create_with_context(observer.clone()).map_err(err)?;
            consumer.subscribe(&[topic]).map_err(err)?;
            Ok(Member { consumer, observer, got: Vec::new(), errors: Vec::new() })
        }

        pub fn assigned(&self) -> Vec<i32> {
            self.consumer.assignment().map(|a| partitions(&a)).unwrap_or_default()
        }

        /// The rebalance callbacks so far, and forgets them.
        pub fn take_rebalances(&self) -> String {
            std::mem::take(&mut *self.observer.rebalances.lock().expect("events lock")).join(", ")
        }

        /// The rebalance callbacks so far, each with the number of partitions in place of the
        /// list (which member gets which partitions depends on member ids), and forgets them.
        pub fn take_rebalance_counts(&self) -> String {
            with_counts(&std::mem::take(&mut *self.observer.rebalances.lock().expect("events lock")))
        }

        /// What it received so far, sorted, and forgets it.
        pub fn take_got(&mut self) -> String {
            let mut got = std::mem::take(&mut self.got);
            got.sort();
            got.join(" ")
        }
    }

    /// Receives on every member at once for `window` (rebalances progress only while the
    /// application polls, in both clients).
    pub async fn pump(members: &mut [&mut Member], window: Duration) {
        let each = members.iter_mut().map(|m| async move {
            let _ = tokio::time::timeout(window, async {
                loop {
                    match m.consumer.recv().await {
                        Ok(msg) => m.got.push(format!("{}:{}", msg.partition(), render_message(&msg))),
                        Err(e) => m.errors.push(render_err(&e)),
                    }
                }
            })
            .await;
        });
        futures::future::join_all(each).await;
    }

    /// Pumps until `done` holds (checked every 100 ms), or fails after [`CLIENT_TIMEOUT`] with
    /// the members' assignments.
    pub async fn pump_until(members: &mut [&mut Member], what: &str, done: impl Fn(&[&mut Member]) -> bool) -> R {
        let deadline = tokio::time::Instant::now() + CLIENT_TIMEOUT;
        while !done(members) {
            if tokio::time::Instant::now() > deadline {
                let state: Vec<String> = members.iter().map(|m| format!("{:?}", m.assigned())).collect();
                return Err(format!("{what}: not within {CLIENT_TIMEOUT:?} (assignments {})", state.join(" ")));
            }
            pump(members, Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Pumps until the members' assignments have the sizes `sizes` (in any order) and cover
    /// `0..partitions` together, then for another second (a stable generation).
    pub async fn settle(members: &mut [&mut Member], partitions: i32, what: &str) -> R {
        let mut want: Vec<usize> = Vec::new();
        let n = members.len() as i32;
        for i in 0..n {
            want.push((partitions / n + i32::from(i < partitions % n)) as usize);
        }
        want.sort();
        let done = |ms: &[&mut Member]| {
            let mut sizes: Vec<usize> = ms.iter().map(|m| m.assigned().len()).collect();
            sizes.sort();
            let mut all: Vec<i32> = ms.iter().flat_map(|m| m.assigned()).collect();
            all.sort();
            sizes == want && all == (0..partitions).collect::<Vec<_>>()
        };
        pump_until(members, what, done).await?;
        pump(members, Duration::from_secs(1)).await;
        if !done(members) {
            return Err(format!("{what}: the assignment moved again"));
        }
        Ok(())
    }

    /// The members' assignments as a sorted set (`[0, 1] [2, 3]`): which member gets which
    /// partitions depends on member ids, the set does not.
    pub fn assignment_set(members: &[&mut Member]) -> String {
        let mut sets: Vec<Vec<i32>> = members.iter().map(|m| m.assigned()).collect();
        sets.sort();
        sets.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(" ")
    }
}
}
