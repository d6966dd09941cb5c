//! A JSON text read ahead into a tape, without the GIL, and the frozen values built from it.
//!
//! `TapeBuffers::tokenize` does everything of parsing that needs no Python object: the grammar, strings
//! (escapes decoded into the tape's own buffer), numbers, and repeated keys. It runs on
//! `decode_records`' second thread (`log/sort_ahead.rs`), so the GIL thread only allocates the
//! objects (`TapeReader`). It is narrower than `parse`, never wider: it gives up (`None`) on
//! anything it does not take as it is (a key with an escape, a repeated key, an object of more
//! than `MAX_KEYS` keys, nesting deeper than `MAX_TAPE_DEPTH`, any text `parse` refuses), and
//! the caller then parses the text the usual way, which gives the value or names the error.
//! What it takes, `TapeReader` builds into exactly what `parse` builds from the same text.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyString};

use crate::json::read::keys::{KeySlots, KEY_CACHE_MAX_LEN, SHORT_VALUE_MAX_LEN};
use crate::json::read::parse::integer_value;
use crate::json::read::recent::RecentObjects;
use crate::json::read::strings::decode_escaped;
use crate::json::scan::{digit_run_len, plain_run_len};
use crate::json::text::new_str;
use crate::value::frozendict::EntriesBuilder;
use crate::value::walk::{untrack, MAX_DEPTH};

/// Deeper nesting is left to `parse` (a message record nests 4-6 levels).
const MAX_TAPE_DEPTH: usize = 32;
const _: () = assert!(MAX_TAPE_DEPTH < MAX_DEPTH);
/// Objects with more keys are left to `parse`, whose repeated-key check scales to any size.
const MAX_KEYS: usize = 16;

/// One step of the tape. Spans are byte offsets into the text (`u32`: longer texts are not taped).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Token {
    /// An object's `{` at `start`, past its `}` at `end`; `len` members follow, each a `Key`
    /// and its value.
    Object { start: u32, end: u32, len: u32 },
    /// An array from its `[` at `start` to past its `]` at `end`; `len` values follow.
    Array { start: u32, end: u32, len: u32 },
    /// A key without escapes: its text in the input.
    Key { start: u32, end: u32 },
    /// A string without escapes: its text in the input.
    Str { start: u32, end: u32 },
    /// A string with escapes: its decoded text in the tape's buffer.
    Decoded { start: u32, end: u32 },
    Int(i64),
    Float(f64),
    True,
    False,
    Null,
}

/// Tapes one after another: the tokens of every text taped, and the decoded text of their strings
/// with escapes. One pair of buffers serves many texts (a chunk of a log's records), reused
/// from chunk to chunk: no allocation per text, and memory already touched.
#[derive(Debug, Default)]
pub(crate) struct TapeBuffers {
    tokens: Vec<Token>,
    decoded: Vec<u8>,
    /// The keys of the objects being read, innermost last (one stack: nothing to set up per object).
    keys: Vec<(u32, u32)>,
}

/// One text's tape: its tokens, and the decoded strings they point into.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tape<'a> {
    tokens: &'a [Token],
    decoded: &'a [u8],
}

impl TapeBuffers {
    pub(crate) fn clear(&mut self) {
        self.tokens.clear();
        self.decoded.clear();
    }

    /// Tape the JSON `text` (UTF-8) after the tapes already held: the range of its tokens, or
    /// `None` (the buffers as they were) when it is anything `tokenize` leaves to `parse`.
    pub(crate) fn tokenize(&mut self, text: &str) -> Option<std::ops::Range<usize>> {
        let (tokens, decoded) = (self.tokens.len(), self.decoded.len());
        let mut tokenizer = Tokenizer { bytes: text.as_bytes(), pos: 0, tape: self };
        let whole = u32::try_from(text.len()).is_ok() && tokenizer.value(0).is_some() && {
            tokenizer.skip_whitespace();
            tokenizer.pos == text.len()
        };
        if whole && u32::try_from(self.decoded.len()).is_ok() {
            return Some(tokens..self.tokens.len());
        }
        self.tokens.truncate(tokens);
        self.decoded.truncate(decoded);
        self.keys.clear();
        None
    }

    /// The tape of the text whose tokens are `range` (as `tokenize` returned it).
    pub(crate) fn tape(&self, range: std::ops::Range<usize>) -> Tape<'_> {
        Tape { tokens: &self.tokens[range], decoded: &self.decoded }
    }
}

struct Tokenizer<'a> {
    bytes: &'a [u8],
    pos: usize,
    tape: &'a mut TapeBuffers,
}

