//! A `Message`'s JSON object: through the general writer, or the frozen fast path.

use pyo3::prelude::*;

use crate::json::write::leaves::write_str_ptr;
use crate::json::write::tree::{write_frozen_dict, write_frozen_tuple, write_value};
use crate::value::errors::PathError;
use crate::value::message::Message;
use crate::value::walk::Walk;

impl Message {
    /// The message's JSON object through the general writer (when its depth does not fit where
    /// it sits, so that the error names the deepest place, as for any tree).
    pub(crate) fn write_json(&self, out: &mut Vec<u8>, py: Python<'_>, walk: &mut Walk) -> Result<(), PathError> {
        out.extend_from_slice(b"{\"id\":");
        write_value(out, self.id.bind(py).as_any(), walk).map_err(|e| e.at_key("id"))?;
        out.extend_from_slice(b",\"role\":");
        write_value(out, self.role.bind(py).as_any(), walk).map_err(|e| e.at_key("role"))?;
        out.extend_from_slice(b",\"content\":");
        write_value(out, self.content.bind(py).as_any(), walk).map_err(|e| e.at_key("content"))?;
        out.extend_from_slice(b",\"source\":");
        write_value(out, self.source.bind(py).as_any(), walk).map_err(|e| e.at_key("source"))?;
        out.push(b'}');
        Ok(())
    }

    /// The message's JSON object, `level` containers below the root of the text being written;
    /// the caller checked that the message's depth fits there. Its parts are frozen by
    /// construction, so they go through the writer's frozen fast path.
    pub(crate) fn write_frozen_json(&self, out: &mut Vec<u8>, py: Python<'_>, level: usize) -> Result<(), PathError> {
        unsafe {
            out.extend_from_slice(b"{\"id\":");
            write_str_ptr(out, self.id.as_ptr()).map_err(|e| e.at_key("id"))?;
            out.extend_from_slice(b",\"role\":");
            write_str_ptr(out, self.role.as_ptr()).map_err(|e| e.at_key("role"))?;
            out.extend_from_slice(b",\"content\":");
            write_frozen_tuple(out, py, self.content.as_ptr(), level + 1).map_err(|e| e.at_key("content"))?;
            out.extend_from_slice(b",\"source\":");
            write_frozen_dict(out, py, self.source.as_ptr(), level + 1).map_err(|e| e.at_key("source"))?;
        }
        out.push(b'}');
        Ok(())
    }

    /// The message as the root of the text being written.
    pub(crate) fn write_root(&self, out: &mut Vec<u8>, py: Python<'_>) -> PyResult<()> {
        self.write_frozen_json(out, py, 0).map_err(|e| e.into_pyerr("message"))
    }
}
