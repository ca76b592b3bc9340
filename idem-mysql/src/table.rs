//! The name of the records table, checked before it is written into any SQL.

use std::{fmt, sync::Arc};

/// The longest identifier MySQL and MariaDB accept, in bytes.
const MAX_IDENTIFIER: usize = 64;

/// The name of the table that holds idempotency records: `table` or `database.table`.
///
/// Each part is a plain lowercase identifier (`[a-z_][a-z0-9_]*`, at most 64 bytes): the name
/// is written into SQL, so anything else is refused rather than escaped. Lowercase, because a
/// table is a file on the server's disk and its case matters on Linux and not on Windows or
/// macOS (`lower_case_table_names`): a lowercase name is the same table everywhere. It is
/// written in backquotes, so a reserved word (`order`) works.
///
/// ```
/// use idem::mysql::{TableName, TableNameError};
///
/// let name = TableName::new("billing.idempotency_records")?;
/// assert_eq!(name.database(), Some("billing"));
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
    #[error("`{0}` is not a table name: expected `table` or `database.table`")]
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
    /// A part is longer than MySQL accepts.
    #[error("`{name}` is not a valid table name: `{part}` is longer than 64 bytes")]
    TooLong {
        /// The whole name.
        name: String,
        /// The offending part.
        part: String,
    },
}

impl TableName {
    /// The default table name, `idempotency_records` (in the connection's database).
    pub const DEFAULT: &'static str = "idempotency_records";

    /// Checks `name` (`table` or `database.table`).
    pub fn new(name: &str) -> Result<Self, TableNameError> {
        if name.is_empty() {
            return Err(TableNameError::Empty);
        }
        let parts: Vec<&str> = name.split('.').collect();
        let (database, table) = match parts.as_slice() {
            [table] => (None, *table),
            [database, table] => (Some(*database), *table),
            _ => return Err(TableNameError::TooManyParts(name.to_owned())),
        };
        for part in database.into_iter().chain([table]) {
            check_part(name, part)?;
        }
        Ok(Self {
            name: name.into(),
            dot: database.map(str::len),
        })
    }

    /// The database, when the name has one.
    pub fn database(&self) -> Option<&str> {
        self.dot.map(|dot| &self.name[..dot])
    }

    /// The table, without its database.
    pub fn table(&self) -> &str {
        self.dot.map_or(&self.name, |dot| &self.name[dot + 1..])
    }

    /// The name as given: `table` or `database.table`.
    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// The name as SQL: each part in backquotes.
    pub(crate) fn quoted(&self) -> String {
        match self.database() {
            Some(database) => format!("`{database}`.`{}`", self.table()),
            None => format!("`{}`", self.table()),
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
        assert_eq!(plain.database(), None);
        assert_eq!(plain.quoted(), "`idempotency_records`");
        let qualified = TableName::new("_idem.order").unwrap();
        assert_eq!(qualified.database(), Some("_idem"));
        assert_eq!(qualified.table(), "order");
        assert_eq!(qualified.quoted(), "`_idem`.`order`");
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
            "`records`",
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
