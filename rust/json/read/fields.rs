//! Reading a JSON object whose keys are known (a message, a log record) without building it:
//! the values of the keys asked for go to their slots, parsed by `parse`'s parser exactly
//! as `parse` would parse them (same values, same errors, same depth limit), and the object
//! itself never becomes a `FrozenDict`.

use pyo3::prelude::*;
use pyo3::types::{PyAny, PyString};

use crate::json::read::parse::{run, Parsed, Parser, Value};
use crate::json::read::recent::RecentObjects;
use crate::value::walk::MAX_DEPTH;

/// The members of an object read by `object_fields`.
pub(crate) struct Fields<'py, const N: usize> {
    /// For each name asked for, its value (the last one if the key repeats) and the nesting
    /// depth of that value's subtree.
    pub(crate) values: [Option<(Bound<'py, PyAny>, usize)>; N],
    /// The first key that is none of the names.
    pub(crate) unknown: Option<Bound<'py, PyString>>,
}

impl<'a, 'py> Parser<'a, 'py> {
    /// The object whose `{` is next, `depth` containers below the root of the text, keeping
    /// only the values of the keys `names`: `object` with the values going to their slots. The
    /// values of slot `recent.0` are taken from `recent.1` where it holds their text.
    pub(crate) fn object_fields<const N: usize>(
        &mut self,
        names: &[&str; N],
        depth: usize,
        mut recent: Option<(usize, &mut RecentObjects)>,
    ) -> Parsed<Fields<'py, N>> {
        self.enter(depth)?;
        self.pos += 1; // '{'
        let mut fields = Fields { values: std::array::from_fn(|_| None), unknown: None };
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(fields);
        }
        loop {
            self.key_start()?;
            let span = self.string()?;
            let key = self.span_text(span);
            let slot = names.iter().position(|name| *name == key);
            if slot.is_none() && fields.unknown.is_none() {
                fields.unknown = Some(PyString::new(self.py, key));
            }
            self.colon()?;
            let Value(value, height) = match recent.as_mut() {
                Some((reused, objects)) if slot == Some(*reused) => self.recent_value(objects, depth + 1)?,
                _ => self.value(depth + 1)?,
            };
            if let Some(slot) = slot {
                // A repeated key: the last value wins, as in `object`.
                fields.values[slot] = Some((value, height));
            }
            if self.after_member(b'}', "expected `,` or `}`", "EOF while parsing an object")? {
                break;
            }
        }
        Ok(fields)
    }

    /// The value next, `depth` containers below the root: an object of `recent` when the text
    /// here starts with its text, else parsed (and kept there when it is a short object).
    fn recent_value(&mut self, recent: &mut RecentObjects, depth: usize) -> Parsed<Value<'py>> {
        self.skip_whitespace();
        if let Some((value, height, length)) = recent.starting(self.py, &self.bytes[self.pos..]) {
            if depth + height <= MAX_DEPTH {
                self.pos += length;
                return Ok(Value(value, height));
            }
        }
        let start = self.pos;
        let value = self.value(depth)?;
        recent.keep(&self.bytes[start..self.pos], &value.0, value.1);
        Ok(value)
    }

    /// The top-level value, keeping only the values of the keys `names` when it is an object.
    fn top_level_fields<const N: usize>(&mut self, names: &[&str; N], recent: Option<(usize, &mut RecentObjects)>) -> Parsed<TopLevel<'py, N>> {
        self.skip_whitespace();
        if self.peek() != Some(b'{') {
            let Value(value, _) = self.value(0)?;
            return Ok(TopLevel::Other(value));
        }
        Ok(TopLevel::Object(self.object_fields(names, 0, recent)?))
    }
}

/// The top level of a JSON text read by `parse_fields`.
pub(crate) enum TopLevel<'py, const N: usize> {
    /// An object, as `object_fields` reads it.
    Object(Fields<'py, N>),
    /// Any other JSON value, as `parse` gives it.
    Other(Bound<'py, PyAny>),
}

/// Parse JSON whose top level is meant to be an object with known keys (a message): the values
/// of `names` are parsed into frozen values as `parse` would, but the top-level object itself is
/// never built. The same text gives the same errors as `parse`. The values of slot `recent.0`
/// are taken from `recent.1` where it holds their text.
pub(crate) fn parse_fields<'py, const N: usize>(
    py: Python<'py>,
    text: &str,
    names: &[&str; N],
    recent: Option<(usize, &mut RecentObjects)>,
) -> PyResult<TopLevel<'py, N>> {
    run(py, text, |parser| parser.top_level_fields(names, recent))
}
