//! What the documentation tests read in a Markdown file: its headings (as GitHub anchors its
//! sections), the links of its prose, and its fenced code blocks. A small reader of the
//! CommonMark the repository's pages use, not a general parser: ATX headings (`## Title`),
//! fences of three or more backticks or tildes, inline links and images, and reference
//! definitions.

use std::{
    collections::HashMap,
    fs,
    path::{Path, PathBuf},
};

/// The repository's root: the parent of this crate's manifest directory.
pub(crate) fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is inside the repository")
        .to_owned()
}

/// A Markdown file of the repository, read whole.
#[derive(Debug)]
pub(crate) struct Page {
    /// The path relative to the repository, with `/` between its parts.
    pub(crate) name: String,
    /// The whole text.
    pub(crate) text: String,
}

impl Page {
    /// Reads `name`, a path relative to the repository.
    pub(crate) fn read(name: &str) -> Self {
        let path = repository().join(name);
        let text =
            fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        Self {
            name: name.to_owned(),
            text,
        }
    }

    /// The lines outside fenced code blocks, with their numbers (from 1).
    pub(crate) fn prose(&self) -> impl Iterator<Item = (usize, &str)> {
        let mut fence: Option<&str> = None;
        self.text
            .lines()
            .enumerate()
            .filter_map(move |(index, line)| {
                let marker = fence_marker(line);
                match (fence, marker) {
                    (None, Some(opening)) => {
                        fence = Some(opening);
                        None
                    }
                    (Some(opening), Some(closing))
                        if closing.starts_with(opening) && is_bare_fence(line) =>
                    {
                        fence = None;
                        None
                    }
                    (Some(_), _) => None,
                    (None, None) => Some((index + 1, line)),
                }
            })
    }

    /// The anchors GitHub gives this page's headings, in order, plus the `id` and `name`
    /// attributes of its HTML.
    pub(crate) fn anchors(&self) -> Vec<String> {
        let mut anchors = Vec::new();
        // How often each heading's own slug was met, as GitHub counts them: a repeated
        // heading is numbered, `usage`, `usage-1`, `usage-2`.
        let mut occurrences: HashMap<String, usize> = HashMap::new();
        for (_, line) in self.prose() {
            if let Some(title) = heading(line) {
                let original = slug(title);
                let mut anchor = original.clone();
                while occurrences.contains_key(&anchor) {
                    let count = occurrences.get_mut(&original).unwrap();
                    *count += 1;
                    anchor = format!("{original}-{count}");
                }
                occurrences.insert(anchor.clone(), 0);
                anchors.push(anchor);
            }
            for attribute in ["id=\"", "name=\""] {
                let mut rest = line;
                while let Some(at) = rest.find(attribute) {
                    rest = &rest[at + attribute.len()..];
                    if let Some(end) = rest.find('"') {
                        anchors.push(rest[..end].to_owned());
                    }
                }
            }
        }
        anchors
    }

    /// The destinations of the prose's links and images, with their line numbers. Inline code
    /// is left out: a `[a](b)` inside backticks is text.
    pub(crate) fn links(&self) -> Vec<(usize, String)> {
        let mut links = Vec::new();
        for (number, line) in self.prose() {
            let line = without_code_spans(line);
            let mut rest = line.as_str();
            while let Some(at) = rest.find("](") {
                rest = &rest[at + 2..];
                let end = rest.find([')', ' ']).unwrap_or(rest.len());
                links.push((number, rest[..end].trim_matches(['<', '>']).to_owned()));
            }
            // A reference definition: `[label]: destination`.
            let trimmed = line.trim_start();
            if trimmed.starts_with('[')
                && let Some(at) = trimmed.find("]: ")
            {
                let destination = trimmed[at + 3..].split_whitespace().next();
                links.extend(destination.map(|target| (number, target.to_owned())));
            }
        }
        links
    }

    /// The inline code spans of the prose that look like a path of the repository, with their
    /// line numbers: a span without spaces or wildcards whose first part is a folder next to
    /// the page or at the top of the repository (`idem-core/src/key.rs`, `.ci/run`,
    /// `tests/binary.rs` in a crate's README). Build output (`target/...`) is not the
    /// repository's, and a path that climbs out first (`../idem`) is the reader's.
    pub(crate) fn named_paths(&self) -> Vec<(usize, String)> {
        let mut paths = Vec::new();
        for (number, line) in self.prose() {
            for span in code_spans(line) {
                let Some((first, _)) = span.split_once('/') else {
                    continue;
                };
                let plain = !span.contains([' ', '*', '{', '<', '$', '[', '?', ':']);
                let folder = |base: &Path| base.join(first).is_dir();
                // `../idem`, beside the repository, is the user's folder, not one of ours.
                let named = !matches!(first, "" | "." | ".." | "target");
                if plain && named && (folder(&self.folder()) || folder(&repository())) {
                    paths.push((number, span.to_owned()));
                }
            }
        }
        paths
    }

    /// The folder the page is in.
    pub(crate) fn folder(&self) -> PathBuf {
        let page = repository().join(&self.name);
        page.parent().expect("a page is in a folder").to_owned()
    }

    /// The values of the page's marker comments of `kind`, each a line of its own:
    /// `<!-- excerpt: idem/examples/problem_json.rs -->` is the `excerpt` marker of that
    /// path.
    pub(crate) fn markers(&self, kind: &str) -> Vec<String> {
        let opening = format!("<!-- {kind}: ");
        self.text
            .lines()
            .filter_map(|line| line.trim().strip_prefix(opening.as_str()))
            .filter_map(|rest| rest.strip_suffix(" -->"))
            .map(str::to_owned)
            .collect()
    }

