//! A linearizability checker for histories of operations on objects with a sequential model:
//! registers, compare-and-set registers, key-value maps (shipped), or the user's own [`Model`].
//!
//! A history is linearizable (Herlihy & Wing, 1990) if every operation can be given one instant
//! between its call and its return at which it took effect, such that the operations in that
//! order are a legal run of the sequential model and produce the outputs the clients saw.
//!
//! # What the checker assumes (Jepsen's and Porcupine's semantics)
//! - **Intervals are closed.** An operation returning at `t` and one called at `t` are
//!   concurrent: either order is allowed. Fake time has many equal instants, and ordering them
//!   would invent precedence the clients never observed.
//! - **Indeterminate operations** ([`Return::Unknown`], Jepsen's `:info`) may take effect at any
//!   instant after their call, or never: their return is at infinity and their output is unknown
//!   (the model's step is given `None`). An indeterminate operation the model says cannot change
//!   the state ([`Model::is_read_only`]) is dropped before the search: it can neither constrain
//!   nor explain anything.
//! - **Failed operations** ([`Return::Failed`], Jepsen's `:fail`) definitely took no effect and
//!   are left out of the search. That they really took none is a separate oracle
//!   ([`crate::check::failed_took_no_effect`]).
//! - **Locality** (Herlihy & Wing, theorem 1): a history is linearizable if and only if each
//!   object's sub-history is. A model that says which object an operation touches
//!   ([`Model::partition`], e.g. the key of a key-value map) is checked one partition at a time,
//!   each with its own initial state; the first partition found not linearizable is reported.
//!
//! # The search (Wing & Gong 1993, Lowe 2017; as in Porcupine and Knossos' `wgl`)
//! The calls and returns of a partition are sorted by time into a doubly linked list. The search
//! walks it from the head: at a call it tries to linearize the operation now (the model accepts
//! its input and output in the current state); if that works and the pair (set of operations
//! linearized so far, model state) has not been seen before, the operation's call and return are
//! lifted out of the list, pushed on a stack, and the walk restarts at the head. Reaching a
//! return means an operation that must already have taken effect did not: the search backtracks
//! (pops the last linearized operation, restores its state and its entries, and tries the next
//! call after it). The history is linearizable when every operation with a known return is
//! linearized; it is not when a return is reached with nothing to pop. The cache of seen
//! (set, state) pairs is what makes the search practical (Lowe's memoisation): two different
//! orders of the same operations that reach the same state have the same future.
//!
//! One pruning beyond Lowe's: a read-only operation ([`Model::is_read_only`]: a read, a
//! compare-and-set that did not write) that can take effect where the walk finds it is
//! linearized there and never branched on — it can be moved to the front of any completion, so
//! if the search fails after it, it fails before it too. Reads, most of a typical history, then
//! cost no branching.
//!
//! The cache key is a Zobrist hash of the set (one random word per operation, XORed in and
//! out as operations are linearized and undone) combined with the state's hash, so a lookup
//! costs one hash of the state, not one of the set.
//!
//! # Limits
//! The problem is NP-complete (Gibbons & Korach 1997); [`Limits`] bounds each partition's search
//! by model steps and by cache memory. A search that reaches a limit answers
//! [`Validity::Unknown`]: inconclusive, never a pass.
//!
//! # Explanations
//! A non-linearizable partition is explained by the longest prefix the search could linearize
//! (in the order it linearized it), the model state after it, and the operation whose return the
//! search reached at that depth without being able to place it ([`Counterexample`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Debug, Write as _};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use crate::report::{Class, Failure};

/// A sequential specification of an object: the checker asks it whether an operation could take
/// effect in a state, and what state that leaves.
///
/// Models must be pure: `step` depends only on its arguments. States are cloned and hashed
/// often by the search: keep them small, or share their large parts (`Arc`).
pub trait Model {
    /// The object's state (for a partitioned model: one partition's state).
    type State: Clone + Eq + Hash + Debug;
    /// What a client asked for.
    type Input: Debug;
    /// What a client was answered.
    type Output: Debug;

