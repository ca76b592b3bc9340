//! The name of the records table, checked before it is written into any SQL.

use std::{fmt, sync::Arc};

/// The longest table name accepted, in bytes: PostgreSQL keeps 63 bytes of an identifier, and
/// the names derived from the table's (`<table>_pkey`, `<table>_expires_at_idx`) must fit too.
const MAX_TABLE: usize = 48;
/// The longest schema name, in bytes (PostgreSQL's limit).
const MAX_SCHEMA: usize = 63;

/// The name of the table that holds idempotency records: `table` or `schema.table`.
///
/// Each part is a plain lowercase identifier (`[a-z_][a-z0-9_]*`): the name is written into
/// SQL, so anything else is refused rather than escaped. It is written double-quoted, so a
/// reserved word (`order`) works, and it names the same table as the unquoted name in your own
/// SQL. The table part is at most 48 bytes, so the names derived from it fit PostgreSQL's 63.
///
/// ```
/// use idem::postgres::{TableName, TableNameError};
///
/// let name = TableName::new("billing.idempotency_records")?;
/// assert_eq!(name.schema(), Some("billing"));
/// assert_eq!(name.table(), "idempotency_records");
/// assert_eq!(name.to_string(), "billing.idempotency_records");
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
         (`[a-z_][a-z0-9_]*`; PostgreSQL folds unquoted names to lowercase)"
    )]
    InvalidIdentifier {
        /// The whole name.
        name: String,
        /// The offending part.
        part: String,
    },
    /// A part is longer than PostgreSQL keeps (or, for the table, than its derived names allow).
    #[error("`{name}` is not a valid table name: `{part}` is longer than {max} bytes")]
    TooLong {
        /// The whole name.
        name: String,
        /// The offending part.
        part: String,
        /// The most bytes that part may have.
        max: usize,
    },
}

impl TableName {
    /// The default table name, `idempotency_records` (in the connection's `search_path`).
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
        if let Some(schema) = schema {
            check_part(name, schema, MAX_SCHEMA)?;
        }
        check_part(name, table, MAX_TABLE)?;
        Ok(Self {
            name: name.into(),
            dot: schema.map(str::len),
        })
    }

    /// The schema, when the name has one.
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

    /// The name as SQL: each part double-quoted.
    pub(super) fn quoted(&self) -> String {
        match self.schema() {
            Some(schema) => format!("\"{schema}\".\"{}\"", self.table()),
            None => format!("\"{}\"", self.table()),
        }
    }

    /// A name derived from the table's (an index, say), quoted; it lives in the table's schema.
    pub(super) fn derived(&self, suffix: &str) -> String {
        format!("\"{}_{suffix}\"", self.table())
    }
}

fn check_part(name: &str, part: &str, max: usize) -> Result<(), TableNameError> {
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
    if part.len() > max {
        return Err(TableNameError::TooLong {
            name: name.to_owned(),
            part: part.to_owned(),
            max,
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
        assert_eq!(plain.table(), "idempotency_records");
        assert_eq!(plain.quoted(), "\"idempotency_records\"");
        assert_eq!(
            plain.derived("expires_at_idx"),
            "\"idempotency_records_expires_at_idx\""
        );
        let qualified = TableName::new("_idem.order").unwrap();
        assert_eq!(qualified.schema(), Some("_idem"));
        assert_eq!(qualified.table(), "order");
        assert_eq!(qualified.quoted(), "\"_idem\".\"order\"");
        assert_eq!(qualified.derived("pkey"), "\"order_pkey\"");
        assert_eq!(TableName::default().as_str(), TableName::DEFAULT);
    }

    #[test]
    fn anything_but_plain_lowercase_identifiers_is_refused() {
        assert_eq!(TableName::new(""), Err(TableNameError::Empty));
        for bad in ["a.b.c", "idem..records"] {
            assert!(matches!(
                TableName::new(bad),
                Err(TableNameError::TooManyParts(_))
            ));
        }
        for bad in [
            "Records",
            "1records",
            "rec-ords",
            "rec ords",
            "\"records\"",
            "records;drop table x",
            ".records",
            "idem.",
            "récords",
            "records\0",
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
    fn long_parts_are_refused() {
        let table = "t".repeat(MAX_TABLE);
        assert!(TableName::new(&table).is_ok());
        assert!(matches!(
            TableName::new(&format!("{table}t")),
            Err(TableNameError::TooLong { max: MAX_TABLE, .. })
        ));
        let schema = "s".repeat(MAX_SCHEMA);
        assert!(TableName::new(&format!("{schema}.t")).is_ok());
        assert!(matches!(
            TableName::new(&format!("{schema}s.t")),
            Err(TableNameError::TooLong {
                max: MAX_SCHEMA,
                ..
            })
        ));
    }
}
