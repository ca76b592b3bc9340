//! The report in the three formats: a table for a terminal, one JSON object for scripts,
//! JUnit XML for CI systems.

mod json;
mod junit;
mod text;

pub use self::{json::json, junit::junit, text::text};

/// The output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// A table, coloured on a terminal.
    #[default]
    Text,
    /// One JSON object: `{"target", "key_style", "notes", "requests", "elapsed_ms", "failed",
    /// "cases": [{"name", "verdict", "basis", "detail", ...}]}`.
    Json,
    /// JUnit XML: one test case per case.
    Junit,
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            "junit" => Ok(Self::Junit),
            other => Err(format!(
                "{other:?} is not a format; use text, json or junit"
            )),
        }
    }
}

/// The report in `format`; colours only for text, and only when `color`.
#[must_use]
pub fn render(report: &crate::Report, format: Format, color: bool) -> String {
    match format {
        Format::Text => text(report, color),
        Format::Json => json(report),
        Format::Junit => junit(report),
    }
}
