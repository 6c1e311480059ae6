//! The shipped models: a compare-and-set [`Register`] and a key-value map ([`KvMap`]).

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use super::model::Model;

/// A read/write register with compare-and-set, holding a `V` (initially [`Register::initial`]).
/// The model of Jepsen's `cas-register` and Porcupine's register tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Register<V> {
    /// The value before any write.
    pub initial: V,
}

/// An operation on a [`Register`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RegisterOp<V> {
    /// Reads the value.
    Read,
    /// Writes a value.
    Write(V),
    /// Writes `new` if the value is `expected`.
    Cas {
        /// The value the register must hold.
        expected: V,
        /// The value written if it does.
        new: V,
    },
}

/// A [`Register`]'s answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RegisterOut<V> {
    /// A read's value.
    Read(V),
    /// A write's acknowledgement.
    Written,
    /// Whether a compare-and-set wrote.
    Cas(bool),
}

impl<V: Clone + Eq + Hash + Debug> Model for Register<V> {
    type State = V;
    type Input = RegisterOp<V>;
    type Output = RegisterOut<V>;

    fn init(&self) -> V {
        self.initial.clone()
    }

    fn step(&self, state: &V, input: &RegisterOp<V>, output: Option<&RegisterOut<V>>) -> Option<V> {
        match (input, output) {
            (RegisterOp::Read, None) => Some(state.clone()),
            (RegisterOp::Read, Some(RegisterOut::Read(v))) => (v == state).then(|| state.clone()),
            (RegisterOp::Write(v), None | Some(RegisterOut::Written)) => Some(v.clone()),
            (RegisterOp::Cas { expected, new }, None) => Some(if state == expected { new } else { state }.clone()),
            (RegisterOp::Cas { expected, new }, Some(RegisterOut::Cas(wrote))) => match (state == expected, wrote) {
                (true, true) => Some(new.clone()),
                (false, false) => Some(state.clone()),
                _ => None,
            },
            // An answer of another operation's kind: no state explains it.
            _ => None,
        }
    }

    fn is_read_only(&self, input: &RegisterOp<V>, output: Option<&RegisterOut<V>>) -> bool {
        matches!((input, output), (RegisterOp::Read, _) | (RegisterOp::Cas { .. }, Some(RegisterOut::Cas(false))))
    }
}

/// A key-value map of strings: get, put, append and compare-and-set per key, checked one key at
/// a time (each key is an independent register; [`Model::partition`] is the key). An absent key
/// reads as `None`; appending to an absent key makes it the appended value. The model of
/// Porcupine's and Jepsen's etcd key-value tests, with CAS.
///
/// Values are `Arc<str>` so the search's clones of states and inputs are cheap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvMap;

/// An operation on a [`KvMap`]: a key and what to do with it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KvOp {
    /// The key.
    pub key: String,
    /// What to do.
    pub command: KvCommand,
}

/// What a [`KvOp`] does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KvCommand {
    /// Reads the key's value.
    Get,
    /// Sets the key's value.
    Put(Arc<str>),
    /// Appends to the key's value.
    Append(Arc<str>),
    /// Sets the key's value to `new` if it is `expected` (`None`: absent).
    Cas {
        /// The value the key must hold.
        expected: Option<Arc<str>>,
        /// The value written if it does.
        new: Arc<str>,
    },
}

impl KvOp {
    /// `get(key)`.
    pub fn get(key: &str) -> KvOp {
        KvOp { key: key.to_string(), command: KvCommand::Get }
    }

    /// `put(key, value)`.
    pub fn put(key: &str, value: &str) -> KvOp {
        KvOp { key: key.to_string(), command: KvCommand::Put(value.into()) }
    }

    /// `append(key, value)`.
    pub fn append(key: &str, value: &str) -> KvOp {
        KvOp { key: key.to_string(), command: KvCommand::Append(value.into()) }
    }

    /// `cas(key, expected, new)`.
    pub fn cas(key: &str, expected: Option<&str>, new: &str) -> KvOp {
        KvOp { key: key.to_string(), command: KvCommand::Cas { expected: expected.map(Into::into), new: new.into() } }
    }
}

/// A [`KvMap`]'s answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KvOut {
    /// A get's value (`None`: absent).
    Value(Option<Arc<str>>),
    /// A put's or an append's acknowledgement.
    Done,
    /// Whether a compare-and-set wrote.
    Cas(bool),
}

impl KvOut {
    /// A get's answer.
    pub fn value(v: Option<&str>) -> KvOut {
        KvOut::Value(v.map(Into::into))
    }
}

impl Model for KvMap {
    type State = Option<Arc<str>>;
    type Input = KvOp;
    type Output = KvOut;

    fn init(&self) -> Option<Arc<str>> {
        None
    }

    fn step(&self, state: &Option<Arc<str>>, input: &KvOp, output: Option<&KvOut>) -> Option<Option<Arc<str>>> {
        match (&input.command, output) {
            (KvCommand::Get, None) => Some(state.clone()),
            (KvCommand::Get, Some(KvOut::Value(v))) => (v == state).then(|| state.clone()),
            (KvCommand::Put(v), None | Some(KvOut::Done)) => Some(Some(v.clone())),
            (KvCommand::Append(v), None | Some(KvOut::Done)) => Some(Some(match state {
                None => v.clone(),
                Some(s) => {
                    let mut joined = String::with_capacity(s.len() + v.len());
                    joined.push_str(s);
                    joined.push_str(v);
                    joined.into()
                }
            })),
            (KvCommand::Cas { expected, new }, None) => {
                Some(if state == expected { Some(new.clone()) } else { state.clone() })
            }
            (KvCommand::Cas { expected, new }, Some(KvOut::Cas(wrote))) => match (state == expected, wrote) {
                (true, true) => Some(Some(new.clone())),
                (false, false) => Some(state.clone()),
                _ => None,
            },
            _ => None,
        }
    }

    fn partition<'a>(&self, input: &'a KvOp) -> Option<&'a str> {
        Some(&input.key)
    }

    fn is_read_only(&self, input: &KvOp, output: Option<&KvOut>) -> bool {
        matches!((&input.command, output), (KvCommand::Get, _) | (KvCommand::Cas { .. }, Some(KvOut::Cas(false))))
    }
}
