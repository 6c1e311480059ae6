//! The Kubernetes differential suite: every scenario runs against kubesim (a fresh loopback
//! server each) and against a real kube-apiserver (one, shared; each scenario works in its own
//! namespace), and the normalized observations are compared step by step.
//!
//! The real server comes from `FIDELITY_KUBECONFIG` or `KUBE_APISERVER` + `KUBE_TOKEN`, a k3s
//! container (`--features containers`, when a Docker engine answers), or a local process
//! (`fidelity/scripts/kube-local.sh`: kube-apiserver and etcd built from the Go module proxy,
//! cached). Without one, the suite prints `skipped: no counterpart (…)` and counts every scenario
//! as skipped; with `FIDELITY_REQUIRE=1` that is a failure.
//!
//! `cargo test -p fidelity --test kube_differential -- FILTER` runs the scenarios whose names
//! contain FILTER; `--list` lists them; `FIDELITY_SHOW=1` shows every scenario side by side.

mod crud;
mod lists;
mod objects;
mod patches;
mod runtime;
mod support;
mod watches;

use std::process::ExitCode;

use fidelity::runner::{Scenario, Suite};
#[allow(unused_imports)]
use fidelity::{Known, scenario};

fn scenarios() -> Vec<Scenario> {
    let mut all = crud::scenarios();
    // Each module lists its own scenarios (so that several people can add to the suite at once).
    all.extend(lists::scenarios());
    all.extend(watches::scenarios());
    all.extend(patches::scenarios());
    all.extend(objects::scenarios());
    all.extend(runtime::scenarios());
    all
}

/// The known-differences page.
const KNOWN_PAGE: &str = include_str!("../../../docs/fidelity/kube.md");

fn main() -> ExitCode {
    let suite = Suite {
        name: "kube",
        fake_name: "kubesim",
        real_name: "kube-apiserver",
        start_fake: support::start_kubesim,
        fake_on_counterpart: false,
        scenarios: scenarios(),
    };
    suite.main(KNOWN_PAGE, "docs/fidelity/kube.md", fidelity::kube::counterpart)
}
