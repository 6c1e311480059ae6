//! A watch response: a chunked `application/json` stream, one `{"type": …, "object": …}` per
//! line, fed from the store's per-type log as revisions commit. Faults act on it as it runs
//! (410 ERROR event, cut, silence, delayed delivery); `timeoutSeconds` ends it cleanly. Watches
//! with `allowWatchBookmarks` get a BOOKMARK at the earlier of each bookmark interval and 2 s
//! before their timeout (none when that is already past), as the real watch cache's
//! `nextBookmarkTime`, and only when the store moved past the watch's start.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Frame;
use serde_json::json;
use tokio::time::Instant;

use crate::fault::{FaultAction, RequestInfo};
use crate::introspect::Watcher;
use crate::resource::ResourceType;
use crate::server::api::ApiServer;
use crate::status::ApiError;
use crate::store::{WatchEvent, WatchFilter, WatchStart};

/// The real server's default when `timeoutSeconds` is not given (its `--min-request-timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// How long before its timeout a watch gets its last bookmark (the real cacher's 2 s).
const PRE_TIMEOUT_BOOKMARK: Duration = Duration::from_secs(2);

type Chunk = Result<Frame<Bytes>, std::io::Error>;

/// One open watch.
pub struct WatchStream {
    api: ApiServer,
    ty: ResourceType,
    ns: Option<String>,
    filter: WatchFilter,
    info: RequestInfo,
    after_rv: u64,
    /// Lines to send: (when due, line, resourceVersion).
    pending: VecDeque<(Instant, Bytes, u64)>,
    changed: tokio::sync::watch::Receiver<u64>,
    deadline: Instant,
    bookmarks: bool,
    /// When the next bookmark is due (`None`: no more before the timeout).
    next_bookmark: Option<Instant>,
    /// Where the watch started: the real cacher sends a watcher only events, bookmarks included,
    /// newer than that (so a bookmark may repeat the latest event's resourceVersion).
    from_rv: u64,
    id: u64,
    done: bool,
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        self.api.close_watcher(self.id);
    }
}

fn line(v: &serde_json::Value) -> Bytes {
    let mut s = serde_json::to_vec(v).expect("JSON values serialize");
    s.push(b'\n');
    Bytes::from(s)
}

/// The ERROR event a 410 ends a watch with.
pub fn gone_event(e: &ApiError) -> Bytes {
    line(&json!({"type": "ERROR", "object": e.to_status()}))
}

