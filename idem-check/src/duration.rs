//! Durations as a user writes them (`24h`, `2s`, `500ms`) and as the report shows them.

use std::time::Duration;

/// Reads a duration: a whole number followed by `ms`, `s`, `m`, `h` or `d`, as in
/// `#[idempotent(ttl = "24h")]`. Months and years are refused on purpose: no API keeps keys
/// that long, and `1M` would be a typo as often as not.
///
/// ```
/// use std::time::Duration;
/// use idem_check::duration::parse_duration;
///
/// assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
/// assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
/// assert!(parse_duration("1M").is_err());
/// ```
///
/// # Errors
///
/// A message that names the valid units, for anything else.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let invalid = || {
        format!(
            "{text:?} is not a duration; write a whole number and one of ms, s, m, h, d, as in 24h or 1500ms"
        )
    };
    let number: u64 = number.parse().map_err(|_| invalid())?;
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(invalid()),
    };
    number
        .checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(invalid)
}

/// A duration for a reader: `240 ms`, `1.5 s`, `2 min`, `24 h`.
#[must_use]
pub fn show(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1_000 {
        format!("{millis} ms")
    } else if millis < 60_000 {
        format!("{:.1} s", duration.as_secs_f64())
    } else if millis < 3_600_000 && millis.is_multiple_of(60_000) {
        format!("{} min", millis / 60_000)
    } else if millis < 3_600_000 {
        format!("{:.0} s", duration.as_secs_f64())
    } else if millis.is_multiple_of(3_600_000) {
        format!("{} h", millis / 3_600_000)
    } else {
        format!("{:.1} h", duration.as_secs_f64() / 3_600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration(" 2s "), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("90m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("3d"), Ok(Duration::from_secs(259_200)));
        for bad in [
            "",
            "s",
            "2",
            "2 s",
            "1.5s",
            "1M",
            "1y",
            "-1s",
            "99999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn shown_for_a_reader() {
        assert_eq!(show(Duration::from_millis(240)), "240 ms");
        assert_eq!(show(Duration::from_millis(1_500)), "1.5 s");
        assert_eq!(show(Duration::from_secs(120)), "2 min");
        assert_eq!(show(Duration::from_secs(90)), "90 s");
        assert_eq!(show(Duration::from_secs(86_400)), "24 h");
    }
}
