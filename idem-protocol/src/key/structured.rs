//! The part of RFC 9651 (Structured Field Values) a quoted key needs: an Item whose bare item
//! is a String, its parameters read and skipped; and, for a value that is not such an Item,
//! whether it is a List of several members (a proxy's folding of repeated header lines).
//!
//! Written here rather than taken from a structured-fields crate: the key needs these few
//! rules, and the crate it replaced brought four dependencies of its own to every service's
//! build. Every rule follows the RFC's parsing algorithms (§4.2), section by section, and a
//! test holds the result against that crate on generated values.

use std::borrow::Cow;

/// A parse that failed at `at`, a byte index of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed {
    pub(crate) at: usize,
}

/// Parses `input` as an RFC 9651 Item whose bare item is a String (§4.2.3), and answers the
/// string's content, borrowed when it has no escapes. Parameters are parsed and dropped, as RFC
/// 9651 asks of parameters a field does not define. Leading and trailing spaces are the
/// caller's to trim.
pub(crate) fn string_item(input: &str) -> Result<Cow<'_, str>, Malformed> {
    let mut cursor = Cursor::new(input);
    let content = cursor.string()?;
    cursor.parameters()?;
    // §4.2: spaces after the item are discarded, and anything else is a fault, where it is.
    cursor.skip_sp();
    cursor.end()?;
    Ok(content)
}

/// Whether `input` parses as an RFC 9651 List (§4.2.1) of more than one member.
pub(crate) fn is_list_of_several(input: &str) -> bool {
    let mut cursor = Cursor::new(input);
    let mut members = 0;
    loop {
        if cursor.member().is_err() {
            return false;
        }
        members += 1;
        cursor.skip_ows();
        if cursor.is_empty() {
            return members > 1;
        }
        if !cursor.eat(b',') {
            return false;
        }
        cursor.skip_ows();
        if cursor.is_empty() {
            // A trailing comma is not a list.
            return false;
        }
    }
}

/// A position in the input, consumed from the left.
struct Cursor<'a> {
    input: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(input: &'a str) -> Self {
        Self { input, at: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.input.as_bytes().get(self.at).copied()
    }

    fn is_empty(&self) -> bool {
        self.at >= self.input.len()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let matched = self.peek() == Some(byte);
        self.at += usize::from(matched);
        matched
    }

    fn fail<T>(&self) -> Result<T, Malformed> {
        Err(Malformed { at: self.at })
    }

    fn end(&self) -> Result<(), Malformed> {
        if self.is_empty() { Ok(()) } else { self.fail() }
    }

    fn skip_sp(&mut self) {
        while self.eat(b' ') {}
    }

    /// Optional whitespace: spaces and tabs (around a List's commas).
    fn skip_ows(&mut self) {
        while self.eat(b' ') || self.eat(b'\t') {}
    }

    /// Consumes bytes while `accept` holds; answers how many.
    fn take_while(&mut self, accept: impl Fn(u8) -> bool) -> usize {
        let start = self.at;
        while self.peek().is_some_and(&accept) {
            self.at += 1;
        }
        self.at - start
    }

    /// §4.2.1.1: an Item, or an Inner List with its parameters.
    fn member(&mut self) -> Result<(), Malformed> {
        if self.eat(b'(') {
            loop {
                self.skip_sp();
                if self.eat(b')') {
                    return self.parameters();
                }
                self.bare_item()?;
                self.parameters()?;
                if !matches!(self.peek(), Some(b' ' | b')')) {
                    return self.fail();
                }
            }
        }
        self.bare_item()?;
        self.parameters()
    }

    /// §4.2.3.2: `*( ";" *SP key [ "=" bare-item ] )`.
    fn parameters(&mut self) -> Result<(), Malformed> {
        while self.eat(b';') {
            self.skip_sp();
            self.key()?;
            if self.eat(b'=') {
                self.bare_item()?;
            }
        }
        Ok(())
    }

    /// §4.2.3.3: `( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" )`.
    fn key(&mut self) -> Result<(), Malformed> {
        if !self
            .peek()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'*')
        {
            return self.fail();
        }
        self.take_while(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'.' | b'*')
        });
        Ok(())
    }

    /// §4.2.3.1: the bare item's type is told by its first character.
    fn bare_item(&mut self) -> Result<(), Malformed> {
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => self.number(true),
            Some(b'"') => self.string().map(drop),
            Some(b'*' | b'A'..=b'Z' | b'a'..=b'z') => {
                self.take_while(|b| is_tchar(b) || b == b':' || b == b'/');
                Ok(())
            }
            Some(b':') => self.byte_sequence(),
            Some(b'?') => {
                self.at += 1;
                if self.eat(b'0') || self.eat(b'1') {
                    Ok(())
                } else {
                    self.fail()
                }
            }
            Some(b'@') => {
                self.at += 1;
                self.number(false)
            }
            Some(b'%') => self.display_string(),
            _ => self.fail(),
        }
    }

    /// §4.2.4: an Integer (at most 15 digits) or, where allowed, a Decimal (at most 12 digits,
    /// a point, and 1 to 3 digits).
    fn number(&mut self, decimal_allowed: bool) -> Result<(), Malformed> {
        self.eat(b'-');
        let integer = self.take_while(|b| b.is_ascii_digit());
        if integer == 0 {
            return self.fail();
        }
        if !decimal_allowed || !self.eat(b'.') {
            return if integer > 15 { self.fail() } else { Ok(()) };
        }
        if integer > 12 {
            return self.fail();
        }
        let fraction = self.take_while(|b| b.is_ascii_digit());
        if (1..=3).contains(&fraction) {
            Ok(())
        } else {
            self.fail()
        }
    }

    /// §4.2.5: `DQUOTE *( unescaped / "%" / "\" ( DQUOTE / "\" ) ) DQUOTE`, printable ASCII.
    fn string(&mut self) -> Result<Cow<'a, str>, Malformed> {
        if !self.eat(b'"') {
            return self.fail();
        }
        let start = self.at;
        let mut unescaped: Option<String> = None;
        loop {
            match self.peek() {
                None => return self.fail(),
                Some(b'"') => {
                    let raw = &self.input[start..self.at];
                    self.at += 1;
                    return Ok(unescaped.map_or(Cow::Borrowed(raw), Cow::Owned));
                }
                Some(b'\\') => {
                    let escaped = self.input.as_bytes().get(self.at + 1).copied();
                    let Some(escaped @ (b'"' | b'\\')) = escaped else {
                        return self.fail();
                    };
                    let text = unescaped.get_or_insert_with(|| self.input[start..self.at].into());
                    text.push(char::from(escaped));
                    self.at += 2;
                }
                Some(byte @ 0x20..=0x7E) => {
                    if let Some(text) = &mut unescaped {
                        text.push(char::from(byte));
                    }
                    self.at += 1;
                }
                Some(_) => return self.fail(),
            }
        }
    }

    /// §4.2.7: `":" *(base64) ":"`, which must decode: `=` only as padding at the end, and no
    /// length that leaves a lone character (padding may be left out and pad bits need not be
    /// zero, as the RFC asks parsers to allow).
    fn byte_sequence(&mut self) -> Result<(), Malformed> {
        self.at += 1;
        let digits = self.take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/'));
        let padding = self.take_while(|b| b == b'=');
        // A last group of 2 or 3 characters may carry up to 2 or 1 `=`: padded, partly padded
        // or not at all, as the structured-fields parsers in use accept.
        let last = digits % 4;
        let decodes = last != 1 && (padding == 0 || (last >= 2 && padding <= 4 - last));
        if decodes && self.eat(b':') {
            Ok(())
        } else {
            self.fail()
        }
    }

    /// §4.2.10: `"%" DQUOTE *( unescaped / "\" / pct-encoded ) DQUOTE`, whose bytes are UTF-8.
    fn display_string(&mut self) -> Result<(), Malformed> {
        self.at += 1;
        if !self.eat(b'"') {
            return self.fail();
        }
        let mut bytes = Vec::new();
        loop {
            match self.peek() {
                None => return self.fail(),
                Some(b'"') => {
                    self.at += 1;
                    return match std::str::from_utf8(&bytes) {
                        Ok(_) => Ok(()),
                        Err(_) => self.fail(),
                    };
                }
                Some(b'%') => {
                    let hex = self.input.as_bytes().get(self.at + 1..self.at + 3);
                    let byte = hex.and_then(|hex| {
                        let lower = hex
                            .iter()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
                        let text = std::str::from_utf8(hex).ok()?;
                        lower.then(|| u8::from_str_radix(text, 16).ok()).flatten()
                    });
                    let Some(byte) = byte else {
                        return self.fail();
                    };
                    bytes.push(byte);
                    self.at += 3;
                }
                Some(byte @ 0x20..=0x7E) => {
                    bytes.push(byte);
                    self.at += 1;
                }
                Some(_) => return self.fail(),
            }
        }
    }
}

