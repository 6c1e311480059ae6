//! A small scanner of a crate's file-level imports, for tests that its modules form layers.
//!
//! Every `.rs` file under a `src` directory is a module (`lib.rs` the root, `x/mod.rs` the module
//! `x`). A file imports another when it names a path into it: `use crate::…`, `use super::…`,
//! `use self::…`, `use child::…` (a child module of its own), or an inline `crate::…` /
//! `super::…` path. A path resolves to the longest module prefix it names, so `crate::Cluster`
//! (a re-export) is an import of `lib.rs`, and a re-export (`pub use x::Y` in `mod.rs`) is an
//! import of `x`. `mod x;` declarations are not imports. Comments and string literals are
//! skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// File-level imports: file (relative to `src`) → the files it imports, with the paths naming
/// them.
pub type Imports = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// Reads every `.rs` file under `src` and returns their imports of each other.
pub fn scan(src: &Path) -> Imports {
    let mut files = Vec::new();
    collect(src, &mut files);
    let modules: BTreeMap<Vec<String>, String> = files.iter().map(|f| (module_of(src, f), rel(src, f))).collect();
    let mut imports = Imports::new();
    for f in &files {
        let here = module_of(src, f);
        let file = rel(src, f);
        let text = std::fs::read_to_string(f).expect("readable source file");
        let entry = imports.entry(file.clone()).or_default();
        for path in paths(&tokens(&text), &here, &modules) {
            let Some(target) = resolve(&path, &modules) else { continue };
            if target != file {
                entry.entry(target).or_default().insert(format!("crate::{}", path.join("::")));
            }
        }
    }
    imports
}

/// The import cycles: each a list of files, each importing the next (the last the first).
pub fn cycles(imports: &Imports) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut done = BTreeSet::new();
    for start in imports.keys() {
        if done.contains(start) {
            continue;
        }
        let mut stack = vec![start.clone()];
        walk(imports, &mut stack, &mut done, &mut out);
    }
    out
}

/// Depth-first: a file met again on the current stack closes a cycle.
fn walk(imports: &Imports, stack: &mut Vec<String>, done: &mut BTreeSet<String>, out: &mut Vec<Vec<String>>) {
    let here = stack.last().expect("not empty").clone();
    for next in imports.get(&here).into_iter().flat_map(|m| m.keys()) {
        if let Some(i) = stack.iter().position(|f| f == next) {
            out.push(stack[i..].to_vec());
        } else if !done.contains(next) {
            stack.push(next.clone());
            walk(imports, stack, done, out);
            stack.pop();
        }
    }
    done.insert(here);
}

/// A readable account of `cycles`, naming the paths that tie each step.
pub fn describe(imports: &Imports, cycles: &[Vec<String>]) -> String {
    let mut out = String::new();
    for c in cycles {
        out.push_str(&format!("cycle: {}\n", c.join(" -> ")));
        for (i, from) in c.iter().enumerate() {
            let to = &c[(i + 1) % c.len()];
            let names: Vec<&String> = imports[from][to].iter().collect();
            out.push_str(&format!("  {from} -> {to}: {names:?}\n"));
        }
    }
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).expect("readable directory").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn rel(src: &Path, f: &Path) -> String {
    f.strip_prefix(src).expect("under src").to_string_lossy().replace('\\', "/")
}

/// `lib.rs` → `[]`, `a/mod.rs` → `[a]`, `a/b.rs` → `[a, b]`.
fn module_of(src: &Path, f: &Path) -> Vec<String> {
    let rel = rel(src, f);
    let mut parts: Vec<String> = rel.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod" || (p == "lib" && parts.len() == 1) || (p == "main" && parts.len() == 1))
    {
        parts.pop();
    }
    parts
}

/// The longest module prefix of `path`.
fn resolve(path: &[String], modules: &BTreeMap<Vec<String>, String>) -> Option<String> {
    (0..=path.len()).rev().find_map(|n| modules.get(&path[..n]).cloned())
}

