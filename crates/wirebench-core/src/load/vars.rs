//! Per-client values for `wirebench load`: the `{client}` and `{room}` placeholders and the
//! columns of a CSV of tokens, in the URL and in header values. A [`Pattern`] is parsed once
//! when the configuration is built and expanded once per client when it connects (never in
//! the send loop). Client `i` takes row `i mod rows` of the [`Table`].
//!
//! CSV: RFC 4180 (comma separated, fields in double quotes may hold commas, newlines and
//! doubled quotes), with a header row whose names become placeholders (`token` in the
//! header gives `{token}`); CRLF or LF line ends; blank lines are skipped.

use thiserror::Error;

/// Why a pattern or a CSV file was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VarsError {
    /// `{name}` is none of the known placeholders.
    #[error("unknown placeholder {{{name}}} (known: {known})")]
    Unknown {
        /// The name between the braces.
        name: String,
        /// The known names, comma separated.
        known: String,
    },
    /// The CSV has no header row, or a header but no rows.
    #[error("{0}")]
    Empty(&'static str),
    /// A header name is not usable as a placeholder.
    #[error("column {index} is named '{name}': names are letters, digits, '_' and '-', unique, not 'client' or 'room'")]
    BadName {
        /// 1-based column.
        index: usize,
        /// The name.
        name: String,
    },
    /// A row has a different number of fields than the header.
    #[error("row {row} has {got} fields, the header {want}")]
    Ragged {
        /// 1-based line of the row's start.
        row: usize,
        /// Fields in the row.
        got: usize,
        /// Fields in the header.
        want: usize,
    },
    /// A quoted field is not closed, or text follows its closing quote.
    #[error("row {row}: {what}")]
    Quote {
        /// 1-based line.
        row: usize,
        /// What is wrong.
        what: &'static str,
    },
}

/// The per-client values: a header and at least one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    names: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Parses a CSV text with a header row.
    pub fn parse_csv(text: &str) -> Result<Self, VarsError> {
        let mut records = records(text)?.into_iter();
        let (_, names) = records.next().ok_or(VarsError::Empty("the CSV is empty: it needs a header row and rows"))?;
        for (i, n) in names.iter().enumerate() {
            let ok = !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                && n != "client"
                && n != "room"
                && !names[..i].contains(n);
            if !ok {
                return Err(VarsError::BadName { index: i + 1, name: n.clone() });
            }
        }
        let mut rows = Vec::new();
        for (line, r) in records {
            if r.len() != names.len() {
                return Err(VarsError::Ragged { row: line, got: r.len(), want: names.len() });
            }
            rows.push(r);
        }
        if rows.is_empty() {
            return Err(VarsError::Empty("the CSV has a header row but no rows"));
        }
        Ok(Self { names, rows })
    }

    /// The column names (the placeholders the table adds).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Never: a table has at least one row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// Client `client`'s row: row `client mod rows`.
    pub fn row(&self, client: u64) -> &[String] {
        let n = self.rows.len() as u64;
        let i = usize::try_from(client % n).expect("below the row count");
        &self.rows[i]
    }
}

/// RFC 4180 records with the line each starts on; blank lines skipped.
fn records(text: &str) -> Result<Vec<(usize, Vec<String>)>, VarsError> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while chars.peek().is_some() {
        let start = line;
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        loop {
            match chars.next() {
                None => {
                    fields.push(std::mem::take(&mut field));
                    break;
                }
                Some('"') if field.is_empty() && !quoted => {
                    quoted = true;
                    loop {
                        match chars.next() {
                            None => return Err(VarsError::Quote { row: start, what: "a quoted field is not closed" }),
                            Some('"') if chars.peek() == Some(&'"') => {
                                chars.next();
                                field.push('"');
                            }
                            Some('"') => break,
                            Some(c) => {
                                line += usize::from(c == '\n');
                                field.push(c);
                            }
                        }
                    }
                    // A closing quote ends the field: next comes a comma, a line end (CR only
                    // as part of CRLF) or the end of the text.
                    let mut ahead = chars.clone();
                    let ends = match ahead.next() {
                        None | Some(',' | '\n') => true,
                        Some('\r') => ahead.next() == Some('\n'),
                        Some(_) => false,
                    };
                    if !ends {
                        return Err(VarsError::Quote { row: start, what: "text after a closing quote" });
                    }
                }
                Some(',') => {
                    fields.push(std::mem::take(&mut field));
                    quoted = false;
                }
                Some('\r') if chars.peek() == Some(&'\n') => {}
                Some('\n') => {
                    line += 1;
                    fields.push(std::mem::take(&mut field));
                    break;
                }
                Some(c) => field.push(c),
            }
        }
        let blank = fields.len() == 1 && fields[0].is_empty() && !quoted;
        if !blank {
            out.push((start, fields));
        }
    }
    Ok(out)
}

/// One piece of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Client,
    Room,
    Column(usize),
}

/// A string with placeholders, parsed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    parts: Vec<Part>,
}

