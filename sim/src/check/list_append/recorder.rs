//! The [`Recorder`]: clients record operations into a [`History`] as they run them.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::analysis::check;
use super::codec::{
    KIND_DELIVER, KIND_FAIL, KIND_FINAL, KIND_INFO, KIND_INVOKE, KIND_OK, KIND_SUBSCRIBE, encode_offset,
    encode_records, escape, invoke_detail,
};
use super::model::{Action, FinalLog, History, Offset, Op, OpId, Open, Record};
use super::report::{Report, Violation};
use crate::outcome::OpOutcome;
use crate::run::Ctx;

/// Where a [`Recorder`]'s times come from.
#[derive(Clone, Debug)]
enum Clock {
    /// The run's fake time; operations are also recorded as history events.
    Sim(Ctx),
    /// Wall time since the recorder was made.
    Wall(std::time::Instant),
}

/// A recorder's state, shared by its clones (one per run in a simulation).
#[derive(Default, Debug)]
struct RecorderLog(Mutex<RecorderState>);

#[derive(Default, Debug)]
struct RecorderState {
    next: u64,
    open: BTreeMap<u64, Open>,
    done: BTreeMap<u64, Op>,
    history: History,
}

/// Records operations as clients run them, into a [`History`] (and, in a simulation, into the
/// run's history as the events [`ListAppend`](super::ListAppend) reads). Cheap to clone; clones share the record.
///
/// ```
/// use sim::check::list_append::{Recorder, Record};
///
/// let recorder = Recorder::wall();
/// let append = recorder.append("producer-1", "orders-0", "v1");
/// // … send it …
/// append.ok(Some(0));
/// let read = recorder.read("consumer-1", "orders-0");
/// read.ok(vec![Record::new(0, "v1")]);
/// recorder.final_log("orders-0", 0, vec![Record::new(0, "v1")]);
/// assert!(recorder.check().is_ok());
/// ```
#[derive(Clone, Debug)]
pub struct Recorder {
    log: Arc<RecorderLog>,
    clock: Clock,
}

/// An operation sent and not yet ended: end it with [`Pending::ok`], [`Pending::failed`] or
/// [`Pending::unknown`]; dropped without an outcome, it is recorded unknown.
#[must_use = "end the operation with ok, failed or unknown"]
#[derive(Debug)]
pub struct Pending<T: Completion> {
    recorder: Recorder,
    id: u64,
    done: bool,
    kind: PhantomData<fn(T)>,
}

/// A pending append: [`Pending::ok`] takes the offset it was given, if known.
pub type PendingAppend = Pending<Option<Offset>>;
/// A pending read: [`Pending::ok`] takes the records it saw.
pub type PendingRead = Pending<Vec<Record>>;

mod sealed {
    pub trait Sealed {}
    impl Sealed for Option<super::Offset> {}
    impl Sealed for Vec<super::Record> {}
}

/// What an acknowledged operation returns: an append's offset or a read's records.
pub trait Completion: sealed::Sealed + Sized {
    #[doc(hidden)]
    fn action(outcome: OpOutcome<Self>, value: Option<String>) -> Action;
    #[doc(hidden)]
    fn ok_detail(&self) -> String;
}

impl Completion for Option<Offset> {
    fn action(outcome: OpOutcome<Self>, value: Option<String>) -> Action {
        Action::Append { value: value.expect("a pending append is made with its value"), outcome }
    }

    fn ok_detail(&self) -> String {
        format!("offset={}", encode_offset(*self))
    }
}

impl Completion for Vec<Record> {
    fn action(outcome: OpOutcome<Self>, _value: Option<String>) -> Action {
        Action::Read { outcome }
    }

    fn ok_detail(&self) -> String {
        format!("records={}", encode_records(self))
    }
}

impl Recorder {
    /// The run's recorder: one record and one id space per run, whoever asks. Its times are the
    /// run's fake time, and every operation is also recorded as the history events
    /// [`ListAppend`](super::ListAppend) reads.
    pub fn of(ctx: &Ctx) -> Recorder {
        Recorder { log: ctx.extension::<RecorderLog>(), clock: Clock::Sim(ctx.clone()) }
    }

    /// A recorder on wall time (since now), for clients outside a simulation (rdkafka's threads).
    pub fn wall() -> Recorder {
        Recorder { log: Arc::default(), clock: Clock::Wall(std::time::Instant::now()) }
    }

