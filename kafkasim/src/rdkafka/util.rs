//! Small shared types, as rdkafka's `util`: [`Timeout`].

use std::time::Duration;

/// How long an operation may wait: rdkafka's `Timeout`. `From<Duration>`, and
/// `From<Option<Duration>>` (`None` is [`Timeout::Never`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Timeout {
    /// At most this long.
    After(Duration),
    /// Without a limit.
    Never,
}

impl Timeout {
    /// The duration, `None` for [`Timeout::Never`].
    pub fn as_duration(self) -> Option<Duration> {
        match self {
            Timeout::After(d) => Some(d),
            Timeout::Never => None,
        }
    }
}

impl From<Duration> for Timeout {
    fn from(d: Duration) -> Timeout {
        Timeout::After(d)
    }
}

impl From<Option<Duration>> for Timeout {
    fn from(d: Option<Duration>) -> Timeout {
        d.map_or(Timeout::Never, Timeout::After)
    }
}

/// Milliseconds since the Unix epoch by the run's wall clock (its seeded epoch plus fake time
/// elapsed) inside a simulation, by the system's outside: the create time of a record sent
/// without a timestamp.
pub fn now_millis() -> i64 {
    let now = match sim::Ctx::try_current() {
        Some(ctx) => ctx.epoch() + ctx.elapsed(),
        None => std::time::SystemTime::now(),
    };
    now.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