    /// The code block that directly follows the HTML comment `marker` (a line of its own),
    /// without its fences.
    pub(crate) fn block_after(&self, marker: &str) -> Option<String> {
        let mut lines = self.text.lines().skip_while(|line| line.trim() != marker);
        lines.next()?;
        let opening = lines.next()?;
        let fence = fence_marker(opening)?;
        let mut code = String::new();
        for line in lines {
            if fence_marker(line).is_some_and(|closing| closing.starts_with(fence)) {
                return Some(code);
            }
            code.push_str(line);
            code.push('\n');
        }
        None
    }
}

/// Every Markdown file of the repository outside build output and hidden folders, by name.
pub(crate) fn pages() -> Vec<String> {
    let root = repository();
    let mut names = Vec::new();
    let mut folders = vec![root.clone()];
    while let Some(folder) = folders.pop() {
        let entries =
            fs::read_dir(&folder).unwrap_or_else(|error| panic!("{}: {error}", folder.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            let file_name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !file_name.starts_with('.') && file_name != "target" {
                    folders.push(path);
                }
            } else if file_name.ends_with(".md") {
                let relative = path.strip_prefix(&root).unwrap();
                let parts: Vec<_> = relative
                    .components()
                    .map(|part| part.as_os_str().to_string_lossy().into_owned())
                    .collect();
                names.push(parts.join("/"));
            }
        }
    }
    names.sort();
    names
}

/// The path `target` names from the page `from`, both relative to the repository.
pub(crate) fn resolve(from: &str, target: &str) -> PathBuf {
    let root = repository();
    if let Some(absolute) = target.strip_prefix('/') {
        return root.join(absolute);
    }
    let base = Path::new(from).parent().unwrap_or(Path::new(""));
    let mut path = root.join(base);
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                path.pop();
            }
            part => path.push(part),
        }
    }
    path
}

/// The fence a line opens or closes (its backticks or tildes), if it is one.
fn fence_marker(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    for mark in ['`', '~'] {
        let run = trimmed.len() - trimmed.trim_start_matches(mark).len();
        if run >= 3 {
            return Some(&trimmed[..run]);
        }
    }
    None
}

/// Whether a fence line has nothing after its marks (only such a line closes a block).
fn is_bare_fence(line: &str) -> bool {
    line.trim().trim_matches(['`', '~']).is_empty()
}

/// The text of an ATX heading (`## Title ##` gives `Title`).
fn heading(line: &str) -> Option<&str> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !rest.is_empty() && !rest.starts_with(' ') {
        return None;
    }
    Some(rest.trim().trim_end_matches('#').trim_end())
}

/// The anchor GitHub makes of a heading: the rendered text (inline code keeps its text;
/// emphasis marks and link destinations go), lower case, every character that is not a letter,
/// a digit, `-`, `_` or a space dropped, and each space a `-`.
fn slug(title: &str) -> String {
    let text = link_texts(title);
    text.chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .flat_map(char::to_lowercase)
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// `text` with each `[label](destination)` replaced by its label.
fn link_texts(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|at| open + at) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|at| close + at) else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// `line` with its inline code spans (`` `...` ``) removed.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some((before, _, after)) = next_code_span(rest) {
        out.push_str(before);
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The contents of `line`'s inline code spans.
fn code_spans(line: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    let mut rest = line;
    while let Some((_, span, after)) = next_code_span(rest) {
        spans.push(span.trim());
        rest = after;
    }
    spans
}

/// The first code span of `text`: the text before it, its content, and the text after it.
fn next_code_span(text: &str) -> Option<(&str, &str, &str)> {
    let open = text.find('`')?;
    let run = text[open..].len() - text[open..].trim_start_matches('`').len();
    let marks = &text[open..open + run];
    let after = &text[open + run..];
    let close = after.find(marks)?;
    Some((&text[..open], &after[..close], &after[close + run..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_github() {
        assert_eq!(
            slug("Checking any API: idem-check"),
            "checking-any-api-idem-check"
        );
        assert_eq!(slug("`idem-core` features"), "idem-core-features");
        assert_eq!(slug("What a replay checks"), "what-a-replay-checks");
        assert_eq!(slug("key-missing"), "key-missing");
        assert_eq!(
            slug("The `max_ttl` cap, *per route*"),
            "the-max_ttl-cap-per-route"
        );
        assert_eq!(slug("See [the bank](x.md#y) (2)"), "see-the-bank-2");
    }

    #[test]
    fn repeated_headings_are_numbered_and_code_blocks_are_not_prose() {
        let page = Page {
            name: "x.md".into(),
            text: "# Usage\n\n```sh\n# not a heading [a](b)\n```\n\n## Usage\n\n## Usage\n\
                   see [it](#usage-1) and `[no](link)`\n\n[def]: other.md#x\n"
                .into(),
        };
        assert_eq!(page.anchors(), ["usage", "usage-1", "usage-2"]);
        assert_eq!(
            page.links(),
            [(10, "#usage-1".to_owned()), (12, "other.md#x".to_owned())]
        );
    }

    #[test]
    fn a_block_is_found_by_the_comment_before_it() {
        let page = Page {
            name: "x.md".into(),
            text: "text\n<!-- here -->\n```rust\nfn main() {}\n```\n".into(),
        };
        assert_eq!(page.block_after("<!-- here -->").unwrap(), "fn main() {}\n");
        assert_eq!(page.block_after("<!-- elsewhere -->"), None);
    }
}