impl Pattern {
    /// Parses `s`: `{client}`, `{room}` (when `room` is allowed) and `{NAME}` for each of
    /// `columns` are placeholders; any other `{word}` (letters, digits, `_`, `-`) is refused
    /// as a likely typo; other braces (JSON, say) are text.
    pub fn parse(s: &str, columns: &[String], room: bool) -> Result<Self, VarsError> {
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut rest = s;
        while let Some(open) = rest.find('{') {
            text.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let word_len = after.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-').count();
            if word_len == 0 || !after[word_len..].starts_with('}') {
                text.push('{');
                rest = after;
                continue;
            }
            let name = &after[..word_len];
            let part = match name {
                "client" => Part::Client,
                "room" if room => Part::Room,
                _ => {
                    let Some(i) = columns.iter().position(|c| c == name) else {
                        let mut known = vec!["client"];
                        if room {
                            known.push("room");
                        }
                        known.extend(columns.iter().map(String::as_str));
                        return Err(VarsError::Unknown { name: name.to_owned(), known: known.join(", ") });
                    };
                    Part::Column(i)
                }
            };
            if !text.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut text)));
            }
            parts.push(part);
            rest = &after[word_len + 1..];
        }
        text.push_str(rest);
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Ok(Self { parts })
    }

    /// Whether the pattern holds any placeholder (else it is the same for every client).
    pub fn is_constant(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Text(_)))
    }

    /// Whether it names any CSV column.
    pub fn uses_columns(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Column(_)))
    }

    /// Appends the pattern for `client` in `room`, with its `row` of the table (empty when
    /// there is no table: then the pattern names no column) to `out`.
    pub fn expand_into(&self, client: u64, room: u64, row: &[String], out: &mut String) {
        use std::fmt::Write as _;
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Client => {
                    let _ = write!(out, "{client}");
                }
                Part::Room => {
                    let _ = write!(out, "{room}");
                }
                Part::Column(i) => out.push_str(row.get(*i).map_or("", String::as_str)),
            }
        }
    }

    /// The pattern for `client` in `room` with its `row`, as a new string.
    pub fn expand(&self, client: u64, room: u64, row: &[String]) -> String {
        let mut s = String::new();
        self.expand_into(client, room, row, &mut s);
        s
    }

    /// The pattern for `client` in `room` as messages show it: `{client}` and `{room}`
    /// expanded, each column left as `{name}` (`names`: the table's), since any column may
    /// be a secret (a token) that must not reach a terminal or a CI log.
    pub fn shown(&self, client: u64, room: u64, names: &[String]) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for p in &self.parts {
            let _ = match p {
                Part::Text(t) => write!(out, "{t}"),
                Part::Client => write!(out, "{client}"),
                Part::Room => write!(out, "{room}"),
                Part::Column(i) => write!(out, "{{{}}}", names.get(*i).map_or("column", String::as_str)),
            };
        }
        out
    }
}

