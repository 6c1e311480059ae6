//! `deploy/fleet-job.yaml` (the fleet as a Kubernetes Indexed Job) and `deploy/fleet-results.yaml`
//! (the pod that copies results out), checked two ways:
//!
//! - their shape, without a server: the Job is Indexed, its sizes, budget and deadline agree, its
//!   pods share the volume, and the pod's script, run here with a stand-in `walkthroughs`, runs
//!   shard `JOB_COMPLETION_INDEX` of `SHARDS` with its JSON lines and traces on the volume;
//! - against a real kube-apiserver: every document is created with a server-side dry run
//!   (`dryRun=All`, `fieldValidation=Strict`: an unknown field is refused too), and broken copies
//!   (a wrong type, a misspelt field, an Indexed Job without completions) are refused.
//!
//! The server is fidelity's Kubernetes counterpart (`FIDELITY_KUBECONFIG`, a k3s container, or
//! `fidelity/scripts/kube-local.sh`, see [`fidelity::kube::counterpart`]); without one the server
//! tests print why and pass as skipped, and with `FIDELITY_REQUIRE=1` they fail. Dry runs write
//! nothing, so any cluster's kubeconfig may be used.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use fidelity::{Counterpart, Selection};
use kube::core::{DynamicObject, GroupVersionKind, Request, Resource as _};
use kube::discovery::Scope;
use kube::{Client, api::PostParams};
use serde_json::{Value, json};

const JOB_YAML: &str = include_str!("../../deploy/fleet-job.yaml");
const RESULTS_YAML: &str = include_str!("../../deploy/fleet-results.yaml");
/// The namespace the dry runs create in (the manifests name none; `kubectl apply` uses the
/// context's).
const NAMESPACE: &str = "default";
/// What the Job's deadline must leave beyond the budget: the round running when the budget
/// ends, pulling the image, scheduling.
const DEADLINE_MARGIN_SECS: u64 = 300;

/// Every YAML document of `text`, as JSON values.
fn documents(name: &str, text: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("{name} is not YAML: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// The one document of `kind` in `docs`.
fn the<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind} expected, found {}", found.len());
    found[0]
}

fn job() -> Value {
    the(&documents("deploy/fleet-job.yaml", JOB_YAML), "Job").clone()
}

/// The Job's one container.
fn shard_container(job: &Value) -> &Value {
    let containers = job["spec"]["template"]["spec"]["containers"].as_array().expect("containers is a list");
    assert_eq!(containers.len(), 1, "the shard pod has one container");
    &containers[0]
}

/// The container's env values given literally (`valueFrom` ones are left out).
fn literal_env(container: &Value) -> BTreeMap<String, String> {
    let env = container["env"].as_array().expect("env is a list");
    env.iter().filter_map(|e| Some((e["name"].as_str()?.to_string(), e["value"].as_str()?.to_string()))).collect()
}

fn env_entry<'a>(container: &'a Value, name: &str) -> &'a Value {
    let env = container["env"].as_array().expect("env is a list");
    env.iter().find(|e| e["name"] == name).unwrap_or_else(|| panic!("the shard container sets no {name}"))
}

/// `30s`, `20m`, `1h` in seconds (the budgets the workflows and the manifest use).
fn budget_secs(budget: &str) -> u64 {
    let (number, unit) = budget.split_at(budget.len().saturating_sub(1));
    let n: u64 = number.parse().unwrap_or_else(|_| panic!("BUDGET={budget}: not N followed by s, m or h"));
    match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => panic!("BUDGET={budget}: not N followed by s, m or h"),
    }
}

fn int(value: &Value, what: &str) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("{what} is not a whole number: {value}"))
}

