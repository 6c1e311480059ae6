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

    /// Reads a stored input. Its root comes from the file name (`<hash>-root<N>`; a name without
    /// `-root` is root 0); a symlink without one in its name takes its target's.
    ///
    /// # Errors
    /// The I/O error when the file cannot be read; `InvalidData` when the name has `-root` not
    /// followed by a decimal `u64` to its end (`x-root9.bak`, `x-root 9`): such a copy would
    /// otherwise run under root 0 and stop reproducing what it stored.
    pub fn read(path: &Path) -> std::io::Result<Input> {
        let bytes = std::fs::read(path)?;
        let name = |p: &Path| p.file_name().and_then(|n| n.to_str()).map(str::to_string);
        let own = name(path).filter(|n| n.contains("-root"));
        let named =
            own.or_else(|| std::fs::canonicalize(path).ok().and_then(|p| name(&p)).filter(|n| n.contains("-root")));
        let root = match named.as_deref().and_then(|n| n.rsplit_once("-root")) {
            None => Seed(0),
            Some((_, digits)) => match digits.parse::<u64>() {
                Ok(root) if digits.bytes().all(|b| b.is_ascii_digit()) => Seed(root),
                _ => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "the name {:?} has -root not followed by the root seed's digits to its end (as in 0123abcd-root9)",
                            named.unwrap_or_default()
                        ),
                    ));
                }
            },
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_comes_from_the_name_and_a_mangled_root_is_an_error() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let write = |name: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, [1u8, 2]).expect("written");
            path
        };
        assert_eq!(Input::read(&write("00ff")).expect("reads").root, Seed(0));
        let rooted = write("00ff-root9");
        assert_eq!(Input::read(&rooted).expect("reads").root, Seed(9));
        for bad in ["00ff-root9.bak", "00ff-root 9", "00ff-root99999999999999999999", "00ff-root"] {
            let err = Input::read(&write(bad)).expect_err(bad);
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{bad}: {err}");
        }
        let link = dir.path().join("copy");
        std::os::unix::fs::symlink(&rooted, &link).expect("a symlink");
        assert_eq!(Input::read(&link).expect("reads").root, Seed(9), "a link takes its target's root");
    }
}
