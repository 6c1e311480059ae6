//! The search (Wing & Gong 1993 with Lowe's memoisation, 2017; as in Porcupine and Knossos'
//! `wgl`): each partition's calls and returns in a doubly linked list, walked from the head,
//! linearizing at calls and backtracking at returns, with a cache of (linearized set, state)
//! pairs seen. `docs/src/linearizability.md` describes it, with the read-only pruning.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::cache::{Bitset, Cache, NIL, mix, state_hash};
use super::model::{Model, Op, Return};
use super::verdict::{Counterexample, Inconclusive, Limits, MalformedHistory, Validity, partition_label};
use crate::report::Failure;

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
        Err(e) => Err(Failure::correctness(crate::oracle::Oracle::LINEARIZABLE, format!("malformed history: {e}"))),
    }
}

const HEAD: u32 = 0;

/// One partition's search (see the module docs).
fn search<M: Model>(
    model: &M,
    history: &[Op<M::Input, M::Output>],
    indices: &[usize],
    key: Option<&str>,
    limits: &Limits,
) -> Validity {
    Search::new(model, history, indices).run(key, limits)
}

/// The calls and returns of a partition's operations in time order, as a doubly linked list from
/// a head node (0). Dancing links: a node lifted out keeps its own links, to be put back.
struct Entries {
    next: Vec<u32>,
    prev: Vec<u32>,
    /// Node → its operation (index into the partition's operations).
    node_op: Vec<u32>,
    /// Node → whether it is a call (else a return).
    is_call: Vec<bool>,
    /// Operation → its return node (`NIL`: indeterminate, its return is at infinity).
    ret_node: Vec<u32>,
    /// Operations with a return entry.
    determinate: usize,
}

impl Entries {
    /// The list of `ops` (indices into `history`).
    fn new<I, O>(history: &[Op<I, O>], ops: &[usize]) -> Entries {
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
        Entries { next, prev, node_op, is_call, ret_node, determinate }
    }
}

/// One partition's search in progress.
struct Search<'h, M: Model> {
    model: &'h M,
    history: &'h [Op<M::Input, M::Output>],
    /// The operations taking part (indices into `history`); the search's "local" indices are
    /// indices into this.
    ops: Vec<usize>,
    list: Entries,
    /// One random word per operation, for the set's Zobrist hash.
    zobrist: Vec<u64>,
    /// The set linearized so far, and its Zobrist hash.
    bits: Bitset,
    zob: u64,
    cache: Cache<M::State>,
    /// (call node, state before it, whether the step left the state unchanged: a forced move).
    stack: Vec<(u32, M::State, bool)>,
    state: M::State,
    /// Determinate operations not linearized yet.
    remaining: usize,
    /// The longest prefix linearized when a return was reached, the operation of that return,
    /// and the state after the prefix: the counterexample's material.
    best: (Vec<u32>, u32, Option<M::State>),
}

