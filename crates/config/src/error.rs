//! Diagnostics: errors with `file:line:col`, what was wrong, what was
//! expected and a hint, rendered like rustc's (the offending line quoted
//! with a caret under the offending text).

use crate::model::Span;
use std::fmt;
use std::ops::Range;

/// One problem in a hierarchy or rt-app file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, as given to the parser.
    pub file: String,
    /// 1-based line (0 when the error is about the file as a whole).
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
    /// What was wrong.
    pub message: String,
    /// What would have been accepted.
    pub expected: Option<String>,
    /// How to fix it (`did you mean "period"?`).
    pub hint: Option<String>,
    /// The text of the offending line, quoted when rendering; `None` when
    /// the source text was not at hand (see [`ConfigErrors::fill_source`])
    /// or the line is too long to quote.
    pub source_line: Option<String>,
    /// How many characters of the line the caret underlines (at least 1).
    pub len: u32,
}

impl ConfigError {
    /// An error at `line:col` of `file` with no source text.
    pub fn new(file: &str, line: u32, col: u32, message: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_string(),
            line,
            col,
            message: message.into(),
            expected: None,
            hint: None,
            source_line: None,
            len: 1,
        }
    }

    /// An error at a model [`Span`].
    pub fn at_span(file: &str, span: Span, message: impl Into<String>) -> Self {
        Self::new(file, span.line, span.col, message)
    }

    /// Sets what was expected.
    pub fn expected(mut self, e: impl Into<String>) -> Self {
        self.expected = Some(e.into());
        self
    }

    /// Sets the hint.
    pub fn hint(mut self, h: impl Into<String>) -> Self {
        self.hint = Some(h.into());
        self
    }

    /// Sets the hint if there is one.
    pub fn maybe_hint(mut self, h: Option<String>) -> Self {
        if h.is_some() {
            self.hint = h;
        }
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "error: {}", self.message)?;
        let gutter = if self.line == 0 {
            1
        } else {
            self.line.to_string().len()
        };
        let pad = " ".repeat(gutter);
        if self.line == 0 {
            writeln!(f, "{pad}--> {}", self.file)?;
        } else {
            writeln!(f, "{pad}--> {}:{}:{}", self.file, self.line, self.col)?;
        }
        if let (Some(text), true) = (&self.source_line, self.line > 0) {
            // Tabs become four spaces on screen; the caret follows.
            let shown: String = text.replace('\t', "    ");
            let before: usize = text
                .chars()
                .take(self.col.saturating_sub(1) as usize)
                .map(|c| if c == '\t' { 4 } else { 1 })
                .sum();
            writeln!(f, "{pad} |")?;
            writeln!(f, "{} | {}", self.line, shown.trim_end())?;
            writeln!(
                f,
                "{pad} | {}{}",
                " ".repeat(before),
                "^".repeat(self.len.max(1) as usize)
            )?;
        }
        if let Some(e) = &self.expected {
            writeln!(f, "{pad} = expected: {e}")?;
        }
        if let Some(h) = &self.hint {
            writeln!(f, "{pad} = hint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in a file, in file order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// One error.
    pub fn one(e: ConfigError) -> Self {
        ConfigErrors(vec![e])
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Iterates over the errors.
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.0.iter()
    }

    /// Quotes lines of `text` in the errors about `file` that carry no
    /// source line yet (errors found after parsing, e.g. by
    /// [`crate::attach_rtapp`], know only line and column).
    pub fn fill_source(&mut self, file: &str, text: &str) {
        let lines: Vec<&str> = text.lines().collect();
        for e in &mut self.0 {
            if e.file == file && e.source_line.is_none() && e.line > 0 {
                if let Some(l) = lines.get(e.line as usize - 1).filter(|l| quotable(l)) {
                    e.source_line = Some((*l).to_string());
                    if e.len <= 1 {
                        e.len = guess_len(l, e.col);
                    }
                }
            }
        }
    }

    /// Sorts by file, line and column (stable), and drops exact duplicates.
    pub fn sort(&mut self) {
        self.0
            .sort_by(|a, b| (&a.file, a.line, a.col).cmp(&(&b.file, b.line, b.col)));
        self.0.dedup();
    }
}

/// How many errors [`ConfigErrors`] shows: a generated file gone wrong
/// can have a hundred thousand, and pages of them help no one.
const MAX_SHOWN: usize = 100;

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().take(MAX_SHOWN).enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        match self.0.len() {
            0 | 1 => Ok(()),
            n if n > MAX_SHOWN => {
                write!(f, "\nfound {n} errors; the first {MAX_SHOWN} are shown\n")
            }
            n => write!(f, "\nfound {n} errors\n"),
        }
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors(vec![e])
    }
}

