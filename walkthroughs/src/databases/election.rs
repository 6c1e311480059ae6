//! Leader election over a Lease (`coordination.k8s.io/v1`), written as client-go's
//! `leaderelection` does it: every retry period the candidate reads the Lease; it may take it when
//! it is free, its own, or its record has not changed for a lease duration *by the candidate's own
//! observation* (the server does not enforce expiry); it writes with a full update carrying the
//! resourceVersion it read, so of two candidates racing only one wins (the other gets 409). A
//! leader that cannot renew within the renew deadline steps down.
//!
//! The planted bug ([`Write::MergePatch`]) writes the same fields with a JSON merge patch that
//! carries no resourceVersion (as the `kube-leader-election` crate does): the server cannot see
//! the race, so both candidates "win" and act as leader until the next read shows them otherwise.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use sim::node::NodeCtx;
use tokio::time::Instant;

/// The Lease's timing, controller-runtime's defaults (client-go requires
/// `duration > renew_deadline > 1.2 × retry`).
#[derive(Copy, Clone, Debug)]
pub struct LeaseSettings {
    /// `leaseDurationSeconds`: how long a record is trusted after it was last seen to change.
    pub duration: Duration,
    /// How long a leader keeps trying to renew before it steps down.
    pub renew_deadline: Duration,
    /// The period between tries.
    pub retry: Duration,
}

impl Default for LeaseSettings {
    fn default() -> Self {
        LeaseSettings {
            duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry: Duration::from_secs(2),
        }
    }
}

/// How the candidate writes the Lease.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// A full update with the resourceVersion read (409 on a race): correct.
    Update,
    /// A merge patch without resourceVersion: the planted bug.
    MergePatch,
}

/// One candidate.
pub struct Elector {
    api: Api<Lease>,
    lease: String,
    identity: String,
    settings: LeaseSettings,
    write: Write,
    /// The last record seen (holder, renewTime) and when this candidate first saw it.
    observed: Option<(Option<String>, Option<k8s_openapi::jiff::Timestamp>, Instant)>,
}

impl Elector {
    /// A candidate `identity` for the Lease `lease` of `api`'s namespace.
    pub fn new(api: Api<Lease>, lease: &str, identity: &str, settings: LeaseSettings, write: Write) -> Elector {
        Elector { api, lease: lease.to_string(), identity: identity.to_string(), settings, write, observed: None }
    }

    /// The Lease's settings.
    pub fn settings(&self) -> LeaseSettings {
        self.settings
    }

    /// One try: reads the Lease and takes or renews it when allowed. `Ok(true)` when this
    /// candidate holds it after the try.
    ///
    /// # Errors
    /// The API's error (a 409 is `Ok(false)`, not an error).
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = Instant::now();
        let Some(lease) = self.api.get_opt(&self.lease).await? else {
            return self.create().await;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let record = (spec.holder_identity.clone(), spec.renew_time.as_ref().map(|t| t.0));
        match &self.observed {
            Some((h, r, _)) if *h == record.0 && *r == record.1 => {}
            _ => self.observed = Some((record.0.clone(), record.1, now)),
        }
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let mine = holder.as_deref() == Some(self.identity.as_str());
        let seen_at = self.observed.as_ref().map(|(_, _, at)| *at).unwrap_or(now);
        let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
        if holder.is_some() && !mine && now < seen_at + duration {
            return Ok(false);
        }
        let stamp = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let mut next = spec.clone();
        next.holder_identity = Some(self.identity.clone());
        next.lease_duration_seconds = Some(self.settings.duration.as_secs() as i32);
        next.renew_time = Some(stamp.clone());
        if !mine {
            next.acquire_time = Some(stamp);
            next.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        let written = match self.write {
            Write::Update => {
                let mut updated = lease.clone();
                updated.spec = Some(next);
                self.api.replace(&self.lease, &PostParams::default(), &updated).await
            }
            Write::MergePatch => {
                let patch = serde_json::json!({ "spec": next });
                self.api.patch(&self.lease, &PatchParams::default(), &Patch::Merge(&patch)).await
            }
        };
        match written {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn create(&mut self) -> Result<bool, kube::Error> {
        let stamp = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let lease = Lease {
            metadata: kube::api::ObjectMeta { name: Some(self.lease.clone()), ..Default::default() },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(self.settings.duration.as_secs() as i32),
                acquire_time: Some(stamp.clone()),
                renew_time: Some(stamp),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Tries every retry period until this candidate holds the Lease.
    pub async fn acquire(&mut self) {
        loop {
            if let Ok(true) = self.try_acquire_or_renew().await {
                return;
            }
            tokio::time::sleep(self.settings.retry).await;
        }
    }

    /// Renews every retry period while it can; returns when a renewal did not succeed within the
    /// renew deadline (leadership lost: stop acting as leader now).
    pub async fn hold(&mut self) {
        let mut last = Instant::now();
        loop {
            tokio::time::sleep(self.settings.retry).await;
            let remaining = (last + self.settings.renew_deadline).saturating_duration_since(Instant::now());
            match tokio::time::timeout(remaining, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => last = Instant::now(),
                _ if Instant::now() >= last + self.settings.renew_deadline => return,
                _ => {}
            }
        }
    }

    /// Gives the Lease up (on SIGTERM): holder cleared, duration 1 s, as client-go's
    /// `ReleaseOnCancel`. Best effort.
    pub async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.lease).await else { return };
        let Some(spec) = lease.spec.as_mut() else { return };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        let _ = self.api.replace(&self.lease, &PostParams::default(), &lease).await;
    }

    /// Campaigns as `node` until SIGTERM: acquires the Lease, runs `lead()` (a task of the
    /// node) while holding it, aborts that task when leadership is lost, and on SIGTERM aborts it
    /// and releases the Lease. Records `databases.leader <node> acquired` / `lost`.
    pub async fn campaign(&mut self, node: &NodeCtx, mut lead: impl FnMut() -> tokio::task::JoinHandle<()>) {
        let shutdown = node.shutdown_signal();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                () = self.acquire() => {}
            }
            node.sim().record("databases.leader", node.name(), "acquired");
            let task = lead();
            let stopping = tokio::select! {
                _ = &mut shutdown => true,
                () = self.hold() => false,
            };
            task.abort();
            if stopping {
                self.release().await;
                return;
            }
            node.sim().record("databases.leader", node.name(), "lost");
        }
    }
}
