//! The layering of `sim`'s modules (see the crate docs): no import cycle between its files or its
//! top-level modules, and every top-level module imports only from the layers below it.

#[path = "support/layers.rs"]
mod layers;

use std::path::Path;

/// `sim`'s top-level modules, bottom to top (as the crate docs draw them). A module may import
/// from modules before it in this list, never from one after it.
const ORDER: &[&str] = &[
    "seed",
    "input",
    "oracle",
    "history",
    "outcome",
    "swarm",
    "report",
    "signature",
    "seed_base",
    "runtime",
    "trace",
    "checks",
    "recorder",
    "driver",
    "fault",
    "net",
    "run",
    "workload",
    "check",
    "nemesis",
    "node",
    "fuzz",
    "minimize",
    "prelude",
];

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_file_imports_itself_through_others() {
    let layers = layers::scan(&src());
    let cycles = layers.file_cycles();
    assert!(cycles.is_empty(), "import cycles between files of sim/src:\n{}", layers::describe(&layers.files, &cycles));
}

#[test]
fn no_top_level_module_imports_itself_through_others() {
    let layers = layers::scan(&src());
    let cycles = layers.module_cycles();
    assert!(cycles.is_empty(), "import cycles between modules of sim:\n{}", layers::describe(&layers.modules, &cycles));
}

#[test]
fn every_module_imports_only_from_below() {
    let layers = layers::scan(&src());
    let rank = |m: &str| ORDER.iter().position(|x| *x == m);
    let mut wrong = Vec::new();
    for (from, tos) in &layers.modules {
        if from == "crate" {
            continue;
        }
        let Some(r) = rank(from) else {
            wrong.push(format!("{from} is not in ORDER (add it where it belongs)"));
            continue;
        };
        for to in tos {
            match rank(to) {
                Some(t) if t < r => {}
                Some(_) => wrong.push(format!("{from} imports {to}, which is not below it")),
                None => wrong.push(format!("{to} (imported by {from}) is not in ORDER")),
            }
        }
    }
    assert!(wrong.is_empty(), "the layering of sim/src (ORDER) is broken:\n{}", wrong.join("\n"));
}

#[test]
fn the_scanner_finds_a_cycle() {
    let dir = std::env::temp_dir().join(format!("sim-layers-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).expect("a temp dir");
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\npub use b::B;\n").expect("write");
    std::fs::write(dir.join("a/mod.rs"), "mod inner;\nuse crate::b::B; // crate::c::X in a comment\n").expect("write");
    std::fs::write(dir.join("a/inner.rs"), "pub struct A;\nconst S: &str = \"crate::b\";\n").expect("write");
    std::fs::write(dir.join("b.rs"), "pub struct B;\nfn f() { let _ = super::a::inner::A; }\n").expect("write");
    let layers = layers::scan(&dir);
    std::fs::remove_dir_all(&dir).expect("clean up");
    assert_eq!(layers.file_cycles(), Vec::<Vec<String>>::new(), "{:?}", layers.files);
    assert!(layers.files["b.rs"].contains("a/inner.rs"), "{:?}", layers.files);
    assert_eq!(layers.modules["b"].iter().collect::<Vec<_>>(), vec!["a"]);
    assert_eq!(layers.modules["a"].iter().collect::<Vec<_>>(), vec!["b"]);
    assert_eq!(layers.module_cycles(), vec![vec!["a".to_string(), "b".to_string()]]);
}
