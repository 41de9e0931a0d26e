//! A small JSON reader that keeps what rt-app files need and generic JSON
//! libraries drop: byte spans of every key and value (for `file:line:col`
//! errors), key order (rt-app runs events in file order) and repeated keys
//! (rt-app's `workgen` accepts `"run"` twice in one object).
//!
//! It is as lenient as rt-app's own reader (json-c): `/* */` and `//`
//! comments and trailing commas are accepted. A key followed directly by `,`
//! or `}` (`"suspend",`, a `workgen` shorthand) reads as `null`. Nesting is
//! limited to [`MAX_DEPTH`] so hostile input cannot exhaust the stack.

use std::borrow::Cow;
use std::ops::Range;

/// Deepest nesting accepted.
pub(crate) const MAX_DEPTH: usize = 64;

/// Longest text read: spans hold `u32` offsets. Files are limited to far
/// less (`MAX_FILE_BYTES`), but [`parse`] also takes any `&str`.
pub(crate) const MAX_TEXT_BYTES: usize = u32::MAX as usize;

/// A byte range of the text, in 8 bytes instead of a `Range<usize>`'s 16:
/// the tree of a large rt-app file holds one per key and one per value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ByteSpan {
    start: u32,
    end: u32,
}

impl ByteSpan {
    /// `start..end`, both at most [`MAX_TEXT_BYTES`] (which [`parse`]
    /// checks before it reads, so no offset of the text is cut).
    fn new(r: Range<usize>) -> Self {
        debug_assert!(r.start <= r.end && r.end <= MAX_TEXT_BYTES, "{r:?}");
        ByteSpan {
            start: r.start as u32,
            end: r.end as u32,
        }
    }

    pub fn start(self) -> usize {
        self.start as usize
    }

    pub fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

impl From<ByteSpan> for Range<usize> {
    fn from(s: ByteSpan) -> Self {
        s.range()
    }
}

/// A JSON value with its byte span.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct J<'a> {
    pub v: JVal<'a>,
    pub span: ByteSpan,
}

/// A JSON number: its integer value when it is one. Its text is the
/// value's span (kept out of the tree, which holds one number per
/// program step of a large file).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct JNum {
    pub int: Option<i64>,
}

/// A key of an object, with its span (quotes included). Keys and strings
/// borrow from the text unless they hold escapes: a large rt-app file has
/// a key per program step.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct JKey<'a> {
    pub name: Cow<'a, str>,
    pub span: ByteSpan,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum JVal<'a> {
    Null,
    Bool(bool),
    Num(JNum),
    Str(Cow<'a, str>),
    Arr(Vec<J<'a>>),
    /// Members in file order, repeated keys kept.
    Obj(Vec<(JKey<'a>, J<'a>)>),
}

impl JVal<'_> {
    /// What kind of value this is, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            JVal::Null => "null",
            JVal::Bool(_) => "a boolean",
            JVal::Num(n) if n.int.is_some() => "an integer",
            JVal::Num(_) => "a number",
            JVal::Str(_) => "a string",
            JVal::Arr(_) => "an array",
            JVal::Obj(_) => "an object",
        }
    }
}

/// A syntax error: where and what.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct JsonError {
    pub span: ByteSpan,
    pub message: String,
    pub expected: String,
}

struct Reader<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
}

type R<T> = Result<T, JsonError>;

/// Parses one JSON document.
pub(crate) fn parse(text: &str) -> R<J<'_>> {
    parse_within(text, MAX_TEXT_BYTES)
}

/// [`parse`] with the length limit as an argument, so a test can check the
/// refusal without a 4 GiB text.
fn parse_within(text: &str, max_bytes: usize) -> R<J<'_>> {
    if text.len() > max_bytes {
        return Err(JsonError {
            span: ByteSpan::new(0..0),
            message: format!(
                "the text is {} bytes long, more than the {max_bytes} this reader takes",
                text.len()
            ),
            expected: format!("a text of at most {max_bytes} bytes"),
        });
    }
    let mut r = Reader {
        s: text.as_bytes(),
        text,
        i: 0,
    };
    r.skip_ws()?;
    if r.i >= r.s.len() {
        return Err(r.err(
            r.i..r.i,
            "the file is empty",
            "a JSON object such as `{ \"tasks\": { ... } }`",
        ));
    }
    let v = r.value(0)?;
    r.skip_ws()?;
    if r.i < r.s.len() {
        let end = r.token_end();
        return Err(r.err(
            r.i..end,
            "unexpected text after the end of the JSON document",
            "the end of the file",
        ));
    }
    Ok(v)
}

