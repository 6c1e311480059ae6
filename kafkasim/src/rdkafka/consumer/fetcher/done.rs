//! What the fetcher does with its requests' answers (metadata, committed offsets, fetched
//! records, listed offsets): positions and the consumer queue updated, errors queued,
//! metadata refreshed on the leader errors.

use super::*;

impl Fetcher {
    pub(super) fn done(&mut self, done: Done) {
        let now = Instant::now();
        let backoff = now + self.s.retry_backoff;
        match done {
            Done::Metadata(result) => {
                self.refresh.busy = false;
                match result {
                    Ok(resp) => {
                        self.metadata.update(&resp, now);
                        let mut st = self.lock();
                        for t in &resp.topics {
                            let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else { continue };
                            if let Some(TopicState::Known(leaders)) = self.metadata.topic(&name) {
                                st.partition_counts.insert(name, leaders.len());
                            }
                        }
                        let missing = st.partitions.keys().any(|(t, p)| self.metadata.leader(t, *p).is_none());
                        drop(st);
                        self.refresh.next_refresh =
                            if missing { Some(backoff) } else { self.s.metadata_refresh.map(|d| now + d) };
                    }
                    Err(_) => {
                        self.refresh.next_refresh = Some(backoff);
                        self.refresh.retry_at = Some(backoff);
                    }
                }
            }
            Done::Committed { asked, result } => {
                let mut errors = Vec::new();
                let state = Arc::clone(&self.state);
                let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                for (tp, version) in &asked {
                    let Some(p) = st.partitions.get_mut(tp).filter(|p| p.version == *version) else { continue };
                    p.busy = false;
                    let found = match &result {
                        Err(e) => {
                            p.not_before = Some(backoff);
                            if let Some(error) = lookup_error(e) {
                                errors.push((tp.clone(), p.version, error));
                            }
                            continue;
                        }
                        Ok(list) => list.iter().find(|(t, _, _)| t == tp).and_then(|(_, o, _)| *o).filter(|o| *o >= 0),
                    };
                    match found {
                        Some(offset) => {
                            p.start = Start::At(offset);
                            p.committed = Some(offset);
                        }
                        None => {
                            let (start, error) = reset(&self.s);
                            p.start = start;
                            errors.extend(error.map(|e| (tp.clone(), p.version, e)));
                        }
                    }
                }
                self.queue_errors(&mut st, errors);
            }
            Done::List { broker, conn, asked, result } => {
                self.busy.remove(&(broker, Kind::List));
                let mut errors = Vec::new();
                let state = Arc::clone(&self.state);
                let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                for (tp, version, tail) in &asked {
                    let Some(p) = st.partitions.get_mut(tp).filter(|p| p.version == *version) else { continue };
                    p.busy = false;
                    let part = result.as_ref().and_then(|r| {
                        r.topics
                            .iter()
                            .filter(|t| t.name.0.as_str() == tp.0)
                            .flat_map(|t| t.partitions.iter())
                            .find(|lp| lp.partition_index == tp.1)
                    });
                    match part {
                        Some(lp) if lp.error_code == 0 => p.start = Start::At((lp.offset - tail).max(0)),
                        Some(lp) if !leader_error(lp.error_code) => {
                            p.not_before = Some(backoff);
                            errors.push((
                                tp.clone(),
                                p.version,
                                KafkaError::MessageConsumption(Code::from(lp.error_code)),
                            ));
                        }
                        _ => {
                            self.refresh.due = true;
                            p.not_before = Some(backoff);
                        }
                    }
                }
                self.queue_errors(&mut st, errors);
                drop(st);
                if let Some(c) = conn {
                    self.idle.insert((broker, Kind::List), c);
                }
            }
            Done::Fetch { broker, conn, asked, result } => {
                self.busy.remove(&(broker, Kind::Fetch));
                let mut errors = Vec::new();
                let mut queued = false;
                let state = Arc::clone(&self.state);
                let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                for (tp, version, offset) in &asked {
                    let Some(p) = st.partitions.get_mut(tp).filter(|p| p.version == *version) else { continue };
                    p.busy = false;
                    let part = result.as_ref().and_then(|r| {
                        r.responses
                            .iter()
                            .filter(|t| t.topic.0.as_str() == tp.0)
                            .flat_map(|t| t.partitions.iter())
                            .find(|fp| fp.partition_index == tp.1)
                    });
                    let Some(part) = part else {
                        self.refresh.due |= result.is_none();
                        p.not_before = Some(backoff);
                        continue;
                    };
                    match part.error_code {
                        0 => {
                            let records = part.records.clone().unwrap_or_default();
                            let (messages, next) = wire::decode(&tp.0, tp.1, &records, *offset);
                            if p.start == Start::At(*offset) {
                                p.start = Start::At(next);
                            }
                            let bad = messages.iter().any(Result::is_err);
                            if bad && p.start == Start::At(*offset) {
                                // librdkafka fetches a bad batch again at once; not in a loop here.
                                p.not_before = Some(backoff);
                            }
                            p.buffered += messages.iter().filter(|m| m.is_ok()).count();
                            queued |= !messages.is_empty();
                            let v = p.version;
                            st.queue.extend(messages.into_iter().map(|m| match m {
                                Ok(message) => Queued::Message { tp: tp.clone(), version: v, message },
                                Err(error) => Queued::Error { tp: Some((tp.clone(), v)), error },
                            }));
                        }
                        1 => {
                            let (start, error) = reset(&self.s);
                            p.start = start;
                            errors.extend(error.map(|e| (tp.clone(), p.version, e)));
                        }
                        c if leader_error(c) => {
                            self.refresh.due = true;
                            p.not_before = Some(backoff);
                        }
                        c => {
                            p.not_before = Some(backoff);
                            errors.push((tp.clone(), p.version, KafkaError::MessageConsumption(Code::from(c))));
                        }
                    }
                }
                self.queue_errors(&mut st, errors);
                drop(st);
                if queued {
                    self.signals.data.notify_waiters();
                }
                if let Some(c) = conn {
                    self.idle.insert((broker, Kind::Fetch), c);
                }
            }
        }
    }

    fn queue_errors(&self, st: &mut State, errors: Vec<(Tp, u64, KafkaError)>) {
        if errors.is_empty() {
            return;
        }
        for (tp, version, error) in errors {
            // The same error for the same partition once in the queue at most (a lookup refused
            // at every retry must not fill it while the application is not reading).
            let again = st.queue.iter().any(|q| {
                matches!(q, Queued::Error { tp: Some((t, v)), error: e } if *t == tp && *v == version && *e == error)
            });
            if !again {
                st.queue.push_back(Queued::Error { tp: Some((tp, version)), error });
            }
        }
        self.signals.data.notify_waiters();
    }
}

/// The error `recv()` reports for a committed-offset lookup that failed, as librdkafka's
/// `rd_kafka_assignment_handle_OffsetFetch` / `_apply_offsets` report it ("Failed to fetch
/// committed offset(s) for .. in group"): a broker error no retry helps (authorization, an
/// invalid group id, an error nobody expects) as `MessageConsumption(code)`. Coordinator and
/// transport errors, retried by the group, and the group going away are not reported.
fn lookup_error(e: &KafkaError) -> Option<KafkaError> {
    let code = e.rdkafka_error_code()?;
    let broker = i16::try_from(code.code()).ok().filter(|c| *c > 0)?;
    // The codes the group retries (`group::commits::retriable`): coordinator moving or loading.
    let retried = matches!(broker, 3 | 7 | 14 | 15 | 16);
    (!retried).then_some(KafkaError::MessageConsumption(code))
}