    /// The state before any operation (of each partition).
    fn init(&self) -> Self::State;

    /// The state after `input` took effect in `state` answering `output`, or `None` if it could
    /// not have (the output is not what the model would answer, or the input is not allowed in
    /// this state). `output` is `None` for an indeterminate operation: the step must then take
    /// effect as the model would, answering whatever it answers.
    fn step(&self, state: &Self::State, input: &Self::Input, output: Option<&Self::Output>) -> Option<Self::State>;

    /// Which independent object the operation touches (a key), for compositional checking; `None`
    /// (the default) puts every operation in one partition. Operations of different partitions
    /// must never constrain each other's outputs.
    fn partition<'a>(&self, _input: &'a Self::Input) -> Option<&'a str> {
        None
    }

    /// Whether the operation, answering `output` (`None`: indeterminate), leaves the state as it
    /// was in every state it can take effect in: a read, a compare-and-set that answered "not
    /// written". The search prunes with it: an indeterminate read-only operation is dropped
    /// before the search (it can neither constrain nor explain anything), and a determinate one
    /// that can take effect is linearized at once and never branched on (moving it to the front
    /// of any completion changes no state another operation sees). Answering `true` wrongly
    /// makes the checker wrong; the default, `false`, is always safe.
    fn is_read_only(&self, _input: &Self::Input, _output: Option<&Self::Output>) -> bool {
        false
    }
}

/// How an operation ended, as its client saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Return<O> {
    /// It returned at `at` (fake time) with `output`.
    Ok {
        /// When the client got the answer.
        at: Duration,
        /// The answer.
        output: O,
    },
    /// It definitely took no effect (Jepsen's `:fail`): left out of the search.
    Failed,
    /// Indeterminate (Jepsen's `:info`: a timeout, a lost connection): it may take effect at
    /// any instant after its call, or never.
    Unknown,
}

/// One operation of a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op<I, O> {
    /// The client (Jepsen's process) that ran it; named in explanations.
    pub client: String,
    /// When it was called (fake time).
    pub call: Duration,
    /// What was asked.
    pub input: I,
    /// How it ended.
    pub ret: Return<O>,
}

impl<I, O> Op<I, O> {
    /// An operation that returned `output` at `ret`.
    pub fn ok(client: impl Into<String>, call: Duration, ret: Duration, input: I, output: O) -> Op<I, O> {
        Op { client: client.into(), call, input, ret: Return::Ok { at: ret, output } }
    }

    /// An indeterminate operation (timed out, connection lost).
    pub fn unknown(client: impl Into<String>, call: Duration, input: I) -> Op<I, O> {
        Op { client: client.into(), call, input, ret: Return::Unknown }
    }

    /// An operation that definitely took no effect.
    pub fn failed(client: impl Into<String>, call: Duration, input: I) -> Op<I, O> {
        Op { client: client.into(), call, input, ret: Return::Failed }
    }
}

impl<I: Debug, O: Debug> fmt::Display for Op<I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.ret {
            Return::Ok { at, output } => {
                write!(f, "{} {:?} -> {:?} [{:?}, {:?}]", self.client, self.input, output, self.call, at)
            }
            Return::Failed => write!(f, "{} {:?} -> failed [{:?}, …]", self.client, self.input, self.call),
            Return::Unknown => write!(f, "{} {:?} -> unknown [{:?}, ∞)", self.client, self.input, self.call),
        }
    }
}

/// Bounds on one partition's search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Model steps tried per partition. Default 100,000,000.
    pub steps_max: u64,
    /// Bytes the cache of (linearized set, state) pairs may hold per partition, estimated as
    /// the set's words plus the state's inline size. Default 1 GiB.
    pub cache_bytes_max: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { steps_max: 100_000_000, cache_bytes_max: 1 << 30 }
    }
}

/// The checker's answer (Jepsen's `:valid?`: true, false or unknown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Validity {
    /// Every partition is linearizable.
    Linearizable,
    /// A partition is not linearizable: why.
    NotLinearizable(Counterexample),
    /// A search reached a [`Limits`] bound before it could decide (and no partition was found
    /// not linearizable): inconclusive.
    Unknown(Inconclusive),
}

