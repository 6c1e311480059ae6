//! (work package in progress; see /work/kubesim-spec.md)