impl Tokenizer<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    /// Past the byte `expected` when it is next (after whitespace), else `None`.
    fn expect(&mut self, expected: u8) -> Option<()> {
        self.skip_whitespace();
        (self.peek() == Some(expected)).then(|| self.pos += 1)
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        self.skip_whitespace();
        let token = match self.peek()? {
            b'{' => return self.object(depth),
            b'[' => return self.array(depth),
            b'"' => {
                self.pos += 1;
                self.string()?
            }
            b't' => self.literal(b"true", Token::True)?,
            b'f' => self.literal(b"false", Token::False)?,
            b'n' => self.literal(b"null", Token::Null)?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return None,
        };
        self.tape.tokens.push(token);
        Some(())
    }

    fn literal(&mut self, word: &[u8], token: Token) -> Option<Token> {
        self.bytes[self.pos..].starts_with(word).then(|| {
            self.pos += word.len();
            token
        })
    }

    /// After a member or item: `Some(true)` past the closing `close`, `Some(false)` past a `,`
    /// that another member follows.
    fn after_member(&mut self, close: u8) -> Option<bool> {
        self.skip_whitespace();
        match self.peek()? {
            b',' => self.pos += 1,
            byte if byte == close => {
                self.pos += 1;
                return Some(true);
            }
            _ => return None,
        }
        self.skip_whitespace();
        (self.peek() != Some(close)).then_some(false) // a trailing comma is refused
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        if depth >= MAX_TAPE_DEPTH {
            return None;
        }
        let start = self.pos;
        self.pos += 1;
        let at = self.tape.tokens.len();
        self.tape.tokens.push(Token::Null); // the object's token, once its end and length are known
        let base = self.tape.keys.len();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                if self.peek() != Some(b'"') || self.tape.keys.len() - base == MAX_KEYS {
                    return None;
                }
                self.pos += 1;
                let (start, end) = (self.pos, self.pos + plain_run_len(&self.bytes[self.pos..]));
                self.pos = end;
                if self.peek() != Some(b'"') {
                    return None; // a key with an escape (or malformed) is left to `parse`
                }
                self.pos += 1;
                let key = &self.bytes[start..end];
                let same = |&(other_start, other_end): &(u32, u32)| &self.bytes[other_start as usize..other_end as usize] == key;
                if self.tape.keys[base..].iter().any(same) {
                    return None; // a repeated key: `parse` keeps the last value in the first place
                }
                let key = (start as u32, end as u32);
                self.tape.keys.push(key);
                self.tape.tokens.push(Token::Key { start: key.0, end: key.1 });
                self.expect(b':')?;
                self.value(depth + 1)?;
                if self.after_member(b'}')? {
                    break;
                }
            }
        }
        let len = self.tape.keys.len() - base;
        self.tape.keys.truncate(base);
        self.tape.tokens[at] = Token::Object { start: start as u32, end: self.pos as u32, len: len as u32 };
        Some(())
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if depth >= MAX_TAPE_DEPTH {
            return None;
        }
        let start = self.pos;
        self.pos += 1;
        let at = self.tape.tokens.len();
        self.tape.tokens.push(Token::Null);
        let mut len = 0;
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                self.value(depth + 1)?;
                len += 1;
                if self.after_member(b']')? {
                    break;
                }
            }
        }
        self.tape.tokens[at] = Token::Array { start: start as u32, end: self.pos as u32, len };
        Some(())
    }

    /// A string (its opening quote consumed), as `Parser::string` reads it.
    fn string(&mut self) -> Option<Token> {
        let start = self.pos;
        self.pos += plain_run_len(&self.bytes[self.pos..]);
        if self.peek() == Some(b'"') {
            self.pos += 1;
            return Some(Token::Str { start: start as u32, end: self.pos as u32 - 1 });
        }
        let decoded = &mut self.tape.decoded;
        let from = decoded.len();
        decoded.extend_from_slice(&self.bytes[start..self.pos]);
        // Valid UTF-8 in, whole characters out: the buffer holds UTF-8 texts one after another.
        self.pos = decode_escaped(self.bytes, self.pos, decoded).ok()?;
        Some(Token::Decoded { start: from as u32, end: decoded.len() as u32 })
    }

    /// A number, as `Parser::number` reads it (an integer in 64 signed bits, or a finite float).
    fn number(&mut self) -> Option<Token> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        self.pos += negative as usize;
        let digits = digit_run_len(&self.bytes[self.pos..]);
        if digits == 0 || (digits > 1 && self.bytes[self.pos] == b'0') {
            return None;
        }
        self.pos += digits;
        let int_end = self.pos;
        let mut is_float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let fraction = digit_run_len(&self.bytes[self.pos..]);
            if fraction == 0 {
                return None;
            }
            self.pos += fraction;
            is_float = true;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            let exponent = digit_run_len(&self.bytes[self.pos..]);
            if exponent == 0 {
                return None;
            }
            self.pos += exponent;
            is_float = true;
        }
        if is_float {
            // SAFETY: sign, digits, `.`, `e` and sign bytes: ASCII.
            let text = unsafe { std::str::from_utf8_unchecked(&self.bytes[start..self.pos]) };
            let value: f64 = text.parse().ok()?;
            return value.is_finite().then_some(Token::Float(value));
        }
        integer_value(&self.bytes[start + negative as usize..int_end], negative).map(Token::Int)
    }
}