impl WatchStream {
    /// A watch starting with `start` (its initial events).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        api: ApiServer,
        ty: ResourceType,
        ns: Option<String>,
        info: RequestInfo,
        start: WatchStart,
        query: &super::query::Query,
        timeout: Duration,
    ) -> WatchStream {
        let now = Instant::now();
        let watcher = Watcher {
            id: 0,
            resource: ty.qualified(),
            namespace: ns.clone(),
            user_agent: info.user_agent.clone(),
            label_selector: query.get("labelSelector").unwrap_or_default().to_string(),
            field_selector: query.get("fieldSelector").unwrap_or_default().to_string(),
            sent_rv: 0,
        };
        let id = api.open_watcher(watcher);
        let changed = api.inner.changed.subscribe();
        let interval = api.inner.bookmark_interval;
        let mut w = WatchStream {
            api,
            ty,
            ns,
            filter: start.filter,
            info,
            after_rv: start.after_rv,
            pending: VecDeque::new(),
            changed,
            deadline: now + timeout,
            bookmarks: query.flag("allowWatchBookmarks"),
            next_bookmark: None,
            from_rv: start.from_rv,
            id,
            done: false,
        };
        w.next_bookmark = w.bookmark_after(now, interval);
        let delay = w.delay();
        for e in start.events {
            w.queue(now + delay, &e);
        }
        w
    }

    /// The real cacher's `nextBookmarkTime`: the earlier of `now + interval` and 2 s before the
    /// deadline, `None` when that is already past.
    fn bookmark_after(&self, now: Instant, interval: Duration) -> Option<Instant> {
        let pre_timeout = self.deadline.checked_sub(PRE_TIMEOUT_BOOKMARK).unwrap_or(now);
        let at = (now + interval).min(pre_timeout);
        (at >= now).then_some(at)
    }

    fn queue(&mut self, due: Instant, e: &WatchEvent) {
        self.pending.push_back((due, line(&e.to_json()), e.rv));
    }

    fn delay(&self) -> Duration {
        self.api
            .fault_for(&self.info, |a| if let FaultAction::DelayWatch(d) = a { Some(*d) } else { None })
            .map_or(Duration::ZERO, |(_, d)| d)
    }

    /// The watch faults that end or silence it, if one is installed now.
    fn ending_fault(&self) -> Option<(String, FaultAction)> {
        self.api.fault_for(&self.info, |a| match a {
            FaultAction::WatchGone | FaultAction::WatchCut { .. } => Some(a.clone()),
            _ => None,
        })
    }

    fn pull(&mut self) -> Result<(), ApiError> {
        let (events, rv) = self.api.read(|s| {
            let events = s.watch_next(&self.ty, self.ns.as_deref(), &self.filter, self.after_rv);
            (events, s.rv())
        });
        let events: Vec<WatchEvent> = events?;
        let due = Instant::now() + self.delay();
        for e in &events {
            self.queue(due, e);
        }
        self.after_rv = rv.max(self.after_rv);
        Ok(())
    }

    /// The next chunk, or `None` when the watch ends.
    async fn next(&mut self) -> Option<Chunk> {
        loop {
            if self.done {
                return None;
            }
            if let Some((label, action)) = self.ending_fault() {
                self.api.fault_hit(&label, &self.info);
                self.done = true;
                match action {
                    FaultAction::WatchGone => {
                        let rv = self.api.rv();
                        let e = ApiError::expired(format!("too old resource version: {} ({rv})", self.after_rv));
                        return Some(Ok(Frame::data(gone_event(&e))));
                    }
                    // Silent: nothing more is sent; the server still ends the stream at its
                    // timeoutSeconds (as a stalled watch cache would).
                    FaultAction::WatchCut { silent: true } => {
                        tokio::time::sleep_until(self.deadline).await;
                        return None;
                    }
                    _ => return Some(Err(std::io::Error::other("kubesim: watch stream cut"))),
                }
            }
            let now = Instant::now();
            if self.pending.front().is_some_and(|(due, _, _)| *due <= now) {
                let (_, bytes, rv) = self.pending.pop_front().expect("checked");
                self.api.watcher_sent(self.id, rv);
                return Some(Ok(Frame::data(bytes)));
            }
            if let Err(e) = self.pull() {
                self.done = true;
                return Some(Ok(Frame::data(gone_event(&e))));
            }
            if self.pending.front().is_some_and(|(due, _, _)| *due <= Instant::now()) {
                continue;
            }
            let due = self.pending.front().map(|(d, _, _)| *d);
            let bookmark_at = self.next_bookmark.filter(|_| self.bookmarks);
            tokio::select! {
                changed = self.changed.changed() => if changed.is_err() { self.done = true },
                () = tokio::time::sleep_until(self.deadline) => self.done = true,
                () = sleep_opt(due) => {}
                () = sleep_opt(bookmark_at) => {
                    let now = Instant::now();
                    if self.after_rv > self.from_rv {
                        let b = WatchEvent::bookmark(&self.ty, self.after_rv, false);
                        self.queue(now, &b);
                    }
                    self.next_bookmark = self.bookmark_after(now + Duration::from_millis(1), self.api.inner.bookmark_interval);
                }
            }
        }
    }

    /// The stream of chunks for the response body.
    pub fn into_stream(self) -> impl futures::Stream<Item = Chunk> + Send {
        futures::stream::unfold(self, |mut w| async move { w.next().await.map(|c| (c, w)) })
    }
}

async fn sleep_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
