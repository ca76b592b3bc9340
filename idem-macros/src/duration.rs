//! Duration literals: `"24h"`, `"90s"`, `"1h 30m"`, `"250ms"`.
//!
//! A hand parser rather than humantime: humantime also accepts months (`M`), years, weeks and
//! sub-millisecond units, none of which belong in an idempotency policy.

/// The units a duration literal may use, with their length in milliseconds.
const UNITS: [(&str, u64); 5] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// Why a duration literal was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DurationError {
    /// Not a sequence of `<number><unit>` groups.
    Malformed,
    /// A group has a unit other than `ms`, `s`, `m`, `h`, `d`.
    Unit(String),
    /// The total does not fit in a `u64` of milliseconds.
    TooLarge,
}

impl DurationError {
    /// The error message for the literal `text`.
    pub(crate) fn message(&self, text: &str) -> String {
        match self {
            Self::Malformed => format!(
                "invalid duration `{text}`; expected `<number><unit>` groups such as `24h`, `90s` \
                 or `1h 30m`, with the units `ms`, `s`, `m`, `h` and `d`"
            ),
            Self::Unit(unit) => format!(
                "unit `{unit}` is not supported in the duration `{text}`; use `ms`, `s`, `m`, `h` \
                 or `d`"
            ),
            Self::TooLarge => format!("the duration `{text}` is too large"),
        }
    }
}

/// Parses a duration literal into milliseconds. Zero is a valid parse: that a duration must
/// be positive is a rule of the policy, which `Policy::validate` holds.
pub(crate) fn parse_millis(text: &str) -> Result<u64, DurationError> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(DurationError::Malformed);
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return Err(DurationError::Malformed);
        }
        let (number, after) = rest.split_at(digits);
        let after = after.trim_start();
        let letters = after.len()
            - after
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .len();
        if letters == 0 {
            return Err(DurationError::Malformed);
        }
        let (unit, after) = after.split_at(letters);
        let Some(&(_, millis)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(DurationError::Unit(unit.to_owned()));
        };
        let group = number
            .parse::<u64>()
            .ok()
            .and_then(|number| number.checked_mul(millis))
            .ok_or(DurationError::TooLarge)?;
        total = total.checked_add(group).ok_or(DurationError::TooLarge)?;
        rest = after.trim_start();
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_and_compound_groups() {
        assert_eq!(parse_millis("24h"), Ok(86_400_000));
        assert_eq!(parse_millis("60s"), Ok(60_000));
        assert_eq!(parse_millis("250ms"), Ok(250));
        assert_eq!(parse_millis("90m"), Ok(5_400_000));
        assert_eq!(parse_millis("7d"), Ok(604_800_000));
        assert_eq!(parse_millis("1h30m"), Ok(5_400_000));
        assert_eq!(parse_millis(" 1h 30m 15s "), Ok(5_415_000));
        assert_eq!(parse_millis("1 h"), Ok(3_600_000));
        assert_eq!(parse_millis("0s"), Ok(0));
    }

    #[test]
    fn refuses_malformed_literals() {
        for text in ["", "  ", "24", "h", "1.5h", "-1s", "1h,30m", "1h 30", "s1"] {
            assert_eq!(
                parse_millis(text),
                Err(DurationError::Malformed),
                "{text:?}"
            );
        }
    }

    #[test]
    fn refuses_units_humantime_would_take() {
        for (text, unit) in [
            ("1M", "M"),
            ("1y", "y"),
            ("2w", "w"),
            ("5us", "us"),
            ("5ns", "ns"),
            ("3min", "min"),
            ("1H", "H"),
            ("10sec", "sec"),
        ] {
            assert_eq!(
                parse_millis(text),
                Err(DurationError::Unit(unit.to_owned())),
                "{text:?}"
            );
        }
    }

    #[test]
    fn refuses_overflow() {
        assert_eq!(
            parse_millis("99999999999999999999s"),
            Err(DurationError::TooLarge)
        );
        assert_eq!(
            parse_millis("18446744073709551615d"),
            Err(DurationError::TooLarge)
        );
        assert_eq!(
            parse_millis("18446744073709551615ms 1ms"),
            Err(DurationError::TooLarge)
        );
    }
}