impl Validity {
    /// Whether the history was shown linearizable.
    pub fn is_linearizable(&self) -> bool {
        matches!(self, Validity::Linearizable)
    }

    /// As an oracle's result: not linearizable is a correctness failure of oracle
    /// `linearizable`; unknown is an inconclusive failure of the same oracle.
    ///
    /// # Errors
    /// The [`Failure`] described above, with the explanation as its message.
    pub fn into_result(self) -> Result<(), Failure> {
        match self {
            Validity::Linearizable => Ok(()),
            Validity::NotLinearizable(c) => Err(Failure::correctness("linearizable", c.to_string())),
            Validity::Unknown(u) => Err(Failure::new(Class::Inconclusive, u.to_string()).oracle("linearizable")),
        }
    }
}

/// Why a partition is not linearizable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counterexample {
    /// The partition (key), if the model partitions.
    pub partition: Option<String>,
    /// The longest prefix the search linearized, as indices into the checked history, in the
    /// order it linearized them.
    pub prefix: Vec<usize>,
    /// The model state after that prefix (`Debug`).
    pub state: String,
    /// The operation (index into the checked history) whose return the search reached after that
    /// prefix: it must have taken effect by then, and could not in any order the search tried.
    pub blocked: usize,
    /// The explanation as text: the partition, the blocked operation, and the prefix.
    pub explanation: String,
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.explanation)
    }
}

/// Which bound stopped a search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inconclusive {
    /// The partition (key), if the model partitions.
    pub partition: Option<String>,
    /// The bound reached: `"steps_max"` or `"cache_bytes_max"`.
    pub limit: &'static str,
    /// Model steps tried in that partition.
    pub steps: u64,
    /// Operations in that partition, and how many of them the search had linearized at most.
    pub ops: usize,
    /// The deepest prefix the search reached.
    pub deepest: usize,
}

impl fmt::Display for Inconclusive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "linearizability unknown{}: the search reached Limits::{} after {} model steps ({} operations, at most {} \
             linearized at once); raise the limit or check a shorter history",
            partition_label(&self.partition),
            self.limit,
            self.steps,
            self.ops,
            self.deepest
        )
    }
}

fn partition_label(p: &Option<String>) -> String {
    match p {
        Some(key) => format!(" for key {key:?}"),
        None => String::new(),
    }
}

/// A history that cannot be checked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MalformedHistory {
    /// An operation returned before it was called.
    #[error("operation #{index} ({client}) returned at {ret:?}, before its call at {call:?}")]
    ReturnBeforeCall {
        /// Index into the history.
        index: usize,
        /// Its client.
        client: String,
        /// Its call.
        call: Duration,
        /// Its return.
        ret: Duration,
    },
    /// A partition has more operations than the checker indexes (2^31).
    #[error("a partition has {ops} operations, more than the checker indexes (2^31)")]
    TooManyOperations {
        /// Operations in the partition.
        ops: usize,
    },
}

/// Checks `history` against `model` with the default [`Limits`].
///
/// # Errors
/// [`MalformedHistory`] if an operation returned before its call.
pub fn check<M: Model>(model: &M, history: &[Op<M::Input, M::Output>]) -> Result<Validity, MalformedHistory> {
    check_with(model, history, &Limits::default())
}

