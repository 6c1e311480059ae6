//! kafkasim's modules form layers: no file imports one that imports it back, directly or
//! through others (`support/layers.rs` says what counts as an import).

#[path = "support/layers.rs"]
mod layers;

use std::path::Path;

#[test]
fn kafkasim_src_has_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let imports = layers::scan(&src);
    assert!(imports.contains_key("broker/cluster.rs"), "the scanner reads the tree: {:?}", imports.keys());
    assert!(
        imports["groups/join.rs"].contains_key("groups/coordinator.rs"),
        "the scanner sees `use super::…`: {:?}",
        imports["groups/join.rs"]
    );
    let cycles = layers::cycles(&imports);
    assert!(cycles.is_empty(), "import cycles in kafkasim/src:\n{}", layers::describe(&imports, &cycles));
}

#[test]
fn the_scanner_finds_a_cycle_through_a_parent() {
    let dir = std::env::temp_dir().join(format!("kafkasim-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\nuse crate::b::{self, B};\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "mod c;\npub use c::C; // crate::b::nothing\n").unwrap();
    std::fs::write(dir.join("a/c.rs"), "use super::super::b::B;\nfn f() -> &'static str { \"crate::a\" }\n").unwrap();
    std::fs::write(dir.join("b.rs"), "pub struct B(crate::a::C);\n").unwrap();
    let imports = layers::scan(&dir);
    let cycles = layers::cycles(&imports);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(cycles.len(), 1, "{}", layers::describe(&imports, &cycles));
    let mut files = cycles[0].clone();
    files.sort();
    assert_eq!(files, ["a/c.rs", "a/mod.rs", "b.rs"]);
    assert!(!imports["a/c.rs"].contains_key("a/mod.rs"), "strings are not paths: {:?}", imports["a/c.rs"]);
}
