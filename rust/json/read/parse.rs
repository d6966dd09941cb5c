//! `from_json`: a JSON parser that builds frozen Python values directly.
//!
//! Hand-written rather than driven by serde_json: numbers are read from their own text (an
//! integer literal must fit in 64 signed bits and never silently becomes a float; `1` and `1.0`
//! stay apart; floats are correctly rounded) without serde_json's `arbitrary_precision`, whose
//! numbers travel as a one-entry map under a reserved key, so that an object with that key
//! was taken for a number. Here every key is data.

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyString};

use crate::json::read::keys::{KeySlots, SeenKeys, KEY_CACHE, KEY_CACHE_MAX_LEN, SHORT_VALUE_MAX_LEN};
use crate::json::read::strings::decode_escaped;
use crate::json::scan::plain_run_len;
use crate::json::text::new_str;
use crate::value::frozendict::EntriesBuilder;
use crate::value::walk::{on_enough_stack, untrack, MAX_DEPTH};

/// Room reserved up front for the decoded text of strings with escapes, at most.
const SCRATCH_RESERVE_MAX: usize = 64 * 1024;
/// Room for array items reserved up front (the stack grows beyond it as needed).
const ITEMS_RESERVE: usize = 16;

/// A parse error: what was wrong, and the byte offset where it was found.
pub(crate) struct ParseError {
    message: String,
    at: usize,
}

pub(crate) type Parsed<T> = Result<T, ParseError>;

/// A parsed value and the nesting depth of its subtree (0 for a leaf).
pub(crate) struct Value<'py>(pub(crate) Bound<'py, PyAny>, pub(crate) usize);

/// Where a string's text is: a range of the input, or the scratch buffer.
#[derive(Clone, Copy)]
pub(crate) enum Span {
    Input(usize, usize),
    Scratch,
}

pub(crate) struct Parser<'a, 'py> {
    pub(crate) py: Python<'py>,
    text: &'a str,
    pub(crate) bytes: &'a [u8],
    pub(crate) pos: usize,
    /// Decoded text of a string that holds escapes.
    scratch: String,
    /// Items of the arrays being parsed, innermost last.
    items: Vec<Bound<'py, PyAny>>,
    keys: Option<&'a mut KeySlots>,
}

impl<'a, 'py> Parser<'a, 'py> {
    pub(crate) fn error<T>(&self, message: impl Into<String>) -> Parsed<T> {
        Err(ParseError { message: message.into(), at: self.pos })
    }

    /// The opening quote of an object's key.
    #[inline(always)]
    pub(crate) fn key_start(&mut self) -> Parsed<()> {
        match self.peek() {
            Some(b'"') => {
                self.pos += 1;
                Ok(())
            }
            Some(_) => self.error("key must be a string"),
            None => self.error("EOF while parsing an object"),
        }
    }

    /// The `:` between an object's key and its value.
    #[inline(always)]
    pub(crate) fn colon(&mut self) -> Parsed<()> {
        self.skip_whitespace();
        match self.peek() {
            Some(b':') => {
                self.pos += 1;
                Ok(())
            }
            Some(_) => self.error("expected `:`"),
            None => self.error("EOF while parsing an object"),
        }
    }

    /// After a list item or object member: `true` past the closing `close`, `false` past a `,`
    /// that another item follows (a `,` right before `close` is a trailing comma).
    #[inline(always)]
    pub(crate) fn after_member(&mut self, close: u8, expected: &'static str, eof: &'static str) -> Parsed<bool> {
        self.skip_whitespace();
        match self.peek() {
            Some(b',') => self.pos += 1,
            Some(byte) if byte == close => {
                self.pos += 1;
                return Ok(true);
            }
            Some(_) => return self.error(expected),
            None => return self.error(eof),
        }
        self.skip_whitespace();
        if self.peek() == Some(close) {
            return self.error("trailing comma");
        }
        Ok(false)
    }

