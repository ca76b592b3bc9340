//! Every relative link of the repository's Markdown pages leads somewhere: the file or folder
//! it names exists, and an anchor (`page.md#section`, or `#section` on the same page) is one of
//! the anchors GitHub gives the target's headings. A line anchor on a source file (`#L12`)
//! names a line the file has. A path the prose names as code (`idem-core/src/key.rs`) exists
//! too, next to the page or from the top of the repository: pages name files that way as
//! often as they link them.

use std::{collections::HashMap, fs, path::Path};

use crate::markdown::{Page, pages, repository, resolve};

#[test]
fn every_relative_link_and_anchor_resolves() {
    let names = pages();
    for required in [
        "README.md",
        "CHANGELOG.md",
        "docs/contract.md",
        "docs/problems.md",
    ] {
        assert!(
            names.iter().any(|name| name == required),
            "{required} is missing"
        );
    }
    let pages: HashMap<String, Page> = names
        .iter()
        .map(|name| (name.clone(), Page::read(name)))
        .collect();
    let mut broken = Vec::new();
    for page in pages.values() {
        for (line, target) in page.links() {
            if let Err(why) = check(page, &target, &pages) {
                broken.push(format!("{}:{line}: {target}: {why}", page.name));
            }
        }
    }
    broken.sort();
    assert!(
        broken.is_empty(),
        "{} broken link(s):\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn every_path_named_as_code_exists() {
    let mut missing = Vec::new();
    for name in pages() {
        let page = Page::read(&name);
        for (line, named) in page.named_paths() {
            let path = named.trim_end_matches('/');
            if !page.folder().join(path).exists() && !repository().join(path).exists() {
                missing.push(format!("{name}:{line}: {named}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} path(s) named but missing:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

/// Whether `target`, a link of `page`, resolves; why not otherwise.
fn check(page: &Page, target: &str, pages: &HashMap<String, Page>) -> Result<(), String> {
    if is_absolute(target) {
        return Ok(());
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        repository().join(&page.name)
    } else {
        resolve(&page.name, path)
    };
    if !file.exists() {
        return Err("no such file or folder".to_owned());
    }
    let Some(anchor) = anchor else {
        return Ok(());
    };
    if let Some(name) = markdown_name(&file) {
        let anchors = pages
            .get(&name)
            .map(Page::anchors)
            .ok_or_else(|| format!("{name} is not one of the pages read"))?;
        return if anchors.iter().any(|known| known == anchor) {
            Ok(())
        } else {
            Err(format!("no heading gives the anchor #{anchor}"))
        };
    }
    line_anchor(&file, anchor)
}

/// A destination with a scheme (`https:`, `mailto:`) leaves the repository: not checked here.
fn is_absolute(target: &str) -> bool {
    target.split_once(':').is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// The page name of `file` when it is a Markdown file of the repository.
fn markdown_name(file: &Path) -> Option<String> {
    let file = file.canonicalize().ok()?;
    let relative = file.strip_prefix(repository().canonicalize().ok()?).ok()?;
    let name = relative.to_str()?.replace('\\', "/");
    name.ends_with(".md").then_some(name)
}

/// Whether `anchor` (`L12` or `L12-L20`) names lines that `file` has.
fn line_anchor(file: &Path, anchor: &str) -> Result<(), String> {
    let lines = fs::read_to_string(file)
        .map_err(|error| format!("an anchor on an unreadable file: {error}"))?
        .lines()
        .count();
    let last = anchor
        .rsplit('-')
        .next()
        .and_then(|part| part.strip_prefix('L'))
        .and_then(|number| number.parse::<usize>().ok())
        .ok_or_else(|| format!("#{anchor} on a file that is not Markdown is no line anchor"))?;
    if (1..=lines).contains(&last) {
        Ok(())
    } else {
        Err(format!("the file has {lines} lines"))
    }
}
