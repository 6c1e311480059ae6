//! `fidelity/scripts/kube-local.sh` on what is left behind: stale pid files whose pids now name
//! other processes, and a `--dir` that no earlier start made. Neither needs Go or a built
//! kube-apiserver: the script must refuse before it would touch them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kube-local-script-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

fn script(command: &str, dir: &Path) -> Output {
    let mut c = Command::new("bash");
    c.arg(fidelity::kube::script()).args([command, "--dir"]).arg(dir).stdin(Stdio::null());
    c.output().expect("bash runs the script")
}

#[test]
fn stale_pid_files_naming_other_processes_are_not_servers_and_stop_leaves_them_alone() {
    let dir = scratch("stale");
    let mut other = Command::new("sleep").arg("600").spawn().expect("sleep runs");
    for name in ["etcd", "kube-apiserver"] {
        std::fs::write(dir.join(format!("{name}.pid")), format!("{}\n", other.id())).expect("a pid file");
    }

    let status = script("status", &dir);
    let stop = script("stop", &dir);
    let alive = other.try_wait().expect("the child's status").is_none();
    let _ = other.kill();
    let _ = other.wait();
    let left = dir.join("etcd.pid").exists() || dir.join("kube-apiserver.pid").exists();
    let _ = std::fs::remove_dir_all(&dir);

    assert_eq!(status.status.code(), Some(3), "status: {}", String::from_utf8_lossy(&status.stderr));
    assert!(stop.status.success(), "stop: {}", String::from_utf8_lossy(&stop.stderr));
    assert!(alive, "stop killed the unrelated process a stale pid file named");
    assert!(!left, "stop removes the stale pid files");
}

#[test]
fn start_refuses_to_delete_a_directory_no_earlier_start_made() {
    let dir = scratch("precious");
    std::fs::write(dir.join("precious.txt"), "keep me").expect("a file");
    // A cache that claims to hold the binaries: start gets as far as deleting the directory
    // without building or running anything.
    let cache = scratch("cache");
    let bin = cache.join(fidelity::kube::VERSION_DEFAULT).join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    std::fs::write(bin.join(".complete"), "").expect("marker");

    let started = Command::new("bash")
        .arg(fidelity::kube::script())
        .args(["start", "--dir"])
        .arg(&dir)
        .env("KUBE_VERSION", fidelity::kube::VERSION_DEFAULT)
        .env("KUBE_LOCAL_CACHE", &cache)
        .stdin(Stdio::null())
        .output()
        .expect("bash runs the script");
    let kept = dir.join("precious.txt").is_file();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&cache);

    let stderr = String::from_utf8_lossy(&started.stderr);
    assert!(kept, "start deleted a directory it did not make: {stderr}");
    assert!(!started.status.success());
    assert!(stderr.contains("not deleting it"), "{stderr}");
}

#[test]
fn available_says_what_is_missing_and_how_to_get_it() {
    let cache = scratch("empty-cache");
    let out = Command::new("bash")
        .arg(fidelity::kube::script())
        .arg("available")
        .env("KUBE_LOCAL_CACHE", &cache)
        .env("GO", "/nonexistent/go")
        .stdin(Stdio::null())
        .output()
        .expect("bash runs the script");
    let _ = std::fs::remove_dir_all(&cache);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(said.contains("go is not on PATH") && said.contains("fetch"), "{said}");
}
