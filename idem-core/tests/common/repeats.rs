//! An oracle for duplicate member names, apart from the canonicalizer under test: serde_json
//! reads a text into nothing but a set of names per object. Used by idem-core's property tests
//! and by the `canonical_json` fuzz target, which includes this file by path.

use std::collections::HashSet;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Whether a JSON text names a member twice in one of its objects; `None` when serde_json does
/// not read the text at all.
pub(crate) fn repeats_a_name(json: &[u8]) -> Option<bool> {
    serde_json::from_slice::<Repeats>(json)
        .ok()
        .map(|Repeats(repeats)| repeats)
}

struct Repeats(bool);

impl<'de> Deserialize<'de> for Repeats {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RepeatsVisitor)
    }
}

struct RepeatsVisitor;

impl<'de> Visitor<'de> for RepeatsVisitor {
    type Value = Repeats;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("JSON")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_str<E>(self, _: &str) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_unit<E>(self) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Repeats, A::Error> {
        let mut repeats = false;
        while let Some(Repeats(inner)) = items.next_element()? {
            repeats |= inner;
        }
        Ok(Repeats(repeats))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Repeats, A::Error> {
        let mut names = HashSet::new();
        let mut repeats = false;
        while let Some(name) = map.next_key::<String>()? {
            repeats |= !names.insert(name);
            let Repeats(inner) = map.next_value()?;
            repeats |= inner;
        }
        Ok(Repeats(repeats))
    }
}