#[test]
fn the_job_is_indexed_with_one_completion_per_shard() {
    let job = job();
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed", "pods must get JOB_COMPLETION_INDEX");
    let completions = int(&spec["completions"], "spec.completions");
    let shards: u64 = literal_env(shard_container(&job))["SHARDS"].parse().expect("SHARDS is a number");
    assert_eq!(completions, shards, "spec.completions and the SHARDS env value must agree");
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Never", "podFailurePolicy needs restartPolicy Never");
    // A retried shard must not be retried forever, and a finding (exit 1) is not retried.
    assert!(spec["backoffLimitPerIndex"].is_u64() || spec["backoffLimit"].is_u64(), "a retry limit is set");
    let requests = &shard_container(&job)["resources"]["requests"];
    assert_eq!(requests["cpu"], "1", "each shard asks for one CPU");
    assert_eq!(literal_env(shard_container(&job)).get("SIM_JOBS").map(String::as_str), Some("1"));
}

#[test]
fn the_deadline_covers_the_budget_in_every_wave_of_pods() {
    let job = job();
    let spec = &job["spec"];
    let completions = int(&spec["completions"], "spec.completions");
    let parallelism = int(&spec["parallelism"], "spec.parallelism");
    let waves = completions.div_ceil(parallelism.max(1));
    let budget = budget_secs(&literal_env(shard_container(&job))["BUDGET"]);
    let deadline = int(&spec["activeDeadlineSeconds"], "spec.activeDeadlineSeconds");
    assert!(
        deadline >= waves * budget + DEADLINE_MARGIN_SECS,
        "activeDeadlineSeconds {deadline} < {waves} wave(s) x {budget} s budget + {DEADLINE_MARGIN_SECS} s"
    );
}

#[test]
fn every_shard_and_the_results_pod_share_one_read_write_many_volume() {
    let docs = documents("deploy/fleet-job.yaml", JOB_YAML);
    let claim = the(&docs, "PersistentVolumeClaim");
    let name = claim["metadata"]["name"].as_str().expect("the claim has a name");
    assert_eq!(claim["spec"]["accessModes"], json!(["ReadWriteMany"]), "pods on many nodes write to it at once");
    let results_pod = the(&documents("deploy/fleet-results.yaml", RESULTS_YAML), "Pod").clone();
    for (what, pod) in
        [("the Job's pods", &job()["spec"]["template"]["spec"]), ("the results pod", &results_pod["spec"])]
    {
        let volumes = pod["volumes"].as_array().expect("volumes is a list");
        assert!(
            volumes.iter().any(|v| v["persistentVolumeClaim"]["claimName"] == name),
            "{what} do not mount the claim {name}"
        );
    }
    let container = shard_container(&job()).clone();
    let mount = container["volumeMounts"][0]["mountPath"].as_str().expect("a mount path").to_string();
    assert_eq!(literal_env(&container)["RESULTS"], mount, "RESULTS names the volume's mount path");
    let salt = &env_entry(&container, "SIM_SEED_SALT")["valueFrom"]["fieldRef"]["fieldPath"];
    assert_eq!(salt, "metadata.labels['batch.kubernetes.io/controller-uid']", "each Job draws its own seeds");
}