/// Builds frozen values from a tape, token by token, as `Parser` builds them from the text.
pub(crate) struct TapeReader<'a, 'py> {
    pub(crate) py: Python<'py>,
    text: &'a str,
    tape: Tape<'a>,
    at: usize,
    keys: Option<&'a mut KeySlots>,
}

impl<'a, 'py> TapeReader<'a, 'py> {
    pub(crate) fn new(py: Python<'py>, text: &'a str, tape: Tape<'a>, keys: Option<&'a mut KeySlots>) -> Self {
        TapeReader { py, text, tape, at: 0, keys }
    }

    /// The next token (the tape is whole: every container's members are on it).
    #[inline(always)]
    pub(crate) fn next(&mut self) -> Token {
        let token = self.tape.tokens[self.at];
        self.at += 1;
        token
    }

    /// The text of a `Key` or `Str` in the input, or of a `Decoded` in the tape's buffer.
    #[inline(always)]
    pub(crate) fn text_of(&self, token: Token) -> &'a str {
        let tape: Tape<'a> = self.tape;
        // SAFETY: spans lie between ASCII bytes of the UTF-8 input, or bound whole characters
        // of the buffer's UTF-8 (see `Tokenizer::string`).
        unsafe {
            match token {
                Token::Key { start, end } | Token::Str { start, end } => self.text.get_unchecked(start as usize..end as usize),
                Token::Decoded { start, end } => std::str::from_utf8_unchecked(&tape.decoded[start as usize..end as usize]),
                _ => "",
            }
        }
    }

    /// The `str` of a key or string token, from the key cache up to `max_len` bytes (as `Parser::cached_str`).
    #[inline(always)]
    fn str_of(&mut self, token: Token, max_len: usize) -> Bound<'py, PyString> {
        let text = self.text_of(token);
        match self.keys.as_deref_mut() {
            Some(cache) if text.len() <= max_len => cache.get(self.py, text),
            // SAFETY: `new_str` makes a `str`.
            _ => unsafe { new_str(self.py, text).cast_into_unchecked::<PyString>() },
        }
    }

    /// The key of the member next, as `Parser::key` makes it.
    #[inline(always)]
    pub(crate) fn key(&mut self) -> (Token, Bound<'py, PyString>) {
        let token = self.next();
        (token, self.str_of(token, KEY_CACHE_MAX_LEN))
    }

    /// The value next and the nesting depth of its subtree, as `Parser::value` gives them.
    pub(crate) fn value(&mut self) -> (Bound<'py, PyAny>, usize) {
        let token = self.next();
        self.value_of(token)
    }

    /// The value next: the object of `recent` whose text is this object's, else built (and kept
    /// there when it is a short object), as `Parser::recent_value` reads it from the text.
    pub(crate) fn recent_value(&mut self, recent: &mut RecentObjects) -> (Bound<'py, PyAny>, usize) {
        let token = self.next();
        let Token::Object { start, end, .. } = token else { return self.value_of(token) };
        let text: &'a str = self.text;
        let text = &text.as_bytes()[start as usize..end as usize];
        if let Some(found) = recent.exactly(self.py, text) {
            self.skip(token);
            return found;
        }
        let value = self.value_of(token);
        recent.keep(text, &value.0, value.1);
        value
    }

    /// The value that `token` (just taken) starts.
    pub(crate) fn value_of(&mut self, token: Token) -> (Bound<'py, PyAny>, usize) {
        let py = self.py;
        let leaf = match token {
            Token::Object { len, .. } => return self.object(len as usize),
            Token::Array { len, .. } => return self.array(len as usize),
            Token::Str { .. } | Token::Decoded { .. } | Token::Key { .. } => self.str_of(token, SHORT_VALUE_MAX_LEN).into_any(),
            Token::Int(value) => unsafe { Bound::from_owned_ptr(py, ffi::PyLong_FromLongLong(value)) },
            Token::Float(value) => unsafe { Bound::from_owned_ptr(py, ffi::PyFloat_FromDouble(value)) },
            Token::True => unsafe { Bound::from_borrowed_ptr(py, ffi::Py_True()) },
            Token::False => unsafe { Bound::from_borrowed_ptr(py, ffi::Py_False()) },
            Token::Null => unsafe { Bound::from_borrowed_ptr(py, ffi::Py_None()) },
        };
        (leaf, 0)
    }

    fn object(&mut self, len: usize) -> (Bound<'py, PyAny>, usize) {
        // The tokenizer refused repeated keys: every key is new, no table to look them up in.
        let mut entries = EntriesBuilder::with_capacity(len.max(1));
        let mut height = 0;
        for _ in 0..len {
            let (_, key) = self.key();
            let (value, value_height) = self.value();
            height = height.max(value_height);
            entries.push(key.into_any(), value);
        }
        (entries.build(self.py, height + 1).into_any(), height + 1)
    }

    fn array(&mut self, len: usize) -> (Bound<'py, PyAny>, usize) {
        let mut height = 0;
        // SAFETY: a new tuple of `len` slots, each set once below before it is seen.
        let tuple = unsafe {
            let tuple = Bound::from_owned_ptr(self.py, ffi::PyTuple_New(len as ffi::Py_ssize_t));
            for index in 0..len {
                let (item, item_height) = self.value();
                height = height.max(item_height);
                ffi::PyTuple_SET_ITEM(tuple.as_ptr(), index as ffi::Py_ssize_t, item.into_ptr());
            }
            tuple
        };
        untrack(&tuple);
        (tuple, height + 1)
    }

    /// Past the value that `token` (just taken) starts, building nothing.
    pub(crate) fn skip(&mut self, token: Token) {
        match token {
            Token::Object { len, .. } => (0..len).for_each(|_| {
                self.next();
                let value = self.next();
                self.skip(value);
            }),
            Token::Array { len, .. } => (0..len).for_each(|_| {
                let item = self.next();
                self.skip(item);
            }),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Option<Vec<Token>> {
        let mut buffers = TapeBuffers::default();
        let range = buffers.tokenize(text)?;
        Some(buffers.tape(range).tokens.to_vec())
    }

    #[test]
    fn a_text_is_taped_token_by_token_with_its_spans() {
        let text = r#" {"a":[1,-2.5e1,"x\n"],"b":{},"c":true,"d":null,"e":false} "#;
        let got = tokens(text).expect("taped");
        use Token::*;
        assert_eq!(
            got,
            vec![
                Object { start: 1, end: 58, len: 5 },
                Key { start: 3, end: 4 },
                Array { start: 6, end: 22, len: 3 },
                Int(1),
                Float(-25.0),
                Decoded { start: 0, end: 2 },
                Key { start: 24, end: 25 },
                Object { start: 27, end: 29, len: 0 },
                Key { start: 31, end: 32 },
                True,
                Key { start: 40, end: 41 },
                Null,
                Key { start: 49, end: 50 },
                False,
            ]
        );
    }

    #[test]
    fn what_the_tokenizer_does_not_take_leaves_the_buffers_as_they_were() {
        let mut buffers = TapeBuffers::default();
        let first = buffers.tokenize(r#"["a\tb"]"#).expect("taped");
        let repeated = format!("[{}]", "[".repeat(MAX_TAPE_DEPTH) + &"]".repeat(MAX_TAPE_DEPTH));
        let many_keys = format!("{{{}}}", (0..=MAX_KEYS).map(|k| format!("\"k{k}\":1")).collect::<Vec<_>>().join(","));
        for refused in [
            r#"["\u00e9", {"k\u0065y":1}]"#,
            r#"{"k":1,"k":2}"#,
            r#"["\ud800"]"#,
            "[1,]",
            "[01]",
            "[1.]",
            "[1e400]",
            "[9223372036854775808]",
            "[nul]",
            "[1] x",
            "\"a\tb\"",
            &repeated,
            &many_keys,
        ] {
            assert_eq!(buffers.tokenize(refused), None, "{refused}");
            assert_eq!((buffers.tokens.len(), buffers.decoded.len()), (first.end, 3), "{refused}");
        }
        assert_eq!(buffers.tape(first).tokens, &[Token::Array { start: 0, end: 8, len: 1 }, Token::Decoded { start: 0, end: 3 }]);
    }
}
