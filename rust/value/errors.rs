//! Errors that name where in a value tree something went wrong.
//!
//! Recursive walks (freeze, thaw, JSON) return a `PathError`; each frame pushes its own path
//! segment while the error unwinds, so the success path never pays for building a path.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::PyErr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    Key(String),
    Index(usize),
}

#[derive(Debug)]
pub(crate) enum ErrorKind {
    Type,
    Value,
    /// An exception raised by the caller's own code (a custom Mapping): re-raised unchanged.
    Raised(PyErr),
}

#[derive(Debug)]
pub(crate) struct PathError {
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
    /// Innermost segment first (pushed while unwinding).
    pub(crate) reversed_path: Vec<Segment>,
    /// Report only this many outermost segments (a cycle is named where it first closes).
    pub(crate) outer_segments: Option<usize>,
}

impl PathError {
    pub(crate) fn type_error(message: impl Into<String>) -> Self {
        PathError { kind: ErrorKind::Type, message: message.into(), reversed_path: Vec::new(), outer_segments: None }
    }

    pub(crate) fn value_error(message: impl Into<String>) -> Self {
        PathError { kind: ErrorKind::Value, message: message.into(), reversed_path: Vec::new(), outer_segments: None }
    }

    pub(crate) fn raised(err: PyErr) -> Self {
        PathError { kind: ErrorKind::Raised(err), message: String::new(), reversed_path: Vec::new(), outer_segments: None }
    }

    pub(crate) fn at_key(mut self, key: &str) -> Self {
        self.reversed_path.push(Segment::Key(key.to_owned()));
        self
    }

    pub(crate) fn at_index(mut self, index: usize) -> Self {
        self.reversed_path.push(Segment::Index(index));
        self
    }

    /// `root[2]['arguments']`
    pub(crate) fn path(&self, root: &str) -> String {
        let mut out = String::from(root);
        let shown = self.outer_segments.unwrap_or(usize::MAX);
        for segment in self.reversed_path.iter().rev().take(shown) {
            match segment {
                Segment::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
                Segment::Key(k) => {
                    out.push_str("['");
                    for c in k.chars() {
                        match c {
                            '\\' => out.push_str("\\\\"),
                            '\'' => out.push_str("\\'"),
                            '\n' => out.push_str("\\n"),
                            c => out.push(c),
                        }
                    }
                    out.push_str("']");
                }
            }
        }
        out
    }

    pub(crate) fn into_pyerr(self, root: &str) -> PyErr {
        let text = format!("{}: {}", self.path(root), self.message);
        match self.kind {
            ErrorKind::Type => PyTypeError::new_err(text),
            ErrorKind::Value => PyValueError::new_err(text),
            ErrorKind::Raised(err) => err,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_is_built_outermost_first() {
        let err = PathError::type_error("set is not a JSON value").at_key("arguments").at_index(2);
        assert_eq!(err.path("content"), "content[2]['arguments']");
    }

    #[test]
    fn a_cycle_is_named_where_it_closes() {
        let mut err = PathError::value_error("cycle").at_index(0).at_index(0).at_index(0);
        err.outer_segments = Some(1);
        assert_eq!(err.path("value"), "value[0]");
    }

    #[test]
    fn keys_are_quoted_like_python_reprs() {
        let err = PathError::value_error("x").at_key("it's\\");
        assert_eq!(err.path("v"), r"v['it\'s\\']");
    }
}
