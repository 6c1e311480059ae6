//! A small scanner of a crate's import graph, for tests that fail on a new import cycle.
//!
//! [`scan`] reads every `.rs` file under a crate's `src` directory and resolves the paths it
//! names — `crate::…`, `super::…`, `self::…`, and paths through a child module the file declares
//! (`mod x;` then `x::…` or `use x::…`) — to the file of the longest module prefix. It builds two
//! graphs: file → files, and top-level module → top-level modules. A path that stops at the crate
//! root (`crate::Ctx`, through `lib.rs`'s re-exports) is an edge to `lib.rs` in the file graph
//! (which has edges to every module it re-exports from), and in the module graph an edge to the
//! module the root re-exports that name from.
//!
//! Comments, strings and character literals are skipped; `super::` inside an inline module
//! (`mod tests { use super::*; }`) resolves from that inline module. Reuse from another crate's
//! tests with `#[path = "../../sim/tests/support/layers.rs"] mod layers;`.

#![allow(dead_code, reason = "each test binary uses a different part of the support code")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A directed graph: node → the nodes it imports.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// A crate's import graphs (see the module docs).
#[derive(Debug, Default)]
pub struct Layers {
    /// File (path relative to `src`, such as `net/host.rs`) → files it imports from.
    pub files: Graph,
    /// Top-level module (`net`, `run`; the root is `crate`) → top-level modules it imports from.
    pub modules: Graph,
}

impl Layers {
    /// The cycles of the file graph (each a strongly connected component of two or more files).
    pub fn file_cycles(&self) -> Vec<Vec<String>> {
        cycles(&self.files)
    }

    /// The cycles of the top-level module graph.
    pub fn module_cycles(&self) -> Vec<Vec<String>> {
        cycles(&self.modules)
    }
}

/// Scans the crate whose sources are under `src` (its `lib.rs` or `main.rs` is the root).
///
/// # Panics
/// If `src` cannot be read.
pub fn scan(src: &Path) -> Layers {
    let mut files = Vec::new();
    collect(src, src, &mut files);
    let by_module: BTreeMap<Vec<String>, String> = files.iter().map(|f| (module_of(f), f.clone())).collect();
    let root_file = by_module.get(&Vec::new()).cloned().unwrap_or_else(|| "lib.rs".into());
    // Names the root re-exports: name → top-level module.
    let mut root_names: BTreeMap<String, String> = BTreeMap::new();
    let mut layers = Layers::default();
    let mut raw: Vec<(String, Vec<Vec<String>>)> = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(src.join(file)).unwrap_or_else(|e| panic!("reading {file}: {e}"));
        let paths = paths_of(&strip(&text), &module_of(file));
        if *file == root_file {
            for p in &paths {
                if p.len() >= 2 {
                    root_names.insert(p.last().cloned().unwrap_or_default(), p[0].clone());
                }
            }
        }
        raw.push((file.clone(), paths));
    }
    for (file, paths) in raw {
        let from_top = top_of(&file);
        let edges = layers.files.entry(file.clone()).or_default();
        let mods = layers.modules.entry(from_top.clone()).or_default();
        for path in paths {
            // The longest prefix of the path that is a module file.
            let target = (0..=path.len()).rev().find_map(|n| by_module.get(&path[..n]).map(|f| (n, f)));
            let Some((n, target)) = target else { continue };
            if *target != file {
                edges.insert(target.clone());
            }
            let to_top = if n == 0 {
                match path.first().and_then(|name| root_names.get(name)) {
                    Some(m) => m.clone(),
                    None => continue,
                }
            } else {
                path[0].clone()
            };
            if to_top != from_top && from_top != "crate" {
                mods.insert(to_top);
            }
        }
    }
    layers
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under the root");
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// `lib.rs` → `[]`, `net/mod.rs` → `[net]`, `net/host.rs` → `[net, host]`.
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

fn top_of(file: &str) -> String {
    module_of(file).first().cloned().unwrap_or_else(|| "crate".to_string())
}