/// Checks `history` against `model`, partition by partition (in key order), each search bounded
/// by `limits`. Stops at the first partition found not linearizable.
///
/// # Errors
/// [`MalformedHistory`] if an operation returned before its call, or a partition is too large to
/// index.
pub fn check_with<M: Model>(
    model: &M,
    history: &[Op<M::Input, M::Output>],
    limits: &Limits,
) -> Result<Validity, MalformedHistory> {
    for (index, op) in history.iter().enumerate() {
        if let Return::Ok { at, .. } = op.ret
            && at < op.call
        {
            return Err(MalformedHistory::ReturnBeforeCall {
                index,
                client: op.client.clone(),
                call: op.call,
                ret: at,
            });
        }
    }
    let mut partitions: BTreeMap<Option<&str>, Vec<usize>> = BTreeMap::new();
    for (index, op) in history.iter().enumerate() {
        partitions.entry(model.partition(&op.input)).or_default().push(index);
    }
    let mut unknown = None;
    for (key, indices) in partitions {
        if indices.len() > (1 << 31) {
            return Err(MalformedHistory::TooManyOperations { ops: indices.len() });
        }
        match search(model, history, &indices, key, limits) {
            Validity::Linearizable => {}
            invalid @ Validity::NotLinearizable(_) => return Ok(invalid),
            Validity::Unknown(u) => {
                unknown.get_or_insert(u);
            }
        }
    }
    Ok(unknown.map_or(Validity::Linearizable, Validity::Unknown))
}

/// Checks and answers as an oracle ([`Validity::into_result`]).
///
/// # Errors
/// A correctness failure of oracle `linearizable` if the history is not linearizable or is
/// malformed; an inconclusive one if a search reached a limit.
pub fn verify<M: Model>(model: &M, history: &[Op<M::Input, M::Output>]) -> Result<(), Failure> {
    match check(model, history) {
        Ok(validity) => validity.into_result(),
        Err(e) => Err(Failure::correctness("linearizable", format!("malformed history: {e}"))),
    }
}

const NIL: u32 = u32::MAX;
const HEAD: u32 = 0;