impl<'h, M: Model> Search<'h, M> {
    fn new(model: &'h M, history: &'h [Op<M::Input, M::Output>], indices: &[usize]) -> Search<'h, M> {
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
        let list = Entries::new(history, &ops);
        let zobrist: Vec<u64> = (0..n as u64).map(|k| mix(k.wrapping_add(0x9e37_79b9_7f4a_7c15))).collect();
        let bits = Bitset::new(n);
        let cache: Cache<M::State> = Cache::new(bits.words.len());
        Search {
            model,
            history,
            ops,
            remaining: list.determinate,
            list,
            zobrist,
            bits,
            zob: 0,
            cache,
            stack: Vec::new(),
            state: model.init(),
            best: (Vec::new(), NIL, None),
        }
    }

    fn input(&self, local: u32) -> &'h M::Input {
        &self.history[self.ops[local as usize]].input
    }

    fn output(&self, local: u32) -> Option<&'h M::Output> {
        match &self.history[self.ops[local as usize]].ret {
            Return::Ok { output, .. } => Some(output),
            _ => None,
        }
    }

    /// Walks the list until every determinate operation is linearized, the search fails, or it
    /// reaches a limit.
    fn run(mut self, key: Option<&str>, limits: &Limits) -> Validity {
        let n = self.ops.len();
        let mut steps = 0u64;
        let mut cur = self.list.next[HEAD as usize];
        while self.remaining > 0 {
            debug_assert_ne!(cur, NIL, "a determinate operation's return is still in the list");
            let local = self.list.node_op[cur as usize];
            if self.list.is_call[cur as usize] {
                steps += 1;
                if steps > limits.steps_max || self.cache.bytes > limits.cache_bytes_max {
                    return Validity::Unknown(Inconclusive {
                        partition: key.map(str::to_string),
                        limit: if steps > limits.steps_max { "steps_max" } else { "cache_bytes_max" },
                        steps: steps - 1,
                        ops: n,
                        deepest: self.best.0.len().max(self.stack.len()),
                    });
                }
                if let Some(next) = self.try_linearize(cur, local) {
                    cur = next;
                    continue;
                }
            } else if self.stack.len() > self.best.0.len() || self.best.1 == NIL {
                // An operation that must have taken effect by now has not: backtrack.
                let prefix = self.stack.iter().map(|(node, ..)| self.list.node_op[*node as usize]).collect();
                self.best = (prefix, local, Some(self.state.clone()));
            }
            match self.backtrack() {
                Some(next) => cur = next,
                None => return Validity::NotLinearizable(explain(self.model, self.history, &self.ops, key, self.best)),
            }
        }
        Validity::Linearizable
    }

    /// At the call `cur` of operation `local`: linearizes it now if the model accepts it and the
    /// (set, state) pair is new. The node to go on from, or `None` to backtrack (a forced move
    /// whose pair was seen).
    fn try_linearize(&mut self, cur: u32, local: u32) -> Option<u32> {
        let Some(new) = self.model.step(&self.state, self.input(local), self.output(local)) else {
            return Some(self.list.next[cur as usize]);
        };
        // A read-only operation (Model::is_read_only) that can take effect now may as well
        // take effect first: in any completion from here it can be moved to the front (it
        // changes no state the operations it passes see, and nothing pending had to precede
        // it, or its call would lie after a return in the list). So it is no branch point: if
        // the search fails after it, it fails here (see `forced` below), and a cache hit on
        // it means the same.
        let forced = self.model.is_read_only(self.input(local), self.output(local));
        debug_assert!(
            !forced || new == self.state,
            "Model::is_read_only answered true for a step that changed the state"
        );
        self.bits.set(local);
        self.zob ^= self.zobrist[local as usize];
        let h = mix(self.zob ^ state_hash(&new));
        if self.cache.insert(h, &self.bits.words, &new) {
            self.stack.push((cur, std::mem::replace(&mut self.state, new), forced));
            let ret = self.list.ret_node[local as usize];
            lift(&mut self.list.next, &mut self.list.prev, cur, ret);
            if ret != NIL {
                self.remaining -= 1;
            }
            return Some(self.list.next[HEAD as usize]);
        }
        self.bits.clear(local);
        self.zob ^= self.zobrist[local as usize];
        (!forced).then(|| self.list.next[cur as usize])
    }

    /// Backtracks: undoes the last operation linearized, and goes on to the next call after it;
    /// undoing a forced move means the state before it fails too, so undoes further. The node to
    /// go on from, or `None` when nothing is left to undo (not linearizable).
    fn backtrack(&mut self) -> Option<u32> {
        loop {
            let (node, old, forced) = self.stack.pop()?;
            self.state = old;
            let undone = self.list.node_op[node as usize];
            self.bits.clear(undone);
            self.zob ^= self.zobrist[undone as usize];
            let ret = self.list.ret_node[undone as usize];
            unlift(&mut self.list.next, &mut self.list.prev, node, ret);
            if ret != NIL {
                self.remaining += 1;
            }
            if !forced {
                return Some(self.list.next[node as usize]);
            }
        }
    }
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
