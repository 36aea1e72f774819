//! Text and JSON output shared by the commands.

use std::io::IsTerminal;

use serde_json::Value;

/// Whether the user allows colours at all: `NO_COLOR` unset or empty (<https://no-color.org>).
pub(crate) fn colour_allowed() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Whether stdout is a terminal (a person reading), as opposed to a pipe or a file.
pub(crate) fn stdout_is_terminal() -> bool {
    std::io::stdout().is_terminal()
}

/// Colours for stdout: ANSI escapes only when stdout is a terminal and colours are allowed,
/// so a pipe, a file or `--json` never carries escape codes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Paint {
    on: bool,
}

impl Paint {
    /// Decides once, from stdout and `NO_COLOR`.
    pub(crate) fn stdout() -> Self {
        Self {
            on: stdout_is_terminal() && colour_allowed(),
        }
    }

    /// Paint that always (`true`) or never colours, for tests of coloured layouts.
    #[cfg(test)]
    pub(crate) fn forced(on: bool) -> Self {
        Self { on }
    }

    /// `text` in red (failures).
    pub(crate) fn red(self, text: &str) -> String {
        self.wrap("31", text)
    }

    /// `text` in green (completed, done).
    pub(crate) fn green(self, text: &str) -> String {
        self.wrap("32", text)
    }

    /// `text` in yellow (delayed, paused, warnings).
    pub(crate) fn yellow(self, text: &str) -> String {
        self.wrap("33", text)
    }

    /// `text` in bold (headers).
    pub(crate) fn bold(self, text: &str) -> String {
        self.wrap("1", text)
    }

    fn wrap(self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

/// Prints `value` as pretty JSON on stdout.
pub(crate) fn print_json(value: &Value) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        // A `Value` always serialises; keep a readable fallback rather than a panic.
        Err(_) => println!("{value}"),
    }
}

/// How many columns `text` takes on a terminal: its characters, not counting the ANSI colour
/// sequences [`Paint`] adds (so a coloured cell lines up with plain ones).
pub(crate) fn visible_width(text: &str) -> usize {
    let mut width = 0;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // `ESC [ parameters m`: skip through the final letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            width += 1;
        }
    }
    width
}

/// `text` followed by spaces up to `width` visible columns.
fn pad(text: &str, width: usize) -> String {
    let fill = width.saturating_sub(visible_width(text));
    format!("{text}{}", " ".repeat(fill))
}

/// Formats `rows` as two left-aligned columns, the first padded to its widest entry.
pub(crate) fn two_columns(rows: &[(String, String)]) -> String {
    let width = rows
        .iter()
        .map(|(k, _)| visible_width(k))
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (key, value) in rows {
        out.push_str(&format!("{}  {value}\n", pad(key, width)));
    }
    out
}

/// Formats `rows` under `headers` as left-aligned columns, each padded to its widest cell and
/// separated by two spaces; the last column is not padded (no trailing blanks).
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| visible_width(h)).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(visible_width(cell));
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, (cell, width)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            text.push_str(&pad(cell, *width));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut headers.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// The error and its causes joined with `: `, skipping a cause whose text the previous message
/// already contains (many library errors embed their source in their own message), in plain
/// words (see [`plain_words`]).
pub(crate) fn error_chain(error: &anyhow::Error) -> String {
    let mut out = String::new();
    let mut previous = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if !previous.is_empty() && previous.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
        previous = text;
    }
    plain_words(&out)
}

/// `text` with the Rust `Debug` renderings some libraries put in their messages turned into
/// words: fred's `IO Error: Os { code: 111, kind: ConnectionRefused, message: "Connection
/// refused" }` becomes `connection refused (os error 111)`, `Kind(TimedOut)` becomes
/// `timed out`, `Custom { kind: Other, error: "x" }` becomes `x`.
pub(crate) fn plain_words(text: &str) -> String {
    let mut out = text.replace("IO Error: ", "");
    while let Some(start) = out.find("Os { code: ") {
        let Some(len) = out[start..].find('}') else {
            break;
        };
        let inner = out[start + "Os { ".len()..start + len].trim().to_owned();
        let field = |name: &str| {
            inner.split(", ").find_map(|part| {
                part.strip_prefix(name)
                    .map(|v| v.trim().trim_matches('"').to_owned())
            })
        };
        let code = field("code: ").unwrap_or_default();
        let message = field("message: ").unwrap_or_default();
        let words = format!("{} (os error {code})", lower_first(&message));
        out.replace_range(start..=start + len, &words);
    }
    while let Some(start) = out.find("Custom { kind: ") {
        let Some(len) = out[start..].find('}') else {
            break;
        };
        let words = out[start..start + len]
            .split_once("error: ")
            .map_or_else(String::new, |(_, e)| e.trim().trim_matches('"').to_owned());
        out.replace_range(start..=start + len, &words);
    }
    while let Some(start) = out.find("Kind(") {
        let Some(len) = out[start..].find(')') else {
            break;
        };
        let words = camel_to_words(&out[start + "Kind(".len()..start + len]);
        out.replace_range(start..=start + len, &words);
    }
    out
}

