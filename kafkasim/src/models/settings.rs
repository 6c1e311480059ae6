//! A consumer's settings, and the progress bound after a heal computed from them (Q9).
//!
//! After a fault heals (a broker back up, a network partition over), a classic-protocol
//! consumer group makes progress again after at most, in order:
//!
//! | part | setting | why |
//! |---|---|---|
//! | reconnect | `reconnect.backoff.max.ms` | the client's next connection attempt to the broker |
//! | coordinator lookup | `retry.backoff.max.ms` | the next FindCoordinator / metadata retry |
//! | session expiry | `session.timeout.ms` | a member that did not come back is expired before the group rebalances without it |
//! | notice | `heartbeat.interval.ms` | the other members learn of the rebalance at their next heartbeat |
//! | rejoin | `max.poll.interval.ms` | the rebalance timeout: the coordinator waits this long for every member to rejoin (KIP-62: the consumer sends `max.poll.interval.ms` as its rebalance timeout) |
//! | initial delay | `group.initial.rebalance.delay.ms` (broker) | an empty group's first rebalance waits this long (KIP-134) |
//! | fetch | `fetch.wait.max.ms` | the first fetch's long poll |
//! | processing | the application's | one record's processing |
//!
//! The bound is their sum ([`ProgressBound`]), each part named after its setting, like
//! [`sim::check::LivenessBound`] (the same type, to wait for progress
//! actively with [`sim::check::liveness`]). Real-time tests on loopback add a named slack part
//! for thread scheduling ([`ProgressBound::plus`]).
//!
//! Defaults are librdkafka 2.12's (`CONFIGURATION.md`) and Apache Kafka's broker default for the
//! initial rebalance delay (3 s).

use std::time::Duration;

/// A setting that does not read as milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("consumer setting {key} = {value:?} is not a number of milliseconds")]
pub struct SettingsError {
    /// The property name.
    pub key: String,
    /// Its value.
    pub value: String,
}

/// The settings a consumer group's progress after a heal depends on (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerSettings {
    /// `session.timeout.ms` (librdkafka default 45 s).
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms` (default 3 s).
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms`, also the rebalance timeout (KIP-62; default 300 s).
    pub max_poll_interval: Duration,
    /// `reconnect.backoff.max.ms` (default 10 s).
    pub reconnect_backoff_max: Duration,
    /// `retry.backoff.max.ms` (default 1 s).
    pub retry_backoff_max: Duration,
    /// `fetch.wait.max.ms` (default 500 ms).
    pub fetch_wait_max: Duration,
    /// `socket.connection.setup.timeout.ms` (default 30 s): a connect begun during the fault
    /// may wait for the kernel's next SYN retransmission (1 s, doubling) until librdkafka gives
    /// it up after this and reconnects.
    pub connection_setup_timeout: Duration,
    /// The broker's `group.initial.rebalance.delay.ms` (Kafka's default 3 s;
    /// `kafkasim::Broker::start_local` uses 0).
    pub initial_rebalance_delay: Duration,
    /// The application's longest processing of one record (default 0).
    pub processing_max: Duration,
}

impl Default for ConsumerSettings {
    fn default() -> Self {
        ConsumerSettings {
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(3),
            max_poll_interval: Duration::from_secs(300),
            reconnect_backoff_max: Duration::from_secs(10),
            retry_backoff_max: Duration::from_secs(1),
            fetch_wait_max: Duration::from_millis(500),
            connection_setup_timeout: Duration::from_secs(30),
            initial_rebalance_delay: Duration::from_secs(3),
            processing_max: Duration::ZERO,
        }
    }
}

