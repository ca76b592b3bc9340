//! The catalogue of problem types as a web page, so that the `type` of every Problem the
//! runtime answers leads a reader to what it means: served at
//! [`CATALOGUE_PATH`](super::CATALOGUE_PATH), the path of the default `type` URIs, it has one
//! section per kind, whose `id` is the kind's slug.
//!
//! The page is rendered once from [`CATALOGUE`], the Markdown that is also the rustdoc of
//! [`ProblemKind`](super::ProblemKind) and the end of [docs/problems.md](https://github.com/idem-rs/idem/blob/main/docs/problems.md): a `### slug` heading
//! and a paragraph per kind, with only `**strong**` and `` `code` `` inside.

use std::sync::LazyLock;

use axum::response::Html;

use super::CATALOGUE;

/// The catalogue of idem's problem types as an HTML page: the handler to serve at
/// [`CATALOGUE_PATH`](super::CATALOGUE_PATH), where the default `type` URIs point.
///
/// ```
/// use axum::{Router, routing::get};
/// use idem::problem::{CATALOGUE_PATH, catalogue};
///
/// let app: Router = Router::new().route(CATALOGUE_PATH, get(catalogue));
/// ```
///
/// A service that sets its own `type` base
/// ([`IdempotencyBuilder::problem_type_base`](crate::runtime::IdempotencyBuilder::problem_type_base))
/// can serve the page there instead, or document the kinds in its own pages.
pub async fn catalogue() -> Html<&'static str> {
    Html(PAGE.as_str())
}

/// The page, rendered on first use.
static PAGE: LazyLock<String> = LazyLock::new(|| {
    catalogue_page(
        "Idempotency-Key problem types",
        "This service answers a request with an `Idempotency-Key` that it cannot process with \
         RFC 9457 Problem Details (`application/problem+json`). Their `type` ends with `#` and \
         one of the names below, which says what went wrong and what to do.",
        CATALOGUE,
    )
});

/// A catalogue of problem types as a whole HTML page, in the form of [`catalogue`]'s: a
/// service's own problem types can be served the same way, so that their `type` URIs lead
/// somewhere too.
///
/// `markdown` holds one section per type: a `### slug` heading (the `id` of its section on
/// the page, the fragment of its `type` URI) and the lines of one paragraph, with only
/// `**strong**` and `` `code` `` inside; anything else is shown as text. Lines before the
/// first heading are left out. `lead` is a paragraph in the same markup, under the title.
///
/// ```
/// use idem::problem::catalogue_page;
///
/// let page = catalogue_page(
///     "Shop problem types",
///     "The `type` of each error the shop answers ends with one of these names.",
///     "### payment-not-found\n**404.** The caller has no payment with this id.\n",
/// );
/// assert!(page.contains("<section id=\"payment-not-found\">"));
/// assert!(page.contains("<strong>404.</strong>"));
/// ```
pub fn catalogue_page(title: &str, lead: &str, markdown: &str) -> String {
    let title = escape(title);
    let mut page = format!(
        concat!(
            "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
            "<title>{title}</title>\n",
            "<style>body{{font-family:system-ui,sans-serif;max-width:46rem;margin:2rem auto;",
            "padding:0 1rem;line-height:1.5}}h2{{font-family:monospace;margin-top:2rem}}",
            "code{{background:#f2f2f2;padding:0 .2em}}section:target{{background:#fff7cc}}",
            "</style>\n</head>\n<body>\n<h1>{title}</h1>\n<p>{lead}</p>\n",
        ),
        title = title,
        lead = inline(&escape(lead)),
    );
    for (slug, text) in sections(markdown) {
        let slug = escape(slug);
        page.push_str(&format!(
            "<section id=\"{slug}\">\n<h2>{slug}</h2>\n<p>{}</p>\n</section>\n",
            inline(&escape(&text))
        ));
    }
    page.push_str("</body>\n</html>\n");
    page
}

/// The `(slug, paragraph)` of each `### slug` section, the paragraph's lines joined.
fn sections(catalogue: &str) -> Vec<(&str, String)> {
    let mut sections: Vec<(&str, String)> = Vec::new();
    for line in catalogue.lines() {
        if let Some(slug) = line.strip_prefix("### ") {
            sections.push((slug.trim(), String::new()));
        } else if let Some((_, text)) = sections.last_mut()
            && !line.trim().is_empty()
        {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(line.trim());
        }
    }
    sections
}

/// `text` safe inside an HTML element or a quoted attribute.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// `**strong**` and `` `code` `` of already escaped `text` as HTML elements.
fn inline(text: &str) -> String {
    let strong = pairs(text, "**", "<strong>", "</strong>");
    pairs(&strong, "`", "<code>", "</code>")
}

/// `text` with each pair of `mark`s replaced by `open` and `close`; an unpaired mark stays.
fn pairs(text: &str, mark: &str, open: &str, close: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(mark) {
        let after = &rest[start + mark.len()..];
        let Some(end) = after.find(mark) else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push_str(open);
        out.push_str(&after[..end]);
        out.push_str(close);
        rest = &after[end + mark.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{CATALOGUE_PATH, ProblemKind};

    #[test]
    fn every_kind_has_a_section_whose_id_is_its_slug() {
        let page = PAGE.as_str();
        let kinds = [
            ProblemKind::KeyMissing,
            ProblemKind::KeyMalformed,
            ProblemKind::PrincipalMissing,
            ProblemKind::RequestInFlight,
            ProblemKind::ResponseNotReplayable,
            ProblemKind::BodyTooLarge,
            ProblemKind::BodyUnreadable,
            ProblemKind::KeyReused,
            ProblemKind::HandlerFailed,
            ProblemKind::Misconfigured,
            ProblemKind::StoreUnavailable,
            ProblemKind::StepsChanged,
            ProblemKind::StepOutcomeUnknown,
        ];
        for kind in kinds {
            let section = format!("<section id=\"{}\">", kind.slug());
            assert!(page.contains(&section), "no {section}");
        }
        assert_eq!(page.matches("<section ").count(), kinds.len());
        assert!(!page.contains("**") && !page.contains('`'), "{page}");
    }

    #[test]
    fn markup_becomes_elements_and_text_is_escaped() {
        let page = catalogue_page(
            "Kinds",
            "A `lead`.",
            "### a-kind\n**400 Bad Request.** Send `Idempotency-Key`\n<once> & \"twice\".\n",
        );
        assert!(page.contains(
            "<section id=\"a-kind\">\n<h2>a-kind</h2>\n<p><strong>400 Bad Request.</strong> Send \
             <code>Idempotency-Key</code> &lt;once&gt; &amp; &quot;twice&quot;.</p>\n</section>"
        ));
        assert!(
            page.contains("<title>Kinds</title>") && page.contains("<p>A <code>lead</code>.</p>")
        );
    }

    #[test]
    fn the_path_is_that_of_the_default_types() {
        assert!(
            ProblemKind::KeyMissing
                .type_uri()
                .starts_with(CATALOGUE_PATH)
        );
    }
}
