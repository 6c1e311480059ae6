//! Records the build's identity (compiler, target, rustflags) for run reports.

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let version = std::process::Command::new(&rustc)
        .arg("-V")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "rustc (unknown)".to_string());
    let target = std::env::var("TARGET").unwrap_or_default();
    let rustflags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default().replace('\u{1f}', " ");
    println!("cargo:rustc-env=SIM_BUILD_RUSTC={version}");
    println!("cargo:rustc-env=SIM_BUILD_TARGET={target}");
    println!("cargo:rustc-env=SIM_BUILD_RUSTFLAGS={rustflags}");
    println!("cargo:rerun-if-env-changed=RUSTC");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
}
