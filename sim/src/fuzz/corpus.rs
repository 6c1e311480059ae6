//! A target's corpus and artifacts on disk.
//!
//! The corpus of simulation `NAME` is `fuzz/corpus/NAME/` under the package (`CARGO_MANIFEST_DIR`,
//! which cargo sets for `cargo test` and `cargo run`; the working directory otherwise), or under
//! `SIM_CORPUS` when set. Each file is one input: its bytes are the choice sequence, its name a
//! hash of them (`<16 hex>`, or `<16 hex>-root<N>` when the runtime's randomness is keyed from
//! root seed N). The gate runs every entry; an entry is the regression form of a fixed bug, so it
//! lands with the fix. The engine writes the shrunk inputs of new failures to
//! `fuzz/artifacts/NAME/` (libFuzzer's word): move one into the corpus once its bug is fixed.
//! Paths are relative to the working directory when inside it. The layout is libFuzzer's, so its `-merge`, `-minimize_crash` and corpus directories apply.

use std::path::{Path, PathBuf};

use crate::input::Input;
use crate::run::ConfigError;

/// The corpus and artifact directories of one target.
#[derive(Clone, Debug)]
pub struct Corpus {
    dir: PathBuf,
    artifacts: PathBuf,
}

impl Corpus {
    /// The directories of simulation `name` (see the module docs).
    pub fn for_simulation(name: &str) -> Corpus {
        let root = std::env::var_os("SIM_CORPUS")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("CARGO_MANIFEST_DIR").map(|d| PathBuf::from(d).join("fuzz")))
            .unwrap_or_else(|| PathBuf::from("fuzz"));
        // Relative to the working directory when inside it, so replay lines stay short and work
        // from another checkout (cargo runs tests in the package's directory).
        let cwd = std::env::current_dir().unwrap_or_default();
        let root = root.strip_prefix(&cwd).map(Path::to_path_buf).unwrap_or(root);
        Corpus::at(&root, name)
    }

    /// The directories of `name` under `root` (`root/corpus/name`, `root/artifacts/name`).
    pub fn at(root: &Path, name: &str) -> Corpus {
        Corpus { dir: root.join("corpus").join(name), artifacts: root.join("artifacts").join(name) }
    }

    /// The corpus directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The artifacts directory.
    pub fn artifacts(&self) -> &Path {
        &self.artifacts
    }

    /// Every corpus entry, by file name; a missing directory is an empty corpus. Hidden files
    /// (`.gitkeep`) and directories are skipped.
    ///
    /// # Errors
    /// [`ConfigError::FuzzInput`] when the directory or an entry cannot be read.
    pub fn entries(&self) -> Result<Vec<Input>, ConfigError> {
        read_dir(&self.dir)
    }

    /// Every stored artifact (see [`Corpus::entries`]).
    ///
    /// # Errors
    /// As [`Corpus::entries`].
    pub fn artifact_entries(&self) -> Result<Vec<Input>, ConfigError> {
        read_dir(&self.artifacts)
    }

    /// Writes `input` to the corpus; returns it with its path.
    ///
    /// # Errors
    /// [`ConfigError::FuzzInput`] when the file cannot be written.
    pub fn add(&self, input: &Input) -> Result<Input, ConfigError> {
        write(&self.dir, input)
    }

    /// Writes `input` to the artifacts; returns it with its path.
    ///
    /// # Errors
    /// As [`Corpus::add`].
    pub fn add_artifact(&self, input: &Input) -> Result<Input, ConfigError> {
        write(&self.artifacts, input)
    }
}

fn read_dir(dir: &Path) -> Result<Vec<Input>, ConfigError> {
    let unreadable =
        |e: std::io::Error| ConfigError::FuzzInput { path: dir.display().to_string(), reason: e.to_string() };
    let listing = match std::fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(unreadable(e)),
    };
    let mut paths = Vec::new();
    for entry in listing {
        let path = entry.map_err(unreadable)?.path();
        let hidden = path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.'));
        if path.is_file() && !hidden {
            paths.push(path);
        }
    }
    paths.sort();
    paths
        .iter()
        .map(|p| {
            Input::read(p).map_err(|e| ConfigError::FuzzInput { path: p.display().to_string(), reason: e.to_string() })
        })
        .collect()
}

fn write(dir: &Path, input: &Input) -> Result<Input, ConfigError> {
    let path = dir.join(input.file_name());
    let failed = |e: std::io::Error| ConfigError::FuzzInput { path: path.display().to_string(), reason: e.to_string() };
    std::fs::create_dir_all(dir).map_err(failed)?;
    std::fs::write(&path, input.bytes.as_slice()).map_err(failed)?;
    Ok(Input { path, ..input.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Seed;

    #[test]
    fn entries_round_trip_with_their_root_and_skip_hidden_files() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let corpus = Corpus::at(dir.path(), "t");
        assert_eq!(corpus.entries().expect("a missing corpus is empty"), Vec::new());
        let a = corpus.add(&Input::new(vec![1, 2, 3], Seed(0))).expect("written");
        let b = corpus.add(&Input::new(vec![9], Seed(42))).expect("written");
        std::fs::write(corpus.dir().join(".gitkeep"), b"").expect("written");
        assert!(b.path.to_string_lossy().ends_with("-root42"), "{}", b.path.display());
        let mut read = corpus.entries().expect("readable");
        read.sort_by_key(|i| i.root);
        assert_eq!(read, vec![a, b]);
        assert!(corpus.artifact_entries().expect("empty").is_empty());
    }
}