    fn now(&self) -> Duration {
        match &self.clock {
            Clock::Sim(ctx) => ctx.elapsed(),
            Clock::Wall(start) => start.elapsed(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, RecorderState> {
        self.log.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records an event in the run's history (in a simulation), never under the state's lock:
    /// checks run inside `ctx.record` and may use the recorder.
    fn event(&self, kind: &str, identity: &str, detail: impl FnOnce() -> String) {
        if let Clock::Sim(ctx) = &self.clock {
            ctx.record(kind, identity, detail());
        }
    }

    fn invoke<T: Completion>(&self, process: &str, key: &str, value: Option<&str>) -> Pending<T> {
        let start = self.now();
        let id = {
            let mut st = self.lock();
            assert!(
                st.open.len() + st.done.len() < History::OPS_MAX,
                "a list-append recorder holds at most History::OPS_MAX operations"
            );
            st.next += 1;
            let id = st.next;
            let open = Open {
                id: OpId(id),
                process: process.to_string(),
                key: key.to_string(),
                start,
                value: value.map(str::to_string),
            };
            st.open.insert(id, open);
            id
        };
        self.event(KIND_INVOKE, &OpId(id).to_string(), || invoke_detail(process, key, value));
        Pending { recorder: self.clone(), id, done: false, kind: PhantomData }
    }

    /// Records an append of `value` to `key` by `process`, sent now.
    pub fn append(&self, process: &str, key: &str, value: &str) -> PendingAppend {
        self.invoke(process, key, Some(value))
    }

    /// Records a read of `key` by `process`, sent now.
    pub fn read(&self, process: &str, key: &str) -> PendingRead {
        self.invoke(process, key, None)
    }

    fn complete<T: Completion>(&self, id: u64, outcome: OpOutcome<T>) {
        let end = self.now();
        let (kind, detail) = match &outcome {
            OpOutcome::Ok(result) => (KIND_OK, result.ok_detail()),
            OpOutcome::Failed(why) => (KIND_FAIL, format!("reason={}", escape(why))),
            OpOutcome::Indeterminate(why) => (KIND_INFO, format!("reason={}", escape(why))),
        };
        {
            let mut st = self.lock();
            let open = st.open.remove(&id).expect("a pending operation is open until it completes, once");
            let action = T::action(outcome, open.value.clone());
            st.done.insert(id, open.close(end, action));
        }
        self.event(kind, &OpId(id).to_string(), || detail);
    }

    /// Records that `subscriber` (re)subscribed to `key` from `from`, now.
    pub fn subscribe(&self, subscriber: &str, key: &str, from: Option<Offset>) {
        let at = self.now();
        self.lock().history.subscribe(subscriber, key, from, at);
        self.event(KIND_SUBSCRIBE, subscriber, || format!("key={} from={}", escape(key), encode_offset(from)));
    }

    /// Records that `subscriber` was delivered `value` at `offset` of `key`, now.
    pub fn deliver(&self, subscriber: &str, key: &str, offset: Offset, value: &str) {
        let at = self.now();
        self.lock().history.deliver(subscriber, key, offset, value, at);
        self.event(KIND_DELIVER, subscriber, || format!("key={} offset={offset} value={}", escape(key), escape(value)));
    }

    /// Records the final read of `key`: its log start and its records.
    pub fn final_log(&self, key: &str, log_start: Offset, records: Vec<Record>) {
        let detail = matches!(self.clock, Clock::Sim(_))
            .then(|| format!("log_start={log_start} records={}", encode_records(&records)));
        self.lock().history.set_final(key, FinalLog { log_start, records });
        if let Some(detail) = detail {
            self.event(KIND_FINAL, key, || detail);
        }
    }

    /// The history so far; operations still open are unknown, ended now.
    pub fn history(&self) -> History {
        let now = self.now();
        let st = self.lock();
        let mut h = st.history.clone();
        let mut ops: Vec<Op> = st.done.values().cloned().collect();
        ops.extend(
            st.open
                .values()
                .map(|o| o.clone().close_without_result(now, false, "still open when the history was taken".into())),
        );
        ops.sort_by_key(|op| op.id);
        *h.ops_mut() = ops;
        h
    }

    /// Checks the history so far ([`check`]).
    ///
    /// # Errors
    /// The violations.
    pub fn check(&self) -> Result<Report, Vec<Violation>> {
        check(&self.history())
    }
}

impl<T: Completion> Pending<T> {
    /// The operation's id.
    pub fn id(&self) -> OpId {
        OpId(self.id)
    }

    fn end(mut self, outcome: OpOutcome<T>) {
        self.done = true;
        self.recorder.complete(self.id, outcome);
    }

    /// It was acknowledged, returning `result` (an append's offset if known; a read's records).
    pub fn ok(self, result: T) {
        self.end(OpOutcome::Ok(result));
    }

    /// It definitely failed (the server refused it before applying it).
    pub fn failed(self, reason: impl Into<String>) {
        self.end(OpOutcome::Failed(reason.into()));
    }

    /// Its outcome is unknown (a timeout, a lost response, `acks=0`).
    pub fn unknown(self, reason: impl Into<String>) {
        self.end(OpOutcome::Indeterminate(reason.into()));
    }

    /// Ends it with `outcome`.
    pub fn outcome(self, outcome: OpOutcome<T>) {
        self.end(outcome);
    }
}

impl<T: Completion> Drop for Pending<T> {
    fn drop(&mut self) {
        if !self.done {
            self.done = true;
            self.recorder.complete::<T>(self.id, OpOutcome::Indeterminate("dropped without an outcome".into()));
        }
    }
}
