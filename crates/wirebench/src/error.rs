//! The binary's error classes: a `UsageError` (exit 2) is bad input the user can fix by
//! changing the command; everything else is a runtime failure (exit 1).

/// Bad input: a one-line message naming the problem; exits 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The process exit code for a run's error.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<UsageError>().is_some() { 2 } else { 1 }
}

/// The error and its causes on one line, `outer: inner: root`, as anyhow's `{:#}` prints
/// them, but each cause once: a cause whose text the error above it already contains is
/// left out. Library errors that name their source in their message and also return it as
/// `source()` (`multicast join for G: No such device (os error 19)`) otherwise print that
/// text twice.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    let mut previous = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.is_empty() {
            line.clone_from(&text);
        } else if !previous.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        previous = text;
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    /// A library error that names its source in its message (with a hint after it) and
    /// returns it as `source()`, as `wirebench_net::NetError` does.
    #[derive(Debug, thiserror::Error)]
    #[error("multicast join for 239.1.2.3:5000: {source} (hint)")]
    struct Join {
        source: std::io::Error,
    }

    fn no_device() -> std::io::Error {
        std::io::Error::from_raw_os_error(19)
    }

    #[test]
    fn a_cause_its_error_already_names_is_printed_once() {
        let e = anyhow::Error::from(Join { source: no_device() });
        let once = "multicast join for 239.1.2.3:5000: No such device (os error 19) (hint)";
        assert_eq!(format!("{e:#}"), format!("{once}: No such device (os error 19)"), "anyhow repeats it");
        assert_eq!(one_line(&e), once);
        // under a context too, and the context is kept
        let e = Err::<(), _>(Join { source: no_device() }).context("serve").unwrap_err();
        assert_eq!(one_line(&e), format!("serve: {once}"));
    }

    #[test]
    fn distinct_causes_are_all_printed() {
        let e = Err::<(), _>(no_device()).context("cannot bind udp 0.0.0.0:7878").unwrap_err();
        assert_eq!(one_line(&e), "cannot bind udp 0.0.0.0:7878: No such device (os error 19)");
        assert_eq!(one_line(&anyhow::anyhow!("plain")), "plain");
    }
}