    #[inline(always)]
    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline(always)]
    pub(crate) fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    pub(crate) fn value(&mut self, depth: usize) -> Parsed<Value<'py>> {
        self.skip_whitespace();
        match self.peek() {
            Some(b'{') => on_enough_stack(depth, || self.object(depth)),
            Some(b'[') => on_enough_stack(depth, || self.array(depth)),
            Some(b'"') => {
                self.pos += 1;
                let span = self.string()?;
                Ok(Value(self.cached_str(span, SHORT_VALUE_MAX_LEN).into_any(), 0))
            }
            Some(b't') => self.literal("true", unsafe { ffi::Py_True() }),
            Some(b'f') => self.literal("false", unsafe { ffi::Py_False() }),
            Some(b'n') => self.literal("null", unsafe { ffi::Py_None() }),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => self.error("expected value"),
            None => self.error("EOF while parsing a value"),
        }
    }

    /// `true`, `false` or `null`: the singleton `value`.
    fn literal(&mut self, word: &str, value: *mut ffi::PyObject) -> Parsed<Value<'py>> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            return Ok(Value(unsafe { Bound::from_borrowed_ptr(self.py, value) }, 0));
        }
        self.error("expected value")
    }

    pub(crate) fn enter(&self, depth: usize) -> Parsed<()> {
        if depth >= MAX_DEPTH {
            return self.error(format!("nesting deeper than {MAX_DEPTH} levels"));
        }
        Ok(())
    }

    fn array(&mut self, depth: usize) -> Parsed<Value<'py>> {
        self.enter(depth)?;
        self.pos += 1; // '['
        // The items of every open array share one stack: no allocation per array.
        let base = self.items.len();
        let mut height = 0;
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                let Value(item, item_height) = self.value(depth + 1)?;
                height = height.max(item_height);
                self.items.push(item);
                if self.after_member(b']', "expected `,` or `]`", "EOF while parsing a list")? {
                    break;
                }
            }
        }
        let len = self.items.len() - base;
        let tuple = unsafe {
            let tuple = ffi::PyTuple_New(len as ffi::Py_ssize_t);
            let tuple = Bound::from_owned_ptr_or_err(self.py, tuple).map_err(|e| ParseError { message: e.to_string(), at: self.pos })?;
            for (i, item) in self.items.drain(base..).enumerate() {
                ffi::PyTuple_SET_ITEM(tuple.as_ptr(), i as ffi::Py_ssize_t, item.into_ptr());
            }
            tuple
        };
        untrack(&tuple);
        Ok(Value(tuple, height + 1))
    }

    fn object(&mut self, depth: usize) -> Parsed<Value<'py>> {
        self.enter(depth)?;
        self.pos += 1; // '{'
        let mut entries = EntriesBuilder::with_capacity(8);
        let mut seen = SeenKeys::new();
        let mut height = 0;
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value(entries.build(self.py, 1).into_any(), 1));
        }
        loop {
            self.key_start()?;
            let (key, key_hash) = self.key()?;
            self.colon()?;
            let Value(value, value_height) = self.value(depth + 1)?;
            height = height.max(value_height);
            let py = self.py;
            let same_key = |index: usize| {
                let theirs = entries.key(py, index).as_ptr();
                theirs == key.as_ptr() || unsafe { ffi::PyUnicode_Compare(theirs, key.as_ptr()) } == 0
            };
            match seen.find(key_hash, same_key) {
                // A repeated key: the last value wins, in the first position (as `json.loads`).
                Some(index) => entries.set_value(index, value),
                None => {
                    seen.insert(key_hash, entries.len());
                    entries.push(key.into_any(), value);
                }
            }
            if self.after_member(b'}', "expected `,` or `}`", "EOF while parsing an object")? {
                break;
            }
        }
        Ok(Value(entries.build(self.py, height + 1).into_any(), height + 1))
    }

    /// An object key (the opening quote consumed) and its Python hash.
    fn key(&mut self) -> Parsed<(Bound<'py, PyString>, isize)> {
        let span = self.string()?;
        let key = self.cached_str(span, KEY_CACHE_MAX_LEN);
        // Python's own str hash (SipHash, keyed per process): keys chosen to collide under a
        // fixed hash cannot make an object quadratic. Computed once and kept in the str object,
        // so a cached key has it already, and a large FrozenDict's lookup dict reuses it.
        let hash = str_hash(&key);
        Ok((key, hash))
    }

    /// The `str` of a string just read: from the cache when its text is at most `max_len`
    /// bytes, so that the keys and short values (a block type, a role, a source kind) a log
    /// repeats on every line are built once per process instead of once per occurrence.
    #[inline(always)]
    fn cached_str(&mut self, span: Span, max_len: usize) -> Bound<'py, PyString> {
        let text = match span {
            // SAFETY: spans start and end next to ASCII bytes: char boundaries.
            Span::Input(start, end) => unsafe { self.text.get_unchecked(start..end) },
            Span::Scratch => self.scratch.as_str(),
        };
        match self.keys.as_deref_mut() {
            Some(cache) if text.len() <= max_len => cache.get(self.py, text),
            // SAFETY: `new_str` makes a `str`.
            _ => unsafe { new_str(self.py, text).cast_into_unchecked::<PyString>() },
        }
    }

    /// Read a string (the opening quote consumed): its text is in the input when it holds no
    /// escape, else decoded into the scratch buffer. Inlined: most strings (every key) are a
    /// plain run and its quote, a few instructions next to the cost of a call.
    #[inline(always)]
    pub(crate) fn string(&mut self) -> Parsed<Span> {
        let start = self.pos;
        self.skip_plain_run();
        if self.peek() == Some(b'"') {
            self.pos += 1;
            return Ok(Span::Input(start, self.pos - 1));
        }
        self.escaped_string(start)
    }

    /// The rest of a string from `start` that holds an escape (or is malformed), decoded into
    /// the scratch buffer; the parser is at the first byte that is not plain.
    #[inline(never)]
    fn escaped_string(&mut self, start: usize) -> Parsed<Span> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        // Decoded text is never longer than its JSON: one allocation instead of a doubling chain.
        scratch.reserve((self.bytes.len() - start).min(SCRATCH_RESERVE_MAX));
        // SAFETY: the run stops only at ASCII bytes, so both ends are char boundaries, and
        // `decode_escaped` only appends whole characters.
        let decoded = unsafe {
            let out = scratch.as_mut_vec();
            out.extend_from_slice(&self.bytes[start..self.pos]);
            decode_escaped(self.bytes, self.pos, out)
        };
        self.scratch = scratch;
        match decoded {
            Ok(end) => {
                self.pos = end;
                Ok(Span::Scratch)
            }
            Err((message, at)) => {
                self.pos = at;
                self.error(message)
            }
        }
    }

    pub(crate) fn span_text(&self, span: Span) -> &str {
        match span {
            // SAFETY: as in `string`.
            Span::Input(start, end) => unsafe { self.text.get_unchecked(start..end) },
            Span::Scratch => &self.scratch,
        }
    }

    /// Advance past bytes that need no attention inside a string.
    #[inline(always)]
    fn skip_plain_run(&mut self) {
        self.pos += plain_run_len(&self.bytes[self.pos..]);
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    /// A JSON number from its text: an integer literal must fit in 64 signed bits; anything
    /// with a fraction or exponent is a finite float, correctly rounded.
    fn number(&mut self) -> Parsed<Value<'py>> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return self.error("invalid number");
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return self.error("invalid number"),
        }
        let int_end = self.pos;
        let mut is_float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return self.error("invalid number");
            }
            is_float = true;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return self.error("invalid number");
            }
            is_float = true;
        }
        let text = &self.text[start..self.pos];
        if is_float {
            let value: f64 = text.parse().map_err(|_| ParseError { message: format!("invalid number {text}"), at: start })?;
            if !value.is_finite() {
                return Err(ParseError { message: format!("number {text} is out of the finite float range"), at: start });
            }
            let float = unsafe { Bound::from_owned_ptr(self.py, ffi::PyFloat_FromDouble(value)) };
            return Ok(Value(float, 0));
        }
        let value = integer_value(&self.bytes[start + negative as usize..int_end], negative)
            .ok_or_else(|| out_of_range(text, start))?;
        let int = unsafe { Bound::from_owned_ptr(self.py, ffi::PyLong_FromLongLong(value)) };
        Ok(Value(int, 0))
    }
}