/// One partition's search (see the module docs).
fn search<M: Model>(
    model: &M,
    history: &[Op<M::Input, M::Output>],
    indices: &[usize],
    key: Option<&str>,
    limits: &Limits,
) -> Validity {
    // The operations taking part: failed ones took no effect; indeterminate reads cannot matter.
    let ops: Vec<usize> = indices
        .iter()
        .copied()
        .filter(|&i| match history[i].ret {
            Return::Ok { .. } => true,
            Return::Failed => false,
            Return::Unknown => !model.is_read_only(&history[i].input, None),
        })
        .collect();
    let n = ops.len();
    // Entries: (time, return?, local op). Calls sort before returns at the same instant
    // (closed intervals); indeterminate operations have no return entry (it is at infinity).
    let mut entries: Vec<(Duration, bool, u32)> = Vec::with_capacity(2 * n);
    let mut determinate = 0usize;
    for (local, &i) in ops.iter().enumerate() {
        let op = &history[i];
        entries.push((op.call, false, local as u32));
        if let Return::Ok { at, .. } = op.ret {
            entries.push((at, true, local as u32));
            determinate += 1;
        }
    }
    entries.sort_unstable();
    let nodes = entries.len() + 1;
    let mut next = vec![NIL; nodes];
    let mut prev = vec![NIL; nodes];
    let mut node_op = vec![NIL; nodes];
    let mut is_call = vec![false; nodes];
    let mut ret_node = vec![NIL; n];
    for (k, &(_, is_ret, local)) in entries.iter().enumerate() {
        let node = k as u32 + 1;
        prev[node as usize] = node - 1;
        next[node as usize - 1] = node;
        node_op[node as usize] = local;
        is_call[node as usize] = !is_ret;
        if is_ret {
            ret_node[local as usize] = node;
        }
    }
    let input = |local: u32| &history[ops[local as usize]].input;
    let output = |local: u32| match &history[ops[local as usize]].ret {
        Return::Ok { output, .. } => Some(output),
        _ => None,
    };
    let zobrist: Vec<u64> = (0..n as u64).map(|k| mix(k.wrapping_add(0x9e37_79b9_7f4a_7c15))).collect();

    let mut bits = Bitset::new(n);
    let mut zob = 0u64;
    let mut cache: Cache<M::State> = Cache::new(bits.words.len());
    // (call node, state before it, whether the step left the state unchanged: a forced move).
    let mut stack: Vec<(u32, M::State, bool)> = Vec::new();
    let mut state = model.init();
    let mut remaining = determinate;
    let mut steps = 0u64;
    let mut best: (Vec<u32>, u32, Option<M::State>) = (Vec::new(), NIL, None);
    let mut cur = next[HEAD as usize];
    while remaining > 0 {
        debug_assert_ne!(cur, NIL, "a determinate operation's return is still in the list");
        let local = node_op[cur as usize];
        if is_call[cur as usize] {
            steps += 1;
            if steps > limits.steps_max || cache.bytes > limits.cache_bytes_max {
                return Validity::Unknown(Inconclusive {
                    partition: key.map(str::to_string),
                    limit: if steps > limits.steps_max { "steps_max" } else { "cache_bytes_max" },
                    steps: steps - 1,
                    ops: n,
                    deepest: best.0.len().max(stack.len()),
                });
            }
            let Some(new) = model.step(&state, input(local), output(local)) else {
                cur = next[cur as usize];
                continue;
            };
            // A read-only operation (Model::is_read_only) that can take effect now may as well
            // take effect first: in any completion from here it can be moved to the front (it
            // changes no state the operations it passes see, and nothing pending had to precede
            // it, or its call would lie after a return in the list). So it is no branch point: if
            // the search fails after it, it fails here (see `forced` below), and a cache hit on
            // it means the same.
            let forced = model.is_read_only(input(local), output(local));
            debug_assert!(
                !forced || new == state,
                "Model::is_read_only answered true for a step that changed the state"
            );
            bits.set(local);
            zob ^= zobrist[local as usize];
            let h = mix(zob ^ state_hash(&new));
            if cache.insert(h, &bits.words, &new) {
                stack.push((cur, std::mem::replace(&mut state, new), forced));
                lift(&mut next, &mut prev, cur, ret_node[local as usize]);
                if ret_node[local as usize] != NIL {
                    remaining -= 1;
                }
                cur = next[HEAD as usize];
                continue;
            }
            bits.clear(local);
            zob ^= zobrist[local as usize];
            if !forced {
                cur = next[cur as usize];
                continue;
            }
        } else if stack.len() > best.0.len() || best.1 == NIL {
            // An operation that must have taken effect by now has not: backtrack.
            best = (stack.iter().map(|(node, ..)| node_op[*node as usize]).collect(), local, Some(state.clone()));
        }
        // Backtrack: undo the last operation linearized, and go on to the next call after it;
        // undoing a forced move means the state before it fails too, so undo further.
        loop {
            let Some((node, old, forced)) = stack.pop() else {
                return Validity::NotLinearizable(explain(model, history, &ops, key, best));
            };
            state = old;
            let undone = node_op[node as usize];
            bits.clear(undone);
            zob ^= zobrist[undone as usize];
            unlift(&mut next, &mut prev, node, ret_node[undone as usize]);
            if ret_node[undone as usize] != NIL {
                remaining += 1;
            }
            cur = next[node as usize];
            if !forced {
                break;
            }
        }
    }
    Validity::Linearizable
}

/// Takes a call entry (and its return entry, if any) out of the list.
fn lift(next: &mut [u32], prev: &mut [u32], call: u32, ret: u32) {
    for node in [call, ret] {
        if node == NIL {
            continue;
        }
        let (p, n) = (prev[node as usize], next[node as usize]);
        next[p as usize] = n;
        if n != NIL {
            prev[n as usize] = p;
        }
    }
}

/// Puts back what [`lift`] took out (dancing links: the lifted nodes kept their own links).
fn unlift(next: &mut [u32], prev: &mut [u32], call: u32, ret: u32) {
    for node in [ret, call] {
        if node == NIL {
            continue;
        }
        let (p, n) = (prev[node as usize], next[node as usize]);
        next[p as usize] = node;
        if n != NIL {
            prev[n as usize] = node;
        }
    }
}

/// Prefix operations shown in an explanation, at most (the last ones, closest to the blocked
/// operation).
const EXPLAIN_PREFIX_MAX: usize = 12;

