//! The name of the records table, checked before it is written into any SQL.

use std::{fmt, sync::Arc};

/// The longest part of a name, in bytes: SQLite sets no limit, this keeps names readable and
/// the same as the other SQL stores accept.
const MAX_IDENTIFIER: usize = 64;

/// The name of the table that holds idempotency records: `table` or `schema.table`, where the
/// schema is `main` or the name of an attached database.
///
/// Each part is a plain lowercase identifier (`[a-z_][a-z0-9_]*`, at most 64 bytes): the name
/// is written into SQL, so anything else is refused rather than escaped. Lowercase, because
/// SQLite compares names without case: one spelling per table. It is written in double
/// quotes, so a keyword (`order`) works.
///
/// ```
/// use idem::sqlite::{TableName, TableNameError};
///
/// let name = TableName::new("main.idempotency_records")?;
/// assert_eq!(name.schema(), Some("main"));
/// assert_eq!(name.table(), "idempotency_records");
/// assert_eq!(name.to_string(), "main.idempotency_records");
///
/// assert!(matches!(TableName::new("records; DROP TABLE users"), Err(TableNameError::InvalidIdentifier { .. })));
/// assert!(matches!(TableName::new("Records"), Err(TableNameError::InvalidIdentifier { .. })));
/// # Ok::<(), TableNameError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TableName {
    name: Arc<str>,
    dot: Option<usize>,
}

/// Why a table name was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TableNameError {
    /// The name is empty.
    #[error("the table name is empty")]
    Empty,
    /// The name has more than two dot-separated parts.
    #[error("`{0}` is not a table name: expected `table` or `schema.table`")]
    TooManyParts(String),
    /// A part is not a plain lowercase identifier.
    #[error(
        "`{name}` is not a valid table name: `{part}` is not a plain lowercase identifier \
         (`[a-z_][a-z0-9_]*`)"
    )]
    InvalidIdentifier {
        /// The whole name.
        name: String,
        /// The offending part.
        part: String,
    },
    /// A part is longer than 64 bytes.
    #[error("`{name}` is not a valid table name: `{part}` is longer than 64 bytes")]
    TooLong {
        /// The whole name.
        name: String,
        /// The offending part.
        part: String,
    },
}

impl TableName {
    /// The default table name, `idempotency_records` (in the file's `main` schema).
    pub const DEFAULT: &'static str = "idempotency_records";

    /// Checks `name` (`table` or `schema.table`).
    pub fn new(name: &str) -> Result<Self, TableNameError> {
        if name.is_empty() {
            return Err(TableNameError::Empty);
        }
        let parts: Vec<&str> = name.split('.').collect();
        let (schema, table) = match parts.as_slice() {
            [table] => (None, *table),
            [schema, table] => (Some(*schema), *table),
            _ => return Err(TableNameError::TooManyParts(name.to_owned())),
        };
        for part in schema.into_iter().chain([table]) {
            check_part(name, part)?;
        }
        Ok(Self {
            name: name.into(),
            dot: schema.map(str::len),
        })
    }

    /// The schema (`main`, or an attached database), when the name has one.
    pub fn schema(&self) -> Option<&str> {
        self.dot.map(|dot| &self.name[..dot])
    }

    /// The table, without its schema.
    pub fn table(&self) -> &str {
        self.dot.map_or(&self.name, |dot| &self.name[dot + 1..])
    }

    /// The name as given: `table` or `schema.table`.
    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// The name as SQL: each part in double quotes.
    pub(crate) fn quoted(&self) -> String {
        match self.schema() {
            Some(schema) => format!("\"{schema}\".\"{}\"", self.table()),
            None => format!("\"{}\"", self.table()),
        }
    }

    /// The name of an index of the table, `table_suffix`, as SQL: in the table's schema, as
    /// SQLite wants it (`CREATE INDEX "schema"."index" ON "table"`).
    pub(crate) fn quoted_index(&self, suffix: &str) -> String {
        let index = format!("{}_{suffix}", self.table());
        match self.schema() {
            Some(schema) => format!("\"{schema}\".\"{index}\""),
            None => format!("\"{index}\""),
        }
    }
}

fn check_part(name: &str, part: &str) -> Result<(), TableNameError> {
    let mut bytes = part.bytes();
    let valid = bytes
        .next()
        .is_some_and(|first| first.is_ascii_lowercase() || first == b'_')
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !valid {
        return Err(TableNameError::InvalidIdentifier {
            name: name.to_owned(),
            part: part.to_owned(),
        });
    }
    if part.len() > MAX_IDENTIFIER {
        return Err(TableNameError::TooLong {
            name: name.to_owned(),
            part: part.to_owned(),
        });
    }
    Ok(())
}

impl Default for TableName {
    fn default() -> Self {
        Self::new(Self::DEFAULT).expect("the default table name is valid")
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl fmt::Debug for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TableName").field(&&*self.name).finish()
    }
}

impl std::str::FromStr for TableName {
    type Err = TableNameError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::new(name)
    }
}

impl TryFrom<&str> for TableName {
    type Error = TableNameError;

    fn try_from(name: &str) -> Result<Self, Self::Error> {
        Self::new(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_qualified_names_are_accepted_and_quoted() {
        let plain = TableName::new("idempotency_records").unwrap();
        assert_eq!(plain.schema(), None);
        assert_eq!(plain.quoted(), "\"idempotency_records\"");
        let qualified = TableName::new("_idem.order").unwrap();
        assert_eq!(qualified.schema(), Some("_idem"));
        assert_eq!(qualified.table(), "order");
        assert_eq!(qualified.quoted(), "\"_idem\".\"order\"");
        assert_eq!(
            qualified.quoted_index("expires_at"),
            "\"_idem\".\"order_expires_at\""
        );
        assert_eq!(TableName::default().as_str(), TableName::DEFAULT);
    }

    #[test]
    fn anything_but_plain_lowercase_identifiers_is_refused() {
        assert_eq!(TableName::new(""), Err(TableNameError::Empty));
        assert!(matches!(
            TableName::new("a.b.c"),
            Err(TableNameError::TooManyParts(_))
        ));
        for bad in [
            "Records",
            "1records",
            "rec-ords",
            "\"records\"",
            "records;drop table x",
            ".records",
            "idem.",
            "récords",
        ] {
            assert!(
                matches!(
                    TableName::new(bad),
                    Err(TableNameError::InvalidIdentifier { .. })
                ),
                "{bad:?} was accepted"
            );
        }
    }

    #[test]
    fn parts_longer_than_64_bytes_are_refused() {
        let longest = "t".repeat(MAX_IDENTIFIER);
        assert!(TableName::new(&format!("{longest}.{longest}")).is_ok());
        assert!(matches!(
            TableName::new(&format!("{longest}t")),
            Err(TableNameError::TooLong { .. })
        ));
    }
}