/// `Connection refused` → `connection refused`.
fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_lowercase().chain(chars).collect()
    })
}

/// `TimedOut` → `timed out`.
fn camel_to_words(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_uppercase() && !out.is_empty() {
            out.push(' ');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// Prints an error as one JSON object on stdout (`--json`): `{"error": sentence, "kind":
/// kind, "exit": code}`, so a script reading stdout gets one document either way.
/// With `report` (what the command did before failing), its fields come first.
pub(crate) fn print_json_error(
    message: &str,
    kind: &str,
    code: u8,
    report: Option<&serde_json::Value>,
) {
    let error = serde_json::json!({"error": message, "kind": kind, "exit": code});
    match (report, error) {
        (Some(Value::Object(report)), Value::Object(error)) => {
            let mut merged = report.clone();
            merged.extend(error);
            print_json(&Value::Object(merged));
        }
        (_, error) => println!("{error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_chain_drops_repeated_causes() {
        #[derive(Debug, thiserror::Error)]
        #[error("invalid job: {0}")]
        struct Outer(#[source] std::io::Error);
        let inner = std::io::Error::other("bad id");
        let error = anyhow::Error::new(Outer(inner)).context("could not add");
        assert_eq!(error_chain(&error), "could not add: invalid job: bad id");
    }

    #[test]
    fn debug_renderings_become_words() {
        assert_eq!(
            plain_words(
                "could not connect to Redis at h:1: IO Error: Os { code: 111, kind: \
                 ConnectionRefused, message: \"Connection refused\" }"
            ),
            "could not connect to Redis at h:1: connection refused (os error 111)"
        );
        assert_eq!(plain_words("x: IO Error: Kind(TimedOut)"), "x: timed out");
        assert_eq!(
            plain_words("x: Custom { kind: Other, error: \"tls failed\" }"),
            "x: tls failed"
        );
        assert_eq!(plain_words("no queue \"q\""), "no queue \"q\"");
    }

    #[test]
    fn table_aligns_every_column_under_its_header() {
        let rows = vec![
            vec!["a".to_string(), "every 5s".to_string(), "-".to_string()],
            vec![
                "long-id".to_string(),
                "0 9 * * *".to_string(),
                "x".to_string(),
            ],
        ];
        assert_eq!(
            table(&["ID", "SCHEDULE", "TZ"], &rows),
            "ID       SCHEDULE   TZ\n\
             a        every 5s   -\n\
             long-id  0 9 * * *  x\n"
        );
    }

    #[test]
    fn coloured_cells_line_up_with_plain_ones() {
        let paint = Paint::forced(true);
        let rows = vec![
            vec![paint.red("7"), "x".to_string()],
            vec!["1234".to_string(), "y".to_string()],
        ];
        let text = table(&["N", "V"], &rows);
        let plain: Vec<String> = text
            .lines()
            .map(|line| line.replace("\x1b[31m", "").replace("\x1b[0m", ""))
            .collect();
        assert_eq!(plain, ["N     V", "7     x", "1234  y"], "{text:?}");
        assert_eq!(visible_width(&paint.bold("abc")), 3);
        assert_eq!(Paint::forced(false).red("abc"), "abc");
    }

    #[test]
    fn two_columns_pads_the_first_column() {
        let rows = vec![
            ("wait".to_string(), "3".to_string()),
            ("prioritized".to_string(), "10".to_string()),
        ];
        assert_eq!(two_columns(&rows), "wait         3\nprioritized  10\n");
    }
}