/// The text with comments, string and character literals blanked out.
fn strip(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || (next == Some('#') && !prev_is_ident(&b, i))) {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            while j < b.len() && !(b[j] == '"' && (1..=hashes).all(|k| b.get(j + k) == Some(&'#'))) {
                j += 1;
            }
            i = j + 1 + hashes;
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && (next == Some('\\') || b.get(i + 2) == Some(&'\'')) {
            i += 1;
            while i < b.len() && b[i] != '\'' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev_is_ident(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every path the (stripped) text names, made absolute (segments from the crate root).
fn paths_of(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let chars: Vec<char> = text.chars().collect();
    // Child modules declared in this file (`mod x;`), for relative paths.
    let children: BTreeSet<String> = declared_children(text);
    // Inline modules open at each point: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '{' {
            depth += 1;
            i += 1;
            continue;
        }
        if c == '}' {
            depth = depth.saturating_sub(1);
            if inline.last().is_some_and(|(_, d)| *d > depth) {
                inline.pop();
            }
            i += 1;
            continue;
        }
        if !is_ident(c) || prev_is_ident(&chars, i) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let here: Vec<String> = module.iter().cloned().chain(inline.iter().map(|(n, _)| n.clone())).collect();
        if word == "mod" {
            let rest: String = chars[i..].iter().take(200).collect();
            let rest = rest.trim_start();
            let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            if rest[name.len()..].trim_start().starts_with('{') {
                inline.push((name, depth + 1));
            }
            continue;
        }
        if word == "use" && (start == 0 || !chars[start - 1].is_alphanumeric()) {
            let end = chars[i..].iter().position(|&c| c == ';').map_or(chars.len(), |p| i + p);
            let tree: String = chars[i..end].iter().collect();
            for p in expand(&tree) {
                if let Some(abs) = absolute(&p, &here, &children) {
                    out.push(abs);
                }
            }
            i = end;
            continue;
        }
        if matches!(word.as_str(), "crate" | "super" | "self") || children.contains(&word) {
            let mut j = start;
            let mut path = String::new();
            while j < chars.len() && (is_ident(chars[j]) || (chars[j] == ':' && chars.get(j + 1) == Some(&':'))) {
                if chars[j] == ':' {
                    path.push_str("::");
                    j += 2;
                } else {
                    path.push(chars[j]);
                    j += 1;
                }
            }
            if path.contains("::") {
                let segs: Vec<String> = path.trim_end_matches("::").split("::").map(str::to_string).collect();
                if let Some(abs) = absolute(&segs, &here, &children) {
                    out.push(abs);
                }
            }
            i = j;
        }
    }
    out
}

fn declared_children(text: &str) -> BTreeSet<String> {
    let mut children = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_prefix("pub(crate) ").or_else(|| line.strip_prefix("pub ")).unwrap_or(line);
        if let Some(rest) = line.strip_prefix("mod ")
            && let Some(name) = rest.trim().strip_suffix(';')
        {
            children.insert(name.trim().to_string());
        }
    }
    children
}

/// A use tree (`a::{b,c::{d,e}}`) as its paths.
fn expand(tree: &str) -> Vec<Vec<String>> {
    fn go(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
        let tree = tree.trim().trim_start_matches("::");
        if let Some(open) = tree.find('{') {
            let head: Vec<String> =
                tree[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let base: Vec<String> = prefix.iter().cloned().chain(head).collect();
            let (mut level, mut from) = (0, 0);
            for (k, ch) in inner.char_indices() {
                match ch {
                    '{' => level += 1,
                    '}' => level -= 1,
                    ',' if level == 0 => {
                        go(&base, &inner[from..k], out);
                        from = k + 1;
                    }
                    _ => {}
                }
            }
            go(&base, &inner[from..], out);
        } else {
            // `a::B as C`: the path is the part before `as`.
            let item = tree.split_whitespace().next().unwrap_or("");
            let mut path: Vec<String> = prefix.to_vec();
            path.extend(
                item.split("::")
                    .map(str::trim)
                    .filter(|s| !s.is_empty() && *s != "*" && *s != "self")
                    .map(str::to_string),
            );
            if !path.is_empty() {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    go(&[], tree, &mut out);
    out
}

/// A path made absolute from module `here`; `None` for paths into other crates.
fn absolute(path: &[String], here: &[String], children: &BTreeSet<String>) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "self" => here.to_vec(),
        "super" => {
            let mut b = here.to_vec();
            let mut rest = path;
            while rest.first().map(String::as_str) == Some("super") {
                b.pop();
                rest = &rest[1..];
            }
            b.extend(rest.iter().cloned());
            return Some(b);
        }
        name if children.contains(name) => {
            let mut b = here.to_vec();
            b.push(name.to_string());
            b.extend(path[1..].iter().cloned());
            return Some(b);
        }
        _ => return None,
    };
    base.extend(path[1..].iter().cloned());
    Some(base)
}

/// The strongly connected components with two or more nodes (Tarjan's algorithm).
pub fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(w: &mut Walk<'g>, v: &'g str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        w.on_stack.insert(v);
        for u in w.graph.get(v).into_iter().flatten() {
            let u = u.as_str();
            if !w.index.contains_key(u) {
                visit(w, u);
                let low = w.low[v].min(w.low[u]);
                w.low.insert(v, low);
            } else if w.on_stack.contains(u) {
                let low = w.low[v].min(w.index[u]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let mut component = Vec::new();
            while let Some(u) = w.stack.pop() {
                w.on_stack.remove(u);
                component.push(u.to_string());
                if u == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                w.out.push(component);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.out
}

/// For each cycle, the edges inside it (`a -> b`), to say what ties it.
pub fn describe(graph: &Graph, cycles: &[Vec<String>]) -> String {
    let mut text = String::new();
    for (k, cycle) in cycles.iter().enumerate() {
        text.push_str(&format!("cycle {}: {}\n", k + 1, cycle.join(", ")));
        for a in cycle {
            for b in graph.get(a).into_iter().flatten().filter(|b| cycle.contains(b)) {
                text.push_str(&format!("  {a} -> {b}\n"));
            }
        }
    }
    text
}
