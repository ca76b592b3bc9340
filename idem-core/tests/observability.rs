//! docs/observability.md lists every event the crates log and every metric they emit: this
//! reads the source of `idem-core`, `idem-client` and the stores, finds each `tracing` event and each
//! `metrics` call, and compares them with the page's tables, both ways (a row names an event
//! by its level and the start of its message). (The outcomes, the
//! span's fields and the store calls are compared by `observe`'s own tests.)

use std::{collections::BTreeSet, fs, path::Path};

const DOCS: &str = include_str!("../../docs/observability.md");

/// The cells of the table rows in the page's section `heading`.
fn rows(heading: &str) -> Vec<Vec<String>> {
    DOCS.lines()
        .skip_while(|line| *line != format!("## {heading}"))
        .skip(1)
        .take_while(|line| !line.starts_with("## "))
        .filter(|line| line.starts_with("| ") && !line.starts_with("| ---"))
        .skip(1)
        .map(|row| {
            row.trim_matches('|')
                .split(" | ")
                .map(|cell| cell.trim().to_owned())
                .collect()
        })
        .collect()
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, files: &mut Vec<(String, String)>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, files);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push((
                path.display().to_string(),
                fs::read_to_string(&path).unwrap(),
            ));
        }
    }
}

fn every_source() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    for sibling in ["idem-client", "idem-redis", "idem-postgres"] {
        sources(&root.join("..").join(sibling).join("src"), &mut files);
    }
    files
}

/// The invocations of `macro_name!(...)` in `source`: what is between the parentheses.
fn invocations<'a>(source: &'a str, macro_name: &str) -> Vec<&'a str> {
    let opening = format!("{macro_name}!(");
    let mut found = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find(&opening) {
        let body = &rest[at + opening.len()..];
        let (mut depth, mut end, mut in_string) = (1, 0, false);
        let mut chars = body.char_indices();
        while let Some((index, c)) = chars.next() {
            match c {
                '\\' if in_string => {
                    chars.next();
                }
                '"' => in_string = !in_string,
                '(' if !in_string => depth += 1,
                ')' if !in_string => {
                    depth -= 1;
                    if depth == 0 {
                        end = index;
                        break;
                    }
                }
                _ => {}
            }
        }
        found.push(&body[..end]);
        rest = &body[end..];
    }
    found
}

/// The string literals of an invocation that are not a field's value (`name = "..."`), with
/// `\`-continued lines joined as the compiler joins them.
fn messages(invocation: &str) -> Vec<String> {
    let mut literals = Vec::new();
    let mut rest = invocation;
    while let Some(start) = rest.find('"') {
        let before = rest[..start].trim_end();
        let text = &rest[start + 1..];
        let mut end = 0;
        let mut chars = text.char_indices();
        while let Some((index, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    end = index;
                    break;
                }
                _ => {}
            }
        }
        if !before.ends_with('=') {
            let mut joined = String::new();
            let mut lines = text[..end].split("\\\n");
            joined.push_str(lines.next().unwrap_or_default());
            for line in lines {
                joined.push_str(line.trim_start());
            }
            literals.push(joined.replace("\\\"", "\""));
        }
        rest = &text[end + 1..];
    }
    literals
}

/// Each event's level and message, up to its first value (`{...}`), trimmed.
fn events_in_source() -> BTreeSet<(String, String)> {
    let mut events = BTreeSet::new();
    for (file, source) in every_source() {
        for level in ["error", "warn", "info", "debug", "trace"] {
            for invocation in invocations(&source, &format!("tracing::{level}")) {
                let message = messages(invocation)
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| panic!("an event without a message in {file}"));
                let message = message.split('{').next().unwrap_or_default().trim_end();
                // The outcomes' one event, whose message is its detail: the Outcomes table.
                if message == "idempotency:" && invocation.contains("outcome = name") {
                    continue;
                }
                events.insert((level.to_uppercase(), message.to_owned()));
            }
        }
    }
    events
}

/// Whether the documented row (a level and the start of a message) is the logged event.
fn names(row: &(String, String), event: &(String, String)) -> bool {
    row.0 == event.0 && event.1.starts_with(&row.1)
}

#[test]
fn every_event_is_documented_and_every_documented_event_is_logged() {
    let documented: Vec<(String, String)> = rows("Events")
        .into_iter()
        .map(|cells| (cells[0].clone(), cells[1].trim_matches('`').to_owned()))
        .collect();
    let logged = events_in_source();
    let undocumented: Vec<_> = logged
        .iter()
        .filter(|event| !documented.iter().any(|row| names(row, event)))
        .collect();
    assert!(
        undocumented.is_empty(),
        "logged but not documented: {undocumented:#?}"
    );
    let stale: Vec<_> = documented
        .iter()
        .filter(|row| !logged.iter().any(|event| names(row, event)))
        .collect();
    assert!(stale.is_empty(), "documented but never logged: {stale:#?}");
}

#[test]
fn every_metric_is_documented_and_every_documented_metric_is_emitted() {
    let documented: BTreeSet<(String, String)> = rows("Metrics")
        .into_iter()
        .map(|cells| (cells[0].trim_matches('`').to_owned(), cells[1].clone()))
        .collect();
    let mut emitted = BTreeSet::new();
    for (_, source) in every_source() {
        for kind in ["counter", "gauge", "histogram"] {
            for invocation in invocations(&source, &format!("metrics::{kind}")) {
                let name = messages(invocation).into_iter().next().unwrap();
                emitted.insert((name, kind.to_owned()));
            }
        }
    }
    assert_eq!(emitted, documented);
}
