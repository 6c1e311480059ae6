//! The local-process provider: a script in the repository fetches the real server, starts it on
//! loopback and stops it.
//!
//! The script's contract (Kafka's is `fidelity/scripts/kafka-local.sh`):
//! - `available` exits 0 when `start` can run without downloading; otherwise it prints one line
//!   saying why and how to fix it, and exits 1 (a runtime is missing), 2 (the server is not
//!   fetched, and `fetch` can fetch it) or 3 (not fetched, and `fetch` cannot run here);
//! - `fetch` downloads into a cache that later runs reuse;
//! - `start --dir DIR --watch-pid PID` starts a fresh server whose state lives in `DIR`, waits
//!   until it answers, prints its address as the last line of stdout, and stops the server when
//!   process `PID` exits (so a crashed test leaves nothing running);
//! - `stop --dir DIR` stops it; `DIR/server.log` is its log.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::Error;
use crate::counterpart::{Attempt, Counterpart, Provider, required};

/// The environment variable that lets a test fetch the server (downloading) when it is not cached.
pub const FETCH_ENV: &str = "FIDELITY_FETCH";
/// The environment variable that keeps the server's directory (config, data, log) after it stops.
pub const KEEP_ENV: &str = "FIDELITY_KEEP";
/// How many log lines [`Counterpart::logs`] gives.
pub const LOG_LINES_MAX: usize = 200;

/// A server started by a script (see the module docs for the script's contract).
#[derive(Debug, Clone)]
pub struct LocalScript {
    /// The script.
    pub script: PathBuf,
    /// What it starts, for reports (`Apache Kafka`).
    pub what: &'static str,
    /// Where each started server gets its directory (a fresh subdirectory per start).
    pub work_dir: PathBuf,
}

/// A server this process started with a [`LocalScript`]; dropping it stops the server.
#[derive(Debug)]
pub struct LocalProcess {
    script: PathBuf,
    dir: PathBuf,
    address: String,
    describe: String,
}

impl LocalScript {
    fn command(&self) -> Command {
        let mut c = Command::new("bash");
        c.arg(&self.script);
        c
    }

    fn fetch_allowed() -> bool {
        required() || std::env::var(FETCH_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
    }

    fn run(&self, what: &str, args: &[&str], inherit_stderr: bool) -> Result<std::process::Output, Error> {
        let mut c = self.command();
        c.args(args).stdin(Stdio::null()).stdout(Stdio::piped());
        c.stderr(if inherit_stderr { Stdio::inherit() } else { Stdio::piped() });
        c.output().map_err(|source| Error::Io { what: format!("running {} {what}", self.script.display()), source })
    }
}

impl Provider for LocalScript {
    fn name(&self) -> &'static str {
        "local"
    }

    fn start(&self) -> Result<Attempt, Error> {
        if !self.script.is_file() {
            return Ok(Attempt::Unavailable(format!("{} is missing", self.script.display())));
        }
        let available = self.run("available", &["available"], false)?;
        let reason = String::from_utf8_lossy(&available.stdout).trim().to_string();
        match available.status.code() {
            Some(0) => {}
            Some(2) if Self::fetch_allowed() => {
                let fetched = self.run("fetch", &["fetch"], true)?;
                if !fetched.status.success() {
                    return Err(Error::Start {
                        provider: "local",
                        reason: format!("fetch failed: {reason}"),
                        logs: None,
                    });
                }
            }
            Some(2) => return Ok(Attempt::Unavailable(format!("{reason}, or set {FETCH_ENV}=1"))),
            _ => return Ok(Attempt::Unavailable(reason)),
        }
        static STARTS: AtomicUsize = AtomicUsize::new(0);
        let dir = self.work_dir.join(format!("{}-{}", std::process::id(), STARTS.fetch_add(1, Ordering::Relaxed)));
        let dir_arg = dir.to_string_lossy().to_string();
        let pid = std::process::id().to_string();
        let started = self.run("start", &["start", "--dir", &dir_arg, "--watch-pid", &pid], false)?;
        let stderr = String::from_utf8_lossy(&started.stderr).to_string();
        let address = String::from_utf8_lossy(&started.stdout).lines().last().unwrap_or_default().trim().to_string();
        if !started.status.success() || address.is_empty() {
            return Err(Error::Start {
                provider: "local",
                reason: format!("{} start exited with {}: {}", self.script.display(), started.status, stderr.trim()),
                logs: read_tail(&dir.join("server.log")),
            });
        }
        let describe = format!("{}, local process, {address} (logs in {})", self.what, dir.display());
        Ok(Attempt::Ready(Box::new(LocalProcess { script: self.script.clone(), dir, address, describe })))
    }
}

/// The last [`LOG_LINES_MAX`] lines of a file.
fn read_tail(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    Some(lines[lines.len().saturating_sub(LOG_LINES_MAX)..].join("\n"))
}

impl Counterpart for LocalProcess {
    fn address(&self) -> &str {
        &self.address
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn logs(&self) -> Option<String> {
        read_tail(&self.dir.join("server.log"))
    }
}

impl Drop for LocalProcess {
    fn drop(&mut self) {
        let stopped = Command::new("bash")
            .arg(&self.script)
            .args(["stop", "--dir"])
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if stopped.is_ok_and(|s| s.success()) && std::env::var_os(KEEP_ENV).is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Where local servers (brokers, API servers) keep their directories: `FIDELITY_WORK_DIR`, else `target/fidelity` of
/// the workspace (`CARGO_TARGET_DIR` when set).
pub fn work_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FIDELITY_WORK_DIR") {
        return PathBuf::from(dir);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("target"));
    target.join("fidelity")
}
