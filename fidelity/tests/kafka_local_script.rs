//! `fidelity/scripts/kafka-local.sh` on what is left behind: a stale pid file whose pid now
//! names another process, and a `--dir` that no earlier start made. Neither needs Java or a
//! broker: the script must refuse before it would touch them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kafka-local-script-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

fn script(command: &str, dir: &Path) -> Output {
    let mut c = Command::new("bash");
    c.arg(fidelity::kafka::script()).args([command, "--dir"]).arg(dir).stdin(Stdio::null());
    c.output().expect("bash runs the script")
}

#[test]
fn a_stale_pid_file_naming_another_process_is_not_a_broker_and_stop_leaves_that_process_alone() {
    let dir = scratch("stale");
    let mut other = Command::new("sleep").arg("600").spawn().expect("sleep runs");
    std::fs::write(dir.join("kafka.pid"), format!("{}\n", other.id())).expect("a pid file");

    let status = script("status", &dir);
    let stop = script("stop", &dir);
    let alive = other.try_wait().expect("the child's status").is_none();
    let _ = other.kill();
    let _ = other.wait();
    let _ = std::fs::remove_dir_all(&dir);

    assert_eq!(status.status.code(), Some(3), "status: {}", String::from_utf8_lossy(&status.stderr));
    assert!(stop.status.success(), "stop: {}", String::from_utf8_lossy(&stop.stderr));
    assert!(
        String::from_utf8_lossy(&stop.stderr).contains("no broker runs"),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    assert!(alive, "stop killed the unrelated process the stale pid file named");
}

#[test]
fn start_refuses_to_delete_a_directory_no_earlier_start_made() {
    let dir = scratch("precious");
    std::fs::write(dir.join("precious.txt"), "keep me").expect("a file");
    // A cache that claims to hold the jars and a `java` that does nothing: start gets as far as
    // deleting the directory without downloading or running anything.
    let cache = scratch("cache");
    let libs = cache.join(fidelity::kafka::VERSION_DEFAULT).join("libs");
    std::fs::create_dir_all(&libs).expect("libs");
    std::fs::write(libs.join(".complete"), "").expect("marker");
    let java = Path::new("/bin/true");

    let started = Command::new("bash")
        .arg(fidelity::kafka::script())
        .args(["start", "--dir"])
        .arg(&dir)
        .env("KAFKA_VERSION", fidelity::kafka::VERSION_DEFAULT)
        .env("KAFKA_LOCAL_CACHE", &cache)
        .env("JAVA", java)
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