/// The value of an integer literal's `digits` (ASCII digits only), negated when `negative`, if
/// it fits in 64 signed bits.
#[inline]
pub(crate) fn integer_value(digits: &[u8], negative: bool) -> Option<i64> {
    // Accumulate the magnitude as a negative number: i64::MIN has no positive counterpart.
    let magnitude = digits
        .iter()
        .try_fold(0i64, |value, &digit| value.checked_mul(10)?.checked_sub((digit - b'0') as i64))?;
    if negative {
        Some(magnitude)
    } else {
        magnitude.checked_neg()
    }
}

/// The Python hash of a `str`: the one it keeps, when it has been computed (a cached key).
#[inline(always)]
fn str_hash(text: &Bound<'_, PyString>) -> isize {
    #[cfg(not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API)))]
    {
        // SAFETY: every `str` starts with a `PyASCIIObject`; -1 means not computed yet.
        let kept = unsafe { (*(text.as_ptr() as *mut ffi::PyASCIIObject)).hash };
        if kept != -1 {
            return kept as isize;
        }
    }
    unsafe { ffi::PyObject_Hash(text.as_ptr()) as isize }
}

fn out_of_range(text: &str, at: usize) -> ParseError {
    ParseError { message: format!("integer {text} is outside the 64-bit signed range"), at }
}