/// `url` with the password of its userinfo (`ws://user:password@host/`) shown as `***`.
pub fn mask_password(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..].find(['/', '?', '#']).map_or(url.len(), |i| start + i);
    let Some(at) = url[start..end].rfind('@').map(|i| start + i) else { return url.to_owned() };
    match url[start..at].find(':') {
        Some(colon) => format!("{}:***{}", &url[..start + colon], &url[at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn placeholders_expand_per_client() {
        let p = Pattern::parse("/rooms/{room}?user={client}&t={token}", &cols(&["token"]), true).unwrap();
        assert_eq!(p.expand(7, 1, &cols(&["abc"])), "/rooms/1?user=7&t=abc");
        assert!(!p.is_constant() && p.uses_columns());
        let plain = Pattern::parse("Bearer x", &[], false).unwrap();
        assert!(plain.is_constant() && !plain.uses_columns());
        let numbered = Pattern::parse("user-{client}", &cols(&["token"]), false).unwrap();
        assert!(!numbered.is_constant() && !numbered.uses_columns());
        assert_eq!(plain.expand(3, 0, &[]), "Bearer x");
    }

    #[test]
    fn messages_show_columns_as_placeholders_and_mask_passwords() {
        let names = cols(&["token", "user"]);
        let p = Pattern::parse("ws://h:1/rooms/{room}?user={user}&t={token}&c={client}", &names, true).unwrap();
        assert_eq!(p.expand(7, 1, &cols(&["s3cret", "ann"])), "ws://h:1/rooms/1?user=ann&t=s3cret&c=7");
        assert_eq!(p.shown(7, 1, &names), "ws://h:1/rooms/1?user={user}&t={token}&c=7");
        assert_eq!(mask_password("wss://ann:s3cret@h:1/r?x=a:b@c"), "wss://ann:***@h:1/r?x=a:b@c");
        assert_eq!(mask_password("wss://a:b:c@d@h/"), "wss://a:***@h/", "the last @ ends the userinfo");
        assert_eq!(mask_password("ws://ann@h/p"), "ws://ann@h/p", "no password");
        assert_eq!(mask_password("ws://h:1/p?u=a:b@c"), "ws://h:1/p?u=a:b@c", "an @ past the authority");
        assert_eq!(mask_password("not a url"), "not a url");
    }

    #[test]
    fn braces_that_are_not_placeholders_are_text() {
        let p = Pattern::parse(r#"{"a":1} {} { client} {client"#, &[], false).unwrap();
        assert!(p.is_constant());
        assert_eq!(p.expand(1, 0, &[]), r#"{"a":1} {} { client} {client"#);
        let p = Pattern::parse("{{client}}", &[], false).unwrap();
        assert_eq!(p.expand(42, 0, &[]), "{42}");
    }

    #[test]
    fn unknown_placeholders_are_refused_with_the_known_ones() {
        let e = Pattern::parse("Bearer {tokn}", &cols(&["token"]), false).unwrap_err();
        assert_eq!(e.to_string(), "unknown placeholder {tokn} (known: client, token)");
        // {room} belongs to the URL only
        let e = Pattern::parse("{room}", &[], false).unwrap_err();
        assert_eq!(e.to_string(), "unknown placeholder {room} (known: client)");
    }

    #[test]
    fn csv_with_header_quotes_and_crlf() {
        let t = Table::parse_csv("token,name\r\nt0,\"Ann, \"\"A\"\"\"\r\n\r\nt1,\"multi\nline\"\nt2,\n").unwrap();
        assert_eq!(t.names(), &cols(&["token", "name"])[..]);
        assert_eq!(t.len(), 3);
        assert!(!t.is_empty());
        assert_eq!(t.rows()[0], cols(&["t0", "Ann, \"A\""]));
        assert_eq!(t.rows()[1], cols(&["t1", "multi\nline"]));
        assert_eq!(t.rows()[2], cols(&["t2", ""]));
        // client i takes row i mod rows
        assert_eq!(t.row(0)[0], "t0");
        assert_eq!(t.row(4)[0], "t1");
        assert_eq!(t.row(u64::MAX)[0], t.rows()[usize::try_from(u64::MAX % 3).unwrap()][0]);
    }

    #[test]
    fn csv_without_final_newline_and_single_column() {
        let t = Table::parse_csv("token\na\nb").unwrap();
        assert_eq!(t.rows(), &[cols(&["a"]), cols(&["b"])][..]);
        // Only a quote that starts a field opens a quoted field; one inside is text.
        let t = Table::parse_csv("token\na\"b\nc\n").unwrap();
        assert_eq!(t.rows(), &[cols(&["a\"b"]), cols(&["c"])][..]);
        // A CR ends a line only before an LF; alone it is text.
        let t = Table::parse_csv("token\r\na\rb\r\n").unwrap();
        assert_eq!(t.rows(), &[cols(&["a\rb"])][..]);
    }

    #[test]
    fn bad_csv_is_refused_with_where() {
        let e = |s: &str| Table::parse_csv(s).unwrap_err().to_string();
        assert_eq!(e(""), "the CSV is empty: it needs a header row and rows");
        assert_eq!(e("\n\n"), "the CSV is empty: it needs a header row and rows");
        assert_eq!(e("token\n"), "the CSV has a header row but no rows");
        assert_eq!(e("token,user\na,b\nc\n"), "row 3 has 1 fields, the header 2");
        // Rows are told by the line they start on: a quoted field's newlines count.
        assert_eq!(e("token,user\n\"a\nb c\",x\nc\n"), "row 4 has 1 fields, the header 2");
        assert_eq!(e("token\n\"abc\n"), "row 2: a quoted field is not closed");
        assert_eq!(e("token\n\"a\"b\n"), "row 2: text after a closing quote");
        // A CR after a closing quote ends the field only as part of CRLF.
        assert_eq!(e("token\n\"a\"\rb\n"), "row 2: text after a closing quote");
        assert_eq!(Table::parse_csv("token\r\n\"a\"\r\n").unwrap().rows(), &[cols(&["a"])][..]);
        assert!(e("to ken\nx\n").starts_with("column 1 is named 'to ken'"));
        assert!(e("a,a\nx,y\n").starts_with("column 2 is named 'a'"));
        assert!(e("client\nx\n").starts_with("column 1 is named 'client'"));
    }

    #[test]
    fn names_may_hold_underscores_and_hyphens() {
        // A header name and a placeholder are letters, digits, '_' and '-'.
        let t = Table::parse_csv("user_id,x-token\nann,t0\n").unwrap();
        assert_eq!(t.names(), &cols(&["user_id", "x-token"])[..]);
        let p = Pattern::parse("{user_id}:{x-token}", t.names(), false).unwrap();
        assert_eq!(p.expand(0, 0, t.row(0)), "ann:t0");
    }

    proptest::proptest! {
        /// Any table written as RFC 4180 (every field quoted) parses back to itself.
        #[test]
        fn csv_round_trips(rows in proptest::collection::vec(proptest::collection::vec("[ -~\n]{0,8}", 2), 1..6)) {
            let quote = |f: &String| format!("\"{}\"", f.replace('"', "\"\""));
            let mut text = String::from("a,b\r\n");
            for r in &rows {
                text.push_str(&r.iter().map(quote).collect::<Vec<_>>().join(","));
                text.push_str("\r\n");
            }
            let t = Table::parse_csv(&text).unwrap();
            proptest::prop_assert_eq!(t.rows(), &rows[..]);
        }
    }
}
