//! Finalizers honoured: an object carrying finalizer `F` never leaves storage unless `F` was
//! removed after its deletion was requested; with a [`CleanupLedger`] the user's cleanup calls
//! record into, cleanup ran before `F` was removed, and at most once per deletion.
//!
//! Semantics (Kubernetes API conventions, *Finalizers*): a DELETE of an object with finalizers
//! sets `metadata.deletionTimestamp` and keeps it; each controller removes its finalizer once its
//! cleanup is done; the object leaves storage when the last one is removed. kube-runtime's
//! `finalizer` helper calls the cleanup (`Event::Cleanup`) and then removes `F` with a JSON patch
//! (a `test` of the finalizer's index, then `remove`); when that patch fails the cleanup runs again
//! at the next reconcile, so "at most once" holds only where the user's contract says so
//! ([`FinalizerRule::at_most_once`]).
//!
//! Deletions are told apart by the object's `metadata.uid`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use sim::Oracle;

use crate::introspect::{ObjectRef, Verb, Write};
use crate::models::violation::Violation;

/// The oracle of [`FinalizerRule::check`].
pub const FINALIZERS: Oracle = Oracle::new("kube-finalizers");

/// One cleanup call, as the user's cleanup recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cleanup {
    /// The object cleaned up.
    pub object: ObjectRef,
    /// Its `metadata.uid`.
    pub uid: String,
    /// The fake time the cleanup finished.
    pub at: Duration,
}

/// Where the user's cleanup records each call (cheap to clone; clones share the ledger). Inside a
/// simulation each call is also a history entry `kube.cleanup` (identity the object, detail the
/// uid).
#[derive(Clone, Debug, Default)]
pub struct CleanupLedger {
    calls: Arc<Mutex<Vec<Cleanup>>>,
}

impl CleanupLedger {
    /// An empty ledger.
    pub fn new() -> CleanupLedger {
        CleanupLedger::default()
    }

    /// Records that the cleanup of `object` (uid `uid`) finished now (the run's fake time in a
    /// simulation; `at` outside one).
    pub fn record(&self, object: ObjectRef, uid: &str, at: Duration) {
        let at = match sim::Ctx::try_current() {
            Some(ctx) => {
                ctx.record("kube.cleanup", &object.to_string(), uid);
                ctx.elapsed()
            }
            None => at,
        };
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).push(Cleanup { object, uid: uid.to_string(), at });
    }

    /// Every call so far, in record order.
    pub fn calls(&self) -> Vec<Cleanup> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The rule for one finalizer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinalizerRule {
    /// The finalizer (`example.com/cleanup`).
    pub finalizer: String,
    /// Whether cleanup must run at most once per deletion (default true).
    pub at_most_once: bool,
}

/// Where one object stands in the walk over the writes.
#[derive(Default)]
struct Track {
    /// The object as last written.
    last: Option<Value>,
}

fn uid_of(obj: &Value) -> &str {
    obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("")
}

fn has_finalizer(obj: &Value, f: &str) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|list| list.iter().any(|x| x.as_str() == Some(f)))
}

fn marked(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null())
}

impl FinalizerRule {
    /// The rule for `finalizer`, cleanup at most once per deletion.
    pub fn new(finalizer: &str) -> FinalizerRule {
        FinalizerRule { finalizer: finalizer.to_string(), at_most_once: true }
    }

    /// Allows cleanup to run more than once per deletion (an idempotent cleanup).
    pub fn repeatable_cleanup(mut self) -> FinalizerRule {
        self.at_most_once = false;
        self
    }

    /// Judges `writes` (the server's, in commit order) and, with a ledger, the cleanup calls.
    pub fn check(&self, writes: &[Write], cleanups: Option<&[Cleanup]>) -> Vec<Violation> {
        let mut tracks: BTreeMap<&ObjectRef, Track> = BTreeMap::new();
        let mut out = Vec::new();
        for w in writes {
            let track = tracks.entry(&w.object).or_default();
            let before = track.last.take();
            if let Some(before) = before.as_ref().filter(|b| has_finalizer(b, &self.finalizer)) {
                let kept = w.after.as_ref().is_some_and(|a| has_finalizer(a, &self.finalizer));
                if !kept {
                    self.removed(w, before, cleanups, &mut out);
                }
            }
            track.last = if w.verb == Verb::Deleted { None } else { w.after.clone() };
        }
        if let (true, Some(cleanups)) = (self.at_most_once, cleanups) {
            out.extend(self.repeated(cleanups));
        }
        out.sort_by_key(|v| v.at);
        out
    }

