//! A fuzz input: the choice bytes of one run and the root seed its runtime randomness is keyed
//! from (see [`crate::fuzz`]), and how it is stored in a file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::seed::Seed;

/// One fuzz input: the choice bytes and the root seed the runtime's own randomness is keyed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// The choice bytes, read front to back by every stream of the run.
    pub bytes: Arc<Vec<u8>>,
    /// The root seed: keys `getrandom` and tokio's RNG, which never read the bytes.
    pub root: Seed,
    /// Where it is stored (a corpus entry, an artifact), or empty when only in memory.
    pub path: PathBuf,
}

impl Input {
    /// An in-memory input.
    pub fn new(bytes: impl Into<Vec<u8>>, root: Seed) -> Input {
        Input { bytes: Arc::new(bytes.into()), root, path: PathBuf::new() }
    }

    /// Reads a stored input. Its root comes from the file name (`<hash>-root<N>`; otherwise 0).
    ///
    /// # Errors
    /// The I/O error when the file cannot be read.
    pub fn read(path: &Path) -> std::io::Result<Input> {
        let bytes = std::fs::read(path)?;
        let root = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit_once("-root"))
            .and_then(|(_, r)| r.parse::<u64>().ok())
            .map_or(Seed(0), Seed);
        Ok(Input { bytes: Arc::new(bytes), root, path: path.to_path_buf() })
    }

    /// The file name it is stored under: a hash of the bytes, and the root unless it is 0.
    pub fn file_name(&self) -> String {
        let hash = fnv1a(&self.bytes);
        match self.root.0 {
            0 => format!("{hash:016x}"),
            root => format!("{hash:016x}-root{root}"),
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether it has no bytes (the simplest run).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// FNV-1a 64 over `bytes`: a stable name for an input (and a cheap feature hash).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}