impl IntoIterator for ConfigErrors {
    type Item = ConfigError;
    type IntoIter = std::vec::IntoIter<ConfigError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// A source text with a line index: turns byte offsets into line, column
/// and the text of the line.
#[derive(Debug)]
pub(crate) struct Source<'a> {
    pub file: &'a str,
    pub text: &'a str,
    starts: Vec<usize>,
    /// Characters before each multiple of [`CHUNK`] bytes, so that a column
    /// costs at most a chunk of counting even on a line of megabytes (a
    /// generated JSON file is often one line).
    chars_before: Vec<usize>,
}

const CHUNK: usize = 256;

/// Whether `b` starts a character (is not a UTF-8 continuation byte).
fn starts_char(b: u8) -> bool {
    b & 0xC0 != 0x80
}

impl<'a> Source<'a> {
    pub fn new(file: &'a str, text: &'a str) -> Self {
        let mut starts = vec![0];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                starts.push(i + 1);
            }
        }
        let mut chars_before = vec![0];
        for chunk in text.as_bytes().chunks(CHUNK) {
            let n = chunk.iter().filter(|&&b| starts_char(b)).count();
            chars_before.push(chars_before[chars_before.len() - 1] + n);
        }
        Source {
            file,
            text,
            starts,
            chars_before,
        }
    }

    /// Characters before byte offset `at`.
    fn char_offset(&self, at: usize) -> usize {
        let k = at / CHUNK;
        let from = k * CHUNK;
        self.chars_before[k]
            + self.text.as_bytes()[from..at]
                .iter()
                .filter(|&&b| starts_char(b))
                .count()
    }

    fn floor(&self, mut at: usize) -> usize {
        at = at.min(self.text.len());
        while at > 0 && !self.text.is_char_boundary(at) {
            at -= 1;
        }
        at
    }

    /// 0-based line index of a byte offset.
    fn line_index(&self, at: usize) -> usize {
        match self.starts.binary_search(&at) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }

    /// The line's text without its end of line.
    fn line_text(&self, idx: usize) -> &'a str {
        let start = self.starts[idx];
        let end = self.starts.get(idx + 1).copied().unwrap_or(self.text.len());
        self.text[start..end].trim_end_matches(['\n', '\r'])
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, at: usize) -> (u32, u32) {
        let at = self.floor(at);
        let idx = self.line_index(at);
        let col = self.char_offset(at) - self.char_offset(self.starts[idx]) + 1;
        (idx as u32 + 1, col as u32)
    }

    /// The model span of a byte range.
    pub fn span(&self, range: &Range<usize>) -> Span {
        let (line, col) = self.line_col(range.start);
        Span { line, col }
    }

    /// An error at a line and column, quoting the line and underlining the
    /// quoted name or the bracketed header that starts there, if any.
    pub fn error_at(&self, span: Span, message: impl Into<String>) -> ConfigError {
        let mut e = ConfigError::at_span(self.file, span, message);
        if span.line >= 1 && (span.line as usize) <= self.starts.len() {
            let text = self.line_text(span.line as usize - 1);
            if quotable(text) {
                e.source_line = Some(text.to_string());
                e.len = guess_len(text, span.col);
            }
        }
        e
    }

    /// An error underlining `range` (clipped to its first line).
    pub fn error(&self, range: Range<usize>, message: impl Into<String>) -> ConfigError {
        let start = self.floor(range.start);
        let idx = self.line_index(start);
        let line = self.line_text(idx);
        let (l, c) = self.line_col(start);
        let line_end = self.starts[idx] + line.len();
        let end = self.floor(range.end.min(line_end).max(start));
        let len = (self.char_offset(end) - self.char_offset(start)).max(1);
        ConfigError {
            file: self.file.to_string(),
            line: l,
            col: c,
            message: message.into(),
            expected: None,
            hint: None,
            source_line: quotable(line).then(|| line.to_string()),
            len: len as u32,
        }
    }
}

/// Whether a line is short enough to quote: each error keeps its own copy,
/// and thousands of errors in a file of one long line (generated JSON)
/// would otherwise take gigabytes.
fn quotable(line: &str) -> bool {
    line.len() <= 1000
}

/// How much of `line` to underline from column `col`: a quoted string or a
/// `[header]` that starts there, else one character.
fn guess_len(line: &str, col: u32) -> u32 {
    let rest: Vec<char> = line.chars().skip(col.saturating_sub(1) as usize).collect();
    let close = match rest.first() {
        Some('"') => '"',
        Some('[') => ']',
        _ => return 1,
    };
    let mut i = 1;
    while i < rest.len() {
        if rest[i] == '\\' {
            i += 2;
            continue;
        }
        if rest[i] == close {
            // `[[table]]`: include the second bracket.
            let end = if close == ']' && rest.get(i + 1) == Some(&']') {
                i + 2
            } else {
                i + 1
            };
            return end as u32;
        }
        i += 1;
    }
    1
}