/// A directory for one test, empty.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fleet-manifest-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// Runs the shard container's `command` + `args` as the kubelet would, with its literal env,
/// `JOB_COMPLETION_INDEX=index`, the salt the downward API would give, `RESULTS` pointed at
/// `results`, and a stand-in `walkthroughs` on PATH that records what it was run with.
fn run_pod_script(index: u32, salt: &str, results: &Path, bin: &Path) -> BTreeMap<String, String> {
    let container = shard_container(&job()).clone();
    let command: Vec<String> =
        serde_json::from_value(container["command"].clone()).expect("command is a list of strings");
    let args: Vec<String> = serde_json::from_value(container["args"].clone()).expect("args is a list of strings");
    assert_eq!(command, ["sh", "-c"], "the shard runs its script with sh -c");
    let record = results.join("stand-in.out");
    let stand_in = bin.join("walkthroughs");
    std::fs::write(
        &stand_in,
        format!(
            "#!/bin/sh\n{{ echo \"SIM_SHARD=$SIM_SHARD\"; echo \"SIM_JSON=$SIM_JSON\"; echo \"SIM_JOBS=$SIM_JOBS\"; \
             echo \"SIM_SEED_SALT=$SIM_SEED_SALT\"; echo \"PWD=$(pwd -P)\"; echo \"ARGS=$*\"; }} > '{}'\n",
            record.display()
        ),
    )
    .expect("the stand-in");
    let chmod = Command::new("chmod").arg("+x").arg(&stand_in).status().expect("chmod runs");
    assert!(chmod.success());
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(&command[0])
        .args(&command[1..])
        .args(&args)
        .env_clear()
        .envs(literal_env(&container))
        .env("RESULTS", results)
        .env("JOB_COMPLETION_INDEX", index.to_string())
        .env("SIM_SEED_SALT", salt)
        .env("PATH", path)
        .output()
        .expect("sh runs the pod's script");
    assert!(out.status.success(), "the pod's script failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&record).expect("the script ran walkthroughs");
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn the_pod_script_runs_shard_index_of_shards_with_its_results_on_the_volume() {
    let dir = scratch("script");
    let (results, bin) = (dir.join("results"), dir.join("bin"));
    std::fs::create_dir_all(&bin).expect("bin");
    // What a pod of this shard that was lost before left behind: a retry starts afresh.
    let run = results.join("uid-1234");
    std::fs::create_dir_all(run.join("shard-3/target/sim/old")).expect("stale traces");
    std::fs::write(run.join("shard-3.jsonl"), "{\"stale\":true}\n").expect("stale lines");

    let seen = run_pod_script(3, "uid-1234", &results, &bin);
    let env = literal_env(shard_container(&job()));
    let run = run.canonicalize().expect("the run directory exists");
    let stale_left = run.join("shard-3.jsonl").exists() || run.join("shard-3/target/sim/old").exists();
    let _ = std::fs::remove_dir_all(&dir);

    assert_eq!(seen["SIM_SHARD"], format!("3/{}", env["SHARDS"]));
    assert_eq!(seen["SIM_JSON"], run.join("shard-3.jsonl").to_string_lossy());
    assert_eq!(seen["PWD"], run.join("shard-3").to_string_lossy(), "traces go under the shard's directory");
    assert_eq!(seen["SIM_SEED_SALT"], "uid-1234");
    assert_eq!(seen["SIM_JOBS"], "1");
    assert_eq!(
        seen["ARGS"],
        format!("--base-seed build --budget {} --variants correct --canary {}", env["BUDGET"], env["CANARY"])
    );
    assert!(!stale_left, "a retried shard removes what its lost pod wrote");
}

/// The shared Kubernetes counterpart (started once per test binary; a local one stops when this
/// process exits), or why there is none.
fn counterpart() -> Result<&'static dyn Counterpart, String> {
    static SERVER: OnceLock<Result<Box<dyn Counterpart>, String>> = OnceLock::new();
    let server = SERVER.get_or_init(|| match fidelity::kube::counterpart() {
        Ok(Selection::Ready(c)) => {
            println!("fleet_manifest: dry runs against {}", c.describe());
            Ok(c)
        }
        Ok(Selection::Skipped(skip)) => Err(skip.to_string()),
        Err(e) => panic!("fleet_manifest: the Kubernetes counterpart did not start: {e}"),
    });
    server.as_ref().map(|c| c.as_ref()).map_err(Clone::clone)
}

/// Runs `body` with a client for the counterpart; without one, prints why and returns (a skip),
/// or fails under `FIDELITY_REQUIRE`.
fn with_server(test: &str, body: impl AsyncFnOnce(Client)) {
    let server = match counterpart() {
        Ok(server) => server,
        Err(skip) if fidelity::required() => panic!("{test}: FIDELITY_REQUIRE is set: {skip}"),
        Err(skip) => {
            println!("{test}: {skip}");
            return;
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    runtime.block_on(async {
        let client = fidelity::kube::client(server.address()).await.expect("a client for the counterpart");
        body(client).await;
    });
}

/// Creates `doc` with a server-side dry run: `POST …?dryRun=All&fieldValidation=Strict` to the
/// resource discovery names for its apiVersion and kind (in [`NAMESPACE`] if namespaced).
///
/// # Errors
/// Discovery does not know the kind, or the server refused the object (`kube::Error::Api`).
async fn dry_run_create(client: &Client, doc: &Value) -> Result<DynamicObject, kube::Error> {
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, doc["kind"].as_str().unwrap_or_default());
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk).await?;
    let namespace = (capabilities.scope == Scope::Namespaced).then_some(NAMESPACE);
    let url = DynamicObject::url_path(&resource, namespace);
    let body = serde_json::to_vec(doc).expect("a JSON value serializes");
    let params = PostParams { dry_run: true, ..PostParams::default() };
    let mut request = Request::new(url).create(&params, body).map_err(kube::Error::BuildRequest)?;
    // Strict: an unknown or duplicated field is an error, not a warning the server drops.
    let strict = format!("{}&fieldValidation=Strict", request.uri());
    *request.uri_mut() = strict.parse().expect("the URI with one more query parameter parses");
    client.request::<DynamicObject>(request).await
}

#[test]
fn every_manifest_document_is_accepted_by_a_server_side_dry_run() {
    with_server("every_manifest_document_is_accepted_by_a_server_side_dry_run", async |client| {
        let mut docs = documents("deploy/fleet-job.yaml", JOB_YAML);
        docs.extend(documents("deploy/fleet-results.yaml", RESULTS_YAML));
        assert_eq!(docs.len(), 3, "a claim and a Job, and the results pod");
        for doc in &docs {
            let what = format!("{} {}", doc["kind"], doc["metadata"]["name"]);
            let created = dry_run_create(&client, doc).await.unwrap_or_else(|e| panic!("{what} was refused: {e}"));
            assert_eq!(created.metadata.name.as_deref(), doc["metadata"]["name"].as_str(), "{what}");
        }
    });
}

/// A copy of the Job with `edit` applied.
fn broken_job(edit: impl FnOnce(&mut Value)) -> Value {
    let mut job = job();
    edit(&mut job);
    job
}

#[test]
fn broken_copies_of_the_job_are_refused_by_the_servers_dry_run() {
    let cases: Vec<(&str, Value, &str)> = vec![
        ("completions of the wrong type", broken_job(|j| j["spec"]["completions"] = json!("sixteen")), "completions"),
        (
            "a misspelt field",
            broken_job(|j| {
                let spec = j["spec"].as_object_mut().expect("spec is a map");
                let mode = spec.remove("completionMode").expect("completionMode");
                spec.insert("completionMod".to_string(), mode);
            }),
            "completionMod",
        ),
        (
            "an Indexed Job without completions",
            broken_job(|j| {
                j["spec"].as_object_mut().expect("spec is a map").remove("completions");
            }),
            "completions",
        ),
        (
            "a CPU request that is no quantity",
            broken_job(|j| {
                j["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("one")
            }),
            "quantit",
        ),
    ];
    with_server("broken_copies_of_the_job_are_refused_by_the_servers_dry_run", async |client| {
        for (what, doc, names) in cases {
            match dry_run_create(&client, &doc).await {
                Err(kube::Error::Api(status)) => {
                    assert!(
                        status.code == 400 || status.code == 422,
                        "{what}: refused with {} {}: {}",
                        status.code,
                        status.reason,
                        status.message
                    );
                    assert!(
                        status.message.contains(names),
                        "{what}: the refusal does not name {names}: {}",
                        status.message
                    );
                    println!("{what}: refused: {} {}: {}", status.code, status.reason, status.message);
                }
                Err(e) => panic!("{what}: failed before the server judged it: {e}"),
                Ok(_) => panic!("{what}: the server accepted it"),
            }
        }
    });
}