/// Identifiers and punctuation, without comments, string and char literals.
fn tokens(text: &str) -> Vec<String> {
    let b: Vec<char> = text.chars().collect();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < b.len() {
        let c = b[i];
        if c == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && b.get(i + 1) == Some(&'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == '*' && b[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == 'r' && (b.get(i + 1) == Some(&'"') || (b.get(i + 1) == Some(&'#') && b.get(i + 2) != Some(&'[')))
        {
            let mut hashes = 0;
            i += 1;
            while b.get(i) == Some(&'#') {
                hashes += 1;
                i += 1;
            }
            i += 1;
            while i < b.len() && !(b[i] == '"' && (0..hashes).all(|k| b.get(i + 1 + k) == Some(&'#'))) {
                i += 1;
            }
            i += 1 + hashes;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n') or a lifetime ('a).
            if b.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(b[start..i].iter().collect());
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            out.push("::".to_string());
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

/// The crate paths (from the root) a file at module `here` names.
fn paths(tokens: &[String], here: &[String], modules: &BTreeMap<Vec<String>, String>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // Inline modules (`mod tests { … }`): their name, and the brace depth inside them.
    let (mut inline, mut depth): (Vec<(String, usize)>, usize) = (Vec::new(), 0);
    let mut here = here.to_vec();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        if t == "{" {
            depth += 1;
        } else if t == "}" {
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
                here.pop();
            }
            depth = depth.saturating_sub(1);
        }
        if t == "mod" && tokens.get(i + 2).is_some_and(|b| b == "{") {
            let name = tokens[i + 1].clone();
            here.push(name.clone());
            inline.push((name, depth + 1));
            i += 2;
        } else if t == "use" {
            let mut trees = Vec::new();
            i += 1;
            use_tree(tokens, &mut i, Vec::new(), &mut trees);
            for p in trees {
                if let Some(abs) = absolute(&p, &here, modules, true) {
                    out.push(abs);
                }
            }
        } else if (t == "crate" || t == "super")
            && tokens.get(i + 1).is_some_and(|n| n == "::")
            && (i == 0 || tokens[i - 1] != "::")
        {
            let mut p = vec![t.to_string()];
            i += 1;
            while tokens.get(i).is_some_and(|n| n == "::") && tokens.get(i + 1).is_some_and(|n| is_ident(n)) {
                p.push(tokens[i + 1].clone());
                i += 2;
            }
            if let Some(abs) = absolute(&p, &here, modules, false) {
                out.push(abs);
            }
        } else {
            i += 1;
        }
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// One `use` tree from `tokens[i]`, expanded into paths (`self` in a group names its parent).
fn use_tree(tokens: &[String], i: &mut usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    while let Some(t) = tokens.get(*i) {
        *i += 1;
        match t.as_str() {
            "{" => {
                loop {
                    use_tree(tokens, i, prefix.clone(), out);
                    match tokens.get(*i).map(String::as_str) {
                        Some(",") => *i += 1,
                        Some("}") => {
                            *i += 1;
                            break;
                        }
                        _ => break,
                    }
                    if tokens.get(*i).is_some_and(|t| t == "}") {
                        *i += 1;
                        break;
                    }
                }
                return;
            }
            "*" => {
                out.push(prefix);
                return;
            }
            "::" => {}
            t if is_ident(t) => {
                if t != "self" || prefix.is_empty() {
                    prefix.push(t.to_string());
                }
                if tokens.get(*i).is_some_and(|n| n == "as") {
                    *i += 2;
                }
                if tokens.get(*i).is_none_or(|n| n != "::") {
                    out.push(prefix);
                    return;
                }
            }
            _ => return,
        }
    }
}

/// `p` from the crate root, if it is a path into this crate.
fn absolute(
    p: &[String],
    here: &[String],
    modules: &BTreeMap<Vec<String>, String>,
    in_use: bool,
) -> Option<Vec<String>> {
    let first = p.first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "super" | "self" => here.to_vec(),
        _ if in_use => {
            // A child module of this one (2018 paths), else another crate.
            let mut child = here.to_vec();
            child.push(first.clone());
            if !modules.contains_key(&child) {
                return None;
            }
            here.to_vec()
        }
        _ => return None,
    };
    let mut rest = p;
    if first == "crate" || first == "self" {
        rest = &p[1..];
    }
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}