impl ConsumerSettings {
    /// Reads the consumer properties (librdkafka / Java names, values in milliseconds) through
    /// `get` — for rdkafka, `|k| config.get(k).map(str::to_string)` on its `ClientConfig`;
    /// a property `get` does not know keeps its default.
    ///
    /// # Errors
    /// [`SettingsError`] when a property's value is not a whole number of milliseconds.
    pub fn from_properties(get: impl Fn(&str) -> Option<String>) -> Result<ConsumerSettings, SettingsError> {
        let mut s = ConsumerSettings::default();
        let fields: [(&str, &mut Duration); 7] = [
            ("session.timeout.ms", &mut s.session_timeout),
            ("socket.connection.setup.timeout.ms", &mut s.connection_setup_timeout),
            ("heartbeat.interval.ms", &mut s.heartbeat_interval),
            ("max.poll.interval.ms", &mut s.max_poll_interval),
            ("reconnect.backoff.max.ms", &mut s.reconnect_backoff_max),
            ("retry.backoff.max.ms", &mut s.retry_backoff_max),
            ("fetch.wait.max.ms", &mut s.fetch_wait_max),
        ];
        for (key, field) in fields {
            if let Some(value) = get(key) {
                let ms = value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| SettingsError { key: key.to_string(), value: value.clone() })?;
                *field = Duration::from_millis(ms);
            }
        }
        Ok(s)
    }

    /// Sets the broker's `group.initial.rebalance.delay.ms`.
    pub fn initial_rebalance_delay(mut self, delay: Duration) -> ConsumerSettings {
        self.initial_rebalance_delay = delay;
        self
    }

    /// Sets the application's longest processing of one record.
    pub fn processing_max(mut self, d: Duration) -> ConsumerSettings {
        self.processing_max = d;
        self
    }

    /// The progress bound after a heal (see the module docs).
    pub fn progress_bound(&self) -> ProgressBound {
        ProgressBound::new()
            .plus("socket.connection.setup.timeout.ms", self.connection_setup_timeout)
            .plus("reconnect.backoff.max.ms", self.reconnect_backoff_max)
            .plus("retry.backoff.max.ms", self.retry_backoff_max)
            .plus("session.timeout.ms", self.session_timeout)
            .plus("heartbeat.interval.ms", self.heartbeat_interval)
            .plus("max.poll.interval.ms (rebalance timeout)", self.max_poll_interval)
            .plus("group.initial.rebalance.delay.ms", self.initial_rebalance_delay)
            .plus("fetch.wait.max.ms", self.fetch_wait_max)
            .plus("processing", self.processing_max)
    }
}

/// A bound made of named parts (see the module docs): the harness's liveness bound, so that it can
/// be given to [`sim::check::liveness`] as it is.
pub type ProgressBound = sim::check::LivenessBound;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_set_their_parts_and_the_bound_names_each() {
        let props = [
            ("session.timeout.ms", "2000"),
            ("heartbeat.interval.ms", "200"),
            ("fetch.wait.max.ms", "100"),
            ("socket.connection.setup.timeout.ms", "5000"),
        ];
        let get = |k: &str| props.iter().find(|(p, _)| *p == k).map(|(_, v)| v.to_string());
        let s = ConsumerSettings::from_properties(get).expect("valid").initial_rebalance_delay(Duration::ZERO);
        assert_eq!(s.session_timeout, Duration::from_secs(2));
        assert_eq!(s.max_poll_interval, Duration::from_secs(300), "unset: librdkafka's default");
        let bound = s.progress_bound();
        assert_eq!(s.connection_setup_timeout, Duration::from_secs(5));
        assert_eq!(bound.total(), Duration::from_millis(5_000 + 10_000 + 1_000 + 2_000 + 200 + 300_000 + 100));
        assert!(bound.to_string().contains("session.timeout.ms 2s"), "{bound}");
        assert_eq!(bound.parts().len(), 9);
        let bad = ConsumerSettings::from_properties(|k| (k == "session.timeout.ms").then(|| "6s".to_string()));
        assert_eq!(bad, Err(SettingsError { key: "session.timeout.ms".into(), value: "6s".into() }));
    }
}
