//! The versioned `Report` every mode returns (STYLE C7), and the histogram codec.
//! Renderers in `wirebench-report` are pure functions of it; JSON is the canonical form and
//! `docs/schema/report-v1.json` its schema.

mod histo;
pub mod merge;
mod model;
pub mod read;

pub use histo::{HistoError, MAX_HIGHEST, MAX_SIGFIG, decode_histogram, encode_histogram, encode_histogram_plain};
pub use model::*;
pub use read::{ReadError, read_report, read_report_until};