fn explain<M: Model>(
    model: &M,
    history: &[Op<M::Input, M::Output>],
    ops: &[usize],
    key: Option<&str>,
    best: (Vec<u32>, u32, Option<M::State>),
) -> Counterexample {
    let (prefix, blocked, state) = best;
    let state = state.unwrap_or_else(|| model.init());
    let prefix: Vec<usize> = prefix.iter().map(|&l| ops[l as usize]).collect();
    let blocked = ops[blocked as usize];
    let partition = key.map(str::to_string);
    let mut text = format!(
        "not linearizable{}: operation #{blocked} ({}) cannot take effect after the longest linearizable prefix \
         ({} operation(s), state after it: {state:?}), nor in any other order of the operations concurrent with it",
        partition_label(&partition),
        history[blocked],
        prefix.len(),
    );
    if !prefix.is_empty() {
        let shown = prefix.len().min(EXPLAIN_PREFIX_MAX);
        let _ = write!(
            text,
            "; the prefix{}:",
            if shown < prefix.len() { format!("'s last {shown}") } else { String::new() }
        );
        for &i in &prefix[prefix.len() - shown..] {
            let _ = write!(text, "\n  #{i} {}", history[i]);
        }
    }
    Counterexample { partition, prefix, state: format!("{state:?}"), blocked, explanation: text }
}

/// The linearized set, one bit per operation of the partition.
struct Bitset {
    words: Vec<u64>,
}

impl Bitset {
    fn new(n: usize) -> Bitset {
        Bitset { words: vec![0; n.div_ceil(64).max(1)] }
    }

    fn set(&mut self, k: u32) {
        self.words[k as usize / 64] |= 1 << (k % 64);
    }

    fn clear(&mut self, k: u32) {
        self.words[k as usize / 64] &= !(1 << (k % 64));
    }
}

/// The (linearized set, state) pairs seen: a map from the combined hash to a chain of entries in
/// flat arenas (no allocation per entry beyond the arenas' growth).
struct Cache<S> {
    heads: HashMap<u64, u32, BuildHasherDefault<PassThrough>>,
    words_per_set: usize,
    sets: Vec<u64>,
    states: Vec<S>,
    chain: Vec<u32>,
    bytes: u64,
}

impl<S: Eq> Cache<S> {
    fn new(words_per_set: usize) -> Cache<S> {
        Cache {
            heads: HashMap::default(),
            words_per_set,
            sets: Vec::new(),
            states: Vec::new(),
            chain: Vec::new(),
            bytes: 0,
        }
    }

    /// Inserts the pair unless present; whether it was inserted.
    fn insert(&mut self, h: u64, set: &[u64], state: &S) -> bool
    where
        S: Clone,
    {
        let w = self.words_per_set;
        let head = self.heads.get(&h).copied().unwrap_or(NIL);
        let mut k = head;
        while k != NIL {
            let i = k as usize;
            if self.states[i] == *state && self.sets[i * w..(i + 1) * w] == *set {
                return false;
            }
            k = self.chain[i];
        }
        let index = self.states.len() as u32;
        self.sets.extend_from_slice(set);
        self.states.push(state.clone());
        self.chain.push(head);
        self.heads.insert(h, index);
        self.bytes += (w * 8 + std::mem::size_of::<S>() + 4 + 16) as u64;
        true
    }
}

/// A hasher for keys that are already well mixed.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// A fast non-cryptographic hasher for states (FxHash's multiply-rotate; the result is mixed
/// again before use).
#[derive(Default)]
struct StateHasher(u64);

impl StateHasher {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(Self::K);
    }
}

impl Hasher for StateHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("chunks of 8")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }

    fn write_u8(&mut self, v: u8) {
        self.add(u64::from(v));
    }

    fn write_u32(&mut self, v: u32) {
        self.add(u64::from(v));
    }

    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }

    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
}

fn state_hash<S: Hash>(state: &S) -> u64 {
    let mut h = StateHasher::default();
    state.hash(&mut h);
    h.finish()
}

/// SplitMix64's finaliser: spreads every input bit over the output.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

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
