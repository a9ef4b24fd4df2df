//! wirebench's renderers: pure functions from a `Report` (or a histogram in it) to text,
//! writing to any `io::Write`. No sockets, no clocks: `report` and `compare` can run on
//! saved JSON anywhere.
//!
//! - [`distribution`]: HdrHistogram's percentile distribution (the layout Aeron's Ping
//!   prints, and the `.hgrm` file format HdrHistogram's plotter reads).
//! - [`hlog`]: HdrHistogram interval logs.
//! - [`proxy`]: the proxy's requested-vs-achieved lines and table.
//! - [`text`]: the one-line summaries and the terminal report of a run.

pub mod distribution;
pub mod hlog;
pub mod proxy;
pub mod text;