/// Edit distance between two strings, by characters: insertions,
/// deletions, substitutions and swaps of two neighbours each cost 1
/// (optimal string alignment), so `bacth` is one edit from `batch`.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

/// The candidate closest to `word`, if close enough to be a likely typo
/// (distance at most a third of the length, at least 1; case differences
/// alone always qualify). Ties go to the first candidate.
pub(crate) fn closest<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    let limit = (word.chars().count() / 3).max(1);
    let lower = word.to_lowercase();
    let mut best: Option<(&str, usize)> = None;
    for c in candidates {
        if c == word {
            continue;
        }
        let d = if c.to_lowercase() == lower {
            0
        } else {
            edit_distance(&lower, &c.to_lowercase())
        };
        let better = match best {
            None => true,
            Some((_, bd)) => d < bd,
        };
        if d <= limit && better {
            best = Some((c, d));
        }
    }
    best.map(|(c, _)| c)
}

/// `did you mean "x"?` for the closest candidate.
pub(crate) fn did_you_mean<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<String> {
    closest(word, candidates).map(|c| format!("did you mean `{c}`?"))
}

/// `a`, `b` or `c`, each in backquotes.
pub(crate) fn one_of<S: AsRef<str>>(items: &[S]) -> String {
    let q: Vec<String> = items.iter().map(|s| format!("`{}`", s.as_ref())).collect();
    match q.len() {
        0 => "nothing".to_string(),
        1 => q[0].clone(),
        n => format!("{} or {}", q[..n - 1].join(", "), q[n - 1]),
    }
}

/// `one of `a`, `b` or `c``, or just `` `a` `` for a single item.
pub(crate) fn one_of_these<S: AsRef<str>>(items: &[S]) -> String {
    match items.len() {
        0 => "nothing (none is declared)".to_string(),
        1 => one_of(items),
        _ => format!("one of {}", one_of(items)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_and_suggestions() {
        assert_eq!(edit_distance("perod", "period"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("bacth", "batch"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(closest("perod", ["amount", "period"]), Some("period"));
        assert_eq!(closest("xyz", ["amount", "period"]), None);
        assert_eq!(closest("Period", ["period"]), Some("period"));
        assert_eq!(one_of(&["a", "b", "c"]), "`a`, `b` or `c`");
    }

    #[test]
    fn renders_like_rustc() {
        let src = Source::new("h.toml", "a = 1\nperod = \"33ms\"\n");
        let e = src
            .error(6..11, "unknown key `perod`")
            .expected("`period`")
            .hint("did you mean `period`?");
        assert_eq!(
            e.to_string(),
            "error: unknown key `perod`\n --> h.toml:2:1\n  |\n2 | perod = \"33ms\"\n  | ^^^^^\n  = expected: `period`\n  = hint: did you mean `period`?\n"
        );
    }

    #[test]
    fn columns_count_characters_and_clip_to_the_line() {
        let src = Source::new("f", "é = [\n 1]\n");
        assert_eq!(src.line_col(3), (1, 3));
        assert_eq!(src.line_col(2), (1, 2));
        let e = src.error(0..12, "x");
        assert_eq!(e.len, 5);
        assert_eq!(src.line_col(100), (3, 1));
    }

    #[test]
    fn columns_on_long_lines_match_counting_characters() {
        // Lines of several chunks, with multi-byte characters straddling
        // the chunk boundaries.
        let text: String = (0..3000)
            .map(|i| match i % 7 {
                0 => "é",
                1 if i % 700 == 1 => "\n",
                2 => "日本",
                3 => "😀",
                _ => "ab",
            })
            .collect();
        let src = Source::new("f", &text);
        for (at, _) in text.char_indices().chain([(text.len(), ' ')]) {
            let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
            let line = text[..at].matches('\n').count() + 1;
            let col = text[line_start..at].chars().count() + 1;
            assert_eq!(src.line_col(at), (line as u32, col as u32), "at {at}");
        }
    }

    #[test]
    fn long_lines_are_not_quoted() {
        let text = format!("{{\"a\": 1}}\n{}\n", "x".repeat(5000));
        let src = Source::new("f", &text);
        assert!(src.error(1..4, "short").source_line.is_some());
        let e = src.error(3000..3001, "long");
        assert_eq!((e.line, e.col, e.source_line), (2, 2992, None));
        assert_eq!(
            src.error_at(Span { line: 2, col: 5 }, "long").source_line,
            None
        );
    }
}