    /// `F` left the object (or the object left storage) in `w`; `before` carried it.
    fn removed(&self, w: &Write, before: &Value, cleanups: Option<&[Cleanup]>, out: &mut Vec<Violation>) {
        let f = &self.finalizer;
        if !marked(before) {
            if w.verb == Verb::Deleted {
                out.push(Violation::new(
                    &FINALIZERS,
                    w.at,
                    format!(
                        "{} left storage at rv={} carrying finalizer {f} without a deletionTimestamp",
                        w.object, w.rv
                    ),
                ));
            }
            // Removing a finalizer before any deletion is the controller's business.
            return;
        }
        let Some(cleanups) = cleanups else { return };
        let uid = uid_of(before);
        let ran = cleanups.iter().any(|c| c.object == w.object && c.uid == uid && c.at <= w.at);
        if !ran {
            out.push(Violation::new(
                &FINALIZERS,
                w.at,
                format!(
                    "finalizer {f} was removed from {} (uid {uid}) by {} at rv={} before its cleanup ran",
                    w.object, w.actor, w.rv
                ),
            ));
        }
    }

    fn repeated(&self, cleanups: &[Cleanup]) -> Vec<Violation> {
        let mut counts: BTreeMap<(&ObjectRef, &str), Vec<Duration>> = BTreeMap::new();
        for c in cleanups {
            counts.entry((&c.object, c.uid.as_str())).or_default().push(c.at);
        }
        counts
            .into_iter()
            .filter(|(_, ats)| ats.len() > 1)
            .map(|((object, uid), ats)| {
                Violation::new(
                    &FINALIZERS,
                    ats[1],
                    format!("cleanup of {object} (uid {uid}) ran {} times in one deletion (at {ats:?})", ats.len()),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const F: &str = "example.com/cleanup";

    fn obj() -> ObjectRef {
        ObjectRef { resource: "configmaps".into(), namespace: "default".into(), name: "x".into() }
    }

    fn w(at: u64, verb: Verb, after: Option<Value>) -> Write {
        Write {
            rv: at,
            at: Duration::from_secs(at),
            verb,
            object: obj(),
            actor: "op".into(),
            after,
            diff: String::new(),
        }
    }

    fn state(finalizers: &[&str], marked: bool) -> Value {
        let mut v = json!({"metadata": {"name": "x", "uid": "u1", "finalizers": finalizers}});
        if marked {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        v
    }

    fn cleanup(at: u64) -> Cleanup {
        Cleanup { object: obj(), uid: "u1".into(), at: Duration::from_secs(at) }
    }

    fn timeline() -> Vec<Write> {
        vec![
            w(1, Verb::Create, Some(state(&[], false))),
            w(2, Verb::Patch, Some(state(&[F], false))),
            w(3, Verb::DeleteMarked, Some(state(&[F], true))),
            w(5, Verb::Deleted, None),
        ]
    }

    #[test]
    fn cleanup_before_removal_passes() {
        let rule = FinalizerRule::new(F);
        assert!(rule.check(&timeline(), Some(&[cleanup(4)])).is_empty());
        assert!(rule.check(&timeline(), None).is_empty(), "without a ledger only storage is judged");
    }

    #[test]
    fn removal_without_cleanup_and_repeated_cleanup_are_found() {
        let rule = FinalizerRule::new(F);
        let v = rule.check(&timeline(), Some(&[]));
        assert_eq!(v.len(), 1);
        assert!(v[0].message.contains("before its cleanup ran"), "{}", v[0].message);
        let v = rule.check(&timeline(), Some(&[cleanup(4), cleanup(4)]));
        assert!(v[0].message.contains("ran 2 times"), "{v:?}");
        assert!(rule.clone().repeatable_cleanup().check(&timeline(), Some(&[cleanup(4), cleanup(4)])).is_empty());
    }

    #[test]
    fn leaving_storage_with_the_finalizer_unmarked_is_found() {
        let writes = vec![w(1, Verb::Create, Some(state(&[F], false))), w(2, Verb::Deleted, None)];
        let v = FinalizerRule::new(F).check(&writes, None);
        assert_eq!(v.len(), 1);
        assert!(v[0].message.contains("without a deletionTimestamp"), "{}", v[0].message);
    }

    #[test]
    fn a_ledger_records_calls() {
        let ledger = CleanupLedger::new();
        ledger.record(obj(), "u1", Duration::from_secs(4));
        assert_eq!(ledger.calls(), vec![cleanup(4)]);
    }
}