/// RFC 9110's `tchar`.
fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_item_answers_its_content_and_drops_its_parameters() {
        assert_eq!(string_item(r#""abc""#).unwrap(), "abc");
        assert!(matches!(string_item(r#""abc""#).unwrap(), Cow::Borrowed(_)));
        assert_eq!(string_item(r#""a\"b\\c""#).unwrap(), r#"a"b\c"#);
        assert_eq!(string_item(r#""abc";v=1;x;y="z";w=?0"#).unwrap(), "abc");
        assert_eq!(
            string_item(r#""abc"; v=:AQID:;d=@1700000000;n=-1.5"#).unwrap(),
            "abc"
        );
        assert_eq!(string_item(r#""abc";s=%"caf%c3%a9""#).unwrap(), "abc");
    }

    #[test]
    fn a_malformed_item_says_where() {
        assert_eq!(string_item(r#""abc"#), Err(Malformed { at: 4 }));
        assert_eq!(string_item(r#""a\bc""#), Err(Malformed { at: 2 }));
        assert_eq!(string_item(r#""abc" x"#), Err(Malformed { at: 6 }));
        assert_eq!(string_item(r#""abc";"#), Err(Malformed { at: 6 }));
        assert_eq!(string_item(r#""abc";V=1"#), Err(Malformed { at: 6 }));
        assert_eq!(
            string_item(r#""abc";v=1234567890123456"#),
            Err(Malformed { at: 24 })
        );
        assert_eq!(string_item(r#""abc";v=1.2345"#), Err(Malformed { at: 14 }));
        assert_eq!(
            string_item(r#""abc";s=%"%C3%A9""#),
            Err(Malformed { at: 10 })
        );
        assert_eq!(string_item(r#""abc";s=%"%ff""#), Err(Malformed { at: 14 }));
    }

    #[test]
    fn lists_of_several_members_are_told_apart() {
        assert!(is_list_of_several(r#""a", "b""#));
        assert!(is_list_of_several(r#""a";x=1 ,	b, (c "d");e, 1.5"#));
        assert!(!is_list_of_several(r#""a""#));
        assert!(!is_list_of_several(r#""a","#));
        assert!(!is_list_of_several(r#""a" "b""#));
        assert!(!is_list_of_several(r#""a", "b"#));
    }
}
