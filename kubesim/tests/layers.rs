//! kubesim's modules form layers: no file imports one that imports it back, directly or
//! through others (the scanner is kafkasim's, `kafkasim/tests/support/layers.rs`).

#[path = "../../kafkasim/tests/support/layers.rs"]
mod layers;

use std::path::Path;

#[test]
fn kubesim_src_has_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let imports = layers::scan(&src);
    assert!(imports.contains_key("server/mod.rs"), "the scanner reads the tree: {:?}", imports.keys());
    let cycles = layers::cycles(&imports);
    assert!(cycles.is_empty(), "import cycles in kubesim/src:\n{}", layers::describe(&imports, &cycles));
}
