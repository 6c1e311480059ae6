//! How an operation ended, as its client saw it: the three-way outcome (Jepsen's `:ok`, `:fail`,
//! `:info`) shared by [workloads](crate::workload) and the
//! [list-append checker](crate::check::list_append).
//!
//! A leaf: it uses nothing else of the crate.

/// How an operation ended: acknowledged with what it returned, definitely failed, or
/// indeterminate (it may or may not have taken effect).
///
/// `T` is what an acknowledged operation returned: a workload's answer as text (the default,
/// `String`), a list-append append's offset (`Option<Offset>`) or a read's records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpOutcome<T = String> {
    /// It took effect (acknowledged), with what it returned.
    Ok(T),
    /// It definitely did not take effect (the service said no before applying it): why.
    Failed(String),
    /// It may or may not have taken effect (a timeout, a lost response or connection, Kafka's
    /// `acks=0`): why. Never counted as a failure.
    Indeterminate(String),
}

impl<T> OpOutcome<T> {
    /// Whether it took effect (was acknowledged).
    pub fn is_ok(&self) -> bool {
        matches!(self, OpOutcome::Ok(_))
    }

    /// Whether it definitely failed.
    pub fn is_failed(&self) -> bool {
        matches!(self, OpOutcome::Failed(_))
    }

    /// Whether its effect is unknown.
    pub fn is_indeterminate(&self) -> bool {
        matches!(self, OpOutcome::Indeterminate(_))
    }
}

#[cfg(test)]
mod tests {
    use super::OpOutcome;

    #[test]
    fn each_outcome_answers_one_question() {
        let ok: OpOutcome = OpOutcome::Ok("v".into());
        let failed: OpOutcome<u64> = OpOutcome::Failed("no".into());
        let indeterminate: OpOutcome<Vec<u8>> = OpOutcome::Indeterminate("timeout".into());
        assert!(ok.is_ok() && !ok.is_failed() && !ok.is_indeterminate());
        assert!(failed.is_failed() && !failed.is_ok() && !failed.is_indeterminate());
        assert!(indeterminate.is_indeterminate() && !indeterminate.is_ok() && !indeterminate.is_failed());
    }
}
