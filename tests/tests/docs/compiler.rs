//! The compiler's messages that the docs quote are the ones the attribute's compile-fail tests
//! expect (`idem-macros/tests/ui/fail/*.stderr`), word for word: a message that changes
//! changes its test's `.stderr`, and this then points at every page that quotes the old one.

use std::{collections::HashSet, fs};

use crate::markdown::{Page, pages, repository};

/// Every line of the compile-fail tests' expected output that is an error's message.
fn expected_messages() -> HashSet<String> {
    let folder = repository().join("idem-macros/tests/ui/fail");
    let mut messages = HashSet::new();
    for entry in fs::read_dir(&folder).unwrap() {
        let path = entry.unwrap().path();
        if path
            .extension()
            .is_some_and(|extension| extension == "stderr")
        {
            let text = fs::read_to_string(&path).unwrap();
            messages.extend(
                text.lines()
                    .filter(|line| is_message(line))
                    .map(str::to_owned),
            );
        }
    }
    messages
}

fn is_message(line: &str) -> bool {
    line.starts_with("error: ") || line.starts_with("error[E")
}

#[test]
fn every_quoted_compiler_message_is_a_compile_fail_tests() {
    let expected = expected_messages();
    assert!(!expected.is_empty(), "no compile-fail test was read");
    let mut stale = Vec::new();
    for name in pages() {
        let page = Page::read(&name);
        let prose: HashSet<usize> = page.prose().map(|(number, _)| number).collect();
        for (index, line) in page.text.lines().enumerate() {
            let in_code = !prose.contains(&(index + 1));
            if in_code && is_message(line) && !expected.contains(line) {
                stale.push(format!("{name}:{}: {line}", index + 1));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "{} quoted message(s) that no compile-fail test expects (copy them from its .stderr):\n{}",
        stale.len(),
        stale.join("\n")
    );
}
