//! The cargo profile this test binary was built in, as the replay line spells it.

/// `""` for the dev profile, `" --release"` for release, `" --profile <name>"` otherwise: read
/// from the binary's path (`target/<profile>/deps/<test>-<hash>`), so an assertion on a replay
/// line holds under `cargo test` and `cargo test --release` alike.
pub fn cargo_flag() -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe.parent().and_then(std::path::Path::parent).and_then(std::path::Path::file_name);
    match dir.and_then(|d| d.to_str()) {
        Some("debug") | None => String::new(),
        Some("release") => " --release".to_string(),
        Some(other) => format!(" --profile {other}"),
    }
}