impl<'a> Reader<'a> {
    fn err(
        &self,
        span: Range<usize>,
        message: impl Into<String>,
        expected: impl Into<String>,
    ) -> JsonError {
        JsonError {
            span: ByteSpan::new(span),
            message: message.into(),
            expected: expected.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// End of the run of non-space characters at `i`, for error spans.
    fn token_end(&self) -> usize {
        let mut j = self.i;
        while j < self.s.len()
            && !self.s[j].is_ascii_whitespace()
            && !b",:{}[]".contains(&self.s[j])
        {
            j += 1;
        }
        if j == self.i {
            j = (self.i + 1).min(self.s.len());
        }
        while j < self.s.len() && !self.text.is_char_boundary(j) {
            j += 1;
        }
        j
    }

    fn skip_ws(&mut self) -> R<()> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.i += 1,
                Some(b'/') if self.s.get(self.i + 1) == Some(&b'/') => {
                    while let Some(c) = self.peek() {
                        if c == b'\n' {
                            break;
                        }
                        self.i += 1;
                    }
                }
                Some(b'/') if self.s.get(self.i + 1) == Some(&b'*') => {
                    let start = self.i;
                    self.i += 2;
                    loop {
                        match self.peek() {
                            None => {
                                return Err(self.err(
                                    start..start + 2,
                                    "unterminated comment",
                                    "`*/`",
                                ))
                            }
                            Some(b'*') if self.s.get(self.i + 1) == Some(&b'/') => {
                                self.i += 2;
                                break;
                            }
                            Some(_) => self.i += 1,
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self, depth: usize) -> R<J<'a>> {
        if depth > MAX_DEPTH {
            // At the end of the text there is no character to underline
            // (and `i + 1` would pass MAX_TEXT_BYTES).
            return Err(self.err(
                self.i..(self.i + 1).min(self.s.len()),
                format!("nesting deeper than {MAX_DEPTH} levels"),
                "a flatter document",
            ));
        }
        let start = self.i;
        let v = match self.peek() {
            Some(b'{') => self.object(depth)?,
            Some(b'[') => self.array(depth)?,
            Some(b'"') => JVal::Str(self.string()?.0),
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(b't' | b'f' | b'n') => self.literal()?,
            None => return Err(self.err(start..start, "unexpected end of file", "a value")),
            Some(_) => {
                let end = self.token_end();
                let tok = &self.text[start..end];
                return Err(self.err(
                    start..end,
                    format!("`{tok}` is not a JSON value"),
                    "a number, a string in double quotes, an object, an array, true, false or null",
                ));
            }
        };
        Ok(J {
            v,
            span: ByteSpan::new(start..self.i),
        })
    }

    fn literal(&mut self) -> R<JVal<'a>> {
        for (word, v) in [
            ("true", JVal::Bool(true)),
            ("false", JVal::Bool(false)),
            ("null", JVal::Null),
        ] {
            if self.s[self.i..].starts_with(word.as_bytes()) {
                let after = self.s.get(self.i + word.len()).copied();
                if !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_') {
                    self.i += word.len();
                    return Ok(v);
                }
            }
        }
        let start = self.i;
        let end = self.token_end();
        let tok = &self.text[start..end];
        Err(self.err(
            start..end,
            format!("`{tok}` is not a JSON value"),
            "true, false, null, or a string in double quotes",
        ))
    }

    fn number(&mut self) -> R<JVal<'a>> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let digits = |r: &mut Self| {
            let s = r.i;
            while r.peek().is_some_and(|c| c.is_ascii_digit()) {
                r.i += 1;
            }
            r.i - s
        };
        let mut ok = digits(self) > 0;
        let mut is_int = true;
        if self.peek() == Some(b'.') {
            self.i += 1;
            is_int = false;
            ok &= digits(self) > 0;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            is_int = false;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            ok &= digits(self) > 0;
        }
        if self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            ok = false;
        }
        if !ok {
            self.i = start;
            let end = self.token_end();
            let tok = &self.text[start..end];
            return Err(self.err(
                start..end,
                format!("`{tok}` is not a number"),
                "a number such as `10000` (rt-app times are microseconds, without a unit)",
            ));
        }
        let text = &self.text[start..self.i];
        let int = if is_int {
            text.parse::<i64>().ok()
        } else {
            None
        };
        if is_int && int.is_none() {
            return Err(self.err(
                start..self.i,
                format!("`{text}` is too large"),
                "an integer that fits in 64 bits",
            ));
        }
        Ok(JVal::Num(JNum { int }))
    }

    /// A string at `i` (which is `"`): its value and span.
    fn string(&mut self) -> R<(Cow<'a, str>, ByteSpan)> {
        let start = self.i;
        self.i += 1;
        // Without escapes, the string is the text between the quotes.
        let plain = self.s[self.i..]
            .iter()
            .position(|&b| b == b'"' || b == b'\\')
            .filter(|&n| self.s[self.i + n] == b'"');
        if let Some(n) = plain {
            let text = &self.text[self.i..self.i + n];
            self.i += n + 1;
            return Ok((Cow::Borrowed(text), ByteSpan::new(start..self.i)));
        }
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.err(start..start + 1, "unterminated string", "a closing `\"`"));
            };
            match c {
                b'"' => {
                    self.i += 1;
                    return Ok((Cow::Owned(out), ByteSpan::new(start..self.i)));
                }
                b'\\' => {
                    let esc_at = self.i;
                    self.i += 1;
                    let Some(e) = self.peek() else {
                        return Err(self.err(
                            start..start + 1,
                            "unterminated string",
                            "a closing `\"`",
                        ));
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4(esc_at)?;
                            let ch = if (0xD800..0xDC00).contains(&hi)
                                && self.s[self.i..].starts_with(b"\\u")
                            {
                                let save = self.i;
                                self.i += 2;
                                let lo = self.hex4(esc_at)?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                                } else {
                                    self.i = save;
                                    None
                                }
                            } else {
                                char::from_u32(hi)
                            };
                            // A lone surrogate is no character: as U+FFFD two
                            // different names would read alike.
                            let Some(ch) = ch else {
                                return Err(self.err(
                                    esc_at..self.i,
                                    "a lone UTF-16 surrogate in a string",
                                    "a character, or a high surrogate \\uD800-\\uDBFF followed by a low one \\uDC00-\\uDFFF",
                                ));
                            };
                            out.push(ch);
                        }
                        _ => {
                            return Err(self.err(
                                esc_at..self.i.min(self.s.len()),
                                "unknown escape in a string",
                                "one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX",
                            ));
                        }
                    }
                }
                _ => {
                    // Copy one UTF-8 character.
                    let rest = &self.text[self.i..];
                    let ch = rest.chars().next().unwrap_or('\u{FFFD}');
                    out.push(ch);
                    self.i += ch.len_utf8().max(1);
                }
            }
        }
    }

    fn hex4(&mut self, esc_at: usize) -> R<u32> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|t| u32::from_str_radix(t, 16).ok());
        match h {
            Some(v) => {
                self.i += 4;
                Ok(v)
            }
            None => Err(self.err(
                esc_at..(esc_at + 2).min(self.s.len()),
                "bad \\u escape",
                "four hexadecimal digits after \\u",
            )),
        }
    }

    fn array(&mut self, depth: usize) -> R<JVal<'a>> {
        let open = self.i;
        self.i += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws()?;
            match self.peek() {
                None => return Err(self.err(open..open + 1, "unclosed array", "`]`")),
                Some(b']') => {
                    self.i += 1;
                    // Growth leaves up to half a vector unused (a pair in
                    // room for four): the tree of a large file is kept
                    // whole while it is read, so give it back.
                    items.shrink_to_fit();
                    return Ok(JVal::Arr(items));
                }
                _ => {}
            }
            items.push(self.value(depth + 1)?);
            self.skip_ws()?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {}
                None => return Err(self.err(open..open + 1, "unclosed array", "`]`")),
                Some(_) => {
                    let end = self.token_end();
                    return Err(self.err(
                        self.i..end,
                        "missing `,` between array elements",
                        "`,` or `]`",
                    ));
                }
            }
        }
    }

    fn object(&mut self, depth: usize) -> R<JVal<'a>> {
        let open = self.i;
        self.i += 1;
        let mut members = Vec::new();
        loop {
            self.skip_ws()?;
            match self.peek() {
                None => return Err(self.err(open..open + 1, "unclosed object", "`}`")),
                Some(b'}') => {
                    self.i += 1;
                    members.shrink_to_fit();
                    return Ok(JVal::Obj(members));
                }
                Some(b'"') => {}
                Some(_) => {
                    let end = self.token_end();
                    let tok = &self.text[self.i..end];
                    return Err(self.err(
                        self.i..end,
                        format!("`{tok}` is not a key"),
                        "a key in double quotes, or `}`",
                    ));
                }
            }
            let (name, kspan) = self.string()?;
            self.skip_ws()?;
            let value = match self.peek() {
                Some(b':') => {
                    self.i += 1;
                    self.skip_ws()?;
                    self.value(depth + 1)?
                }
                // `"suspend",`: a key alone reads as null.
                Some(b',' | b'}') => J {
                    v: JVal::Null,
                    span: kspan,
                },
                None => return Err(self.err(open..open + 1, "unclosed object", "`}`")),
                Some(_) => {
                    let end = self.token_end();
                    return Err(self.err(
                        self.i..end,
                        format!("missing `:` after key \"{name}\""),
                        "`:`",
                    ));
                }
            };
            members.push((JKey { name, span: kspan }, value));
            self.skip_ws()?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {}
                None => return Err(self.err(open..open + 1, "unclosed object", "`}`")),
                Some(_) => {
                    let end = self.token_end();
                    return Err(self.err(
                        self.i..end,
                        "missing `,` between object members",
                        "`,` or `}`",
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj<'j, 't>(j: &'j J<'t>) -> &'j [(JKey<'t>, J<'t>)] {
        match &j.v {
            JVal::Obj(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn keeps_order_duplicates_and_spans() {
        let text = "{ /* c */ \"run\": 10, \"sleep\": 5, // x\n \"run\": 7, }";
        let j = parse(text).unwrap();
        let m = obj(&j);
        let keys: Vec<&str> = m.iter().map(|(k, _)| &*k.name).collect();
        assert_eq!(keys, ["run", "sleep", "run"]);
        assert_eq!(&text[m[2].1.span.range()], "7");
        assert_eq!(&text[m[0].0.span.range()], "\"run\"");
        assert_eq!(m[2].1.v, JVal::Num(JNum { int: Some(7) }));
    }

    #[test]
    fn bare_key_is_null_and_strings_unescape() {
        let j = parse(r#"{"suspend", "a": "x\"\u00e9\n", "b": [1, -2.5e3, true, null]}"#).unwrap();
        let m = obj(&j);
        assert_eq!(m[0].1.v, JVal::Null);
        assert_eq!(m[1].1.v, JVal::Str("x\"é\n".into()));
        match &m[2].1.v {
            JVal::Arr(a) => assert_eq!(a.len(), 4),
            _ => panic!(),
        }
        // Strings and keys without escapes borrow from the text.
        let text = r#"{"rün": "plain é", "a\tb": "c\u0041"}"#;
        let j = parse(text).unwrap();
        let m = obj(&j);
        assert!(matches!(&m[0].0.name, Cow::Borrowed("rün")));
        assert!(matches!(&m[0].1.v, JVal::Str(Cow::Borrowed("plain é"))));
        assert!(matches!(&m[1].0.name, Cow::Owned(k) if k == "a\tb"));
        assert!(matches!(&m[1].1.v, JVal::Str(Cow::Owned(v)) if v == "cA"));
        assert_eq!(&text[m[0].1.span.range()], "\"plain é\"");
        assert_eq!(&text[m[1].1.span.range()], r#""c\u0041""#);
    }

    #[test]
    fn errors_do_not_panic() {
        for bad in [
            "",
            "{",
            "{\"a\" 1}",
            "[1 2]",
            "{\"a\": tru}",
            "\"abc",
            "{\"a\":1} x",
            "/*",
            "1e",
            "--1",
            "{\"\\u12\"}",
            "\"\\ud800\"",
            "\"\\udc00\\ud800\"",
            "\"\\ud800\\u0041\"",
            "99999999999999999999",
            "\"\\",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let deep = "[".repeat(10_000);
        assert!(parse(&deep).is_err());
    }

    #[test]
    fn refuses_text_longer_than_spans_hold() {
        // `parse` does the same with MAX_TEXT_BYTES, the largest offset a
        // span holds; a text that long is not allocated here.
        assert_eq!(MAX_TEXT_BYTES, u32::MAX as usize);
        let text = "[1, 2]";
        assert!(parse_within(text, text.len()).is_ok());
        let e = parse_within(text, text.len() - 1).unwrap_err();
        assert_eq!(e.span.range(), 0..0);
        assert_eq!(
            e.message,
            "the text is 6 bytes long, more than the 5 this reader takes"
        );
    }

    #[test]
    fn spans_at_the_end_stay_within_the_text() {
        // The value after the last `:` is one level too deep, and missing.
        let text = "{\"a\":".repeat(MAX_DEPTH + 1);
        let e = parse(&text).unwrap_err();
        assert!(e.message.starts_with("nesting deeper"), "{}", e.message);
        assert_eq!(e.span.range(), text.len()..text.len());
    }

    /// The tree holds a `J` per value and a `(JKey, J)` per member. With
    /// `Range<usize>` spans they took 48 and 88 bytes (a `JKey` 40).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn tree_layout() {
        use std::mem::size_of;
        assert_eq!(size_of::<ByteSpan>(), 8);
        // A 24-byte payload (a `Cow`, a `Vec`) and the tag beside it.
        assert_eq!(size_of::<JVal>(), 32);
        assert_eq!(size_of::<J>(), 40);
        assert_eq!(size_of::<JKey>(), 32);
        assert_eq!(size_of::<(JKey, J)>(), 72);
    }
}