/// "at line 3 column 7" for a byte offset (columns count bytes, from 1).
fn position(text: &str, at: usize) -> String {
    let at = at.min(text.len());
    let before = &text.as_bytes()[..at];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = at - before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) + 1;
    format!("line {line} column {column}")
}

/// Parse JSON into a frozen tree; errors name the line and column.
pub(crate) fn parse<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    run(py, text, |parser| parser.value(0).map(|Value(value, _)| value))
}

/// Run `top` over the whole of `text` (nothing but whitespace may follow).
pub(crate) fn run<'py, T>(py: Python<'py>, text: &str, top: impl FnOnce(&mut Parser<'_, 'py>) -> Parsed<T>) -> PyResult<T> {
    // try_lock: another thread may be parsing, or a finalizer run during this parse may parse
    // again on this thread; either way that parse simply goes without the cache.
    let mut guard = KEY_CACHE.try_lock().ok();
    let keys = guard
        .as_deref_mut()
        .map(|slots| slots.get_or_insert_with(KeySlots::new));
    let items = Vec::with_capacity(ITEMS_RESERVE);
    let mut parser = Parser { py, text, bytes: text.as_bytes(), pos: 0, scratch: String::new(), items, keys };
    let result = top(&mut parser).and_then(|value| {
        parser.skip_whitespace();
        if parser.pos < parser.bytes.len() {
            return parser.error("trailing characters");
        }
        Ok(value)
    });
    result.map_err(|err| PyValueError::new_err(format!("invalid JSON: {} at {}", err.message, position(text, err.at))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_lines_and_byte_columns_from_one() {
        assert_eq!(position("abc", 0), "line 1 column 1");
        assert_eq!(position("a\nbc", 3), "line 2 column 2");
        assert_eq!(position("a\n", 9), "line 2 column 1");
    }
}
