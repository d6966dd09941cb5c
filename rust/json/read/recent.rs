//! Objects read recently, kept by their JSON text so that reading the same text again takes the
//! object already built instead of parsing and building another: a frozen value read from the same
//! text is equal to it, so one object can stand for all of them (as the key cache shares key
//! strings). The readers of messages keep their `source` here: a session's messages have a
//! handful of sources (the user, each model), repeated in thousands of messages.

use std::sync::Mutex;

use pyo3::prelude::*;

/// How many objects are kept: the least recently used one makes room for a new one, so a run of
/// one-off texts (a tool's source names its call) leaves the ones in steady use in place.
const KEPT: usize = 4;
/// Longer texts are not kept: comparing them would cost more than a small object's building saves.
const MAX_TEXT: usize = 128;

struct Kept {
    text: Vec<u8>,
    value: Py<PyAny>,
    /// The value's height (`Value`'s second field): 1 for an object of leaves.
    height: usize,
    /// `RecentObjects::uses` when it was last found or kept.
    used: u64,
}

/// The objects kept (see the module's documentation).
pub(crate) struct RecentObjects {
    kept: Vec<Kept>,
    uses: u64,
}

/// The sources of the messages read recently (`log/message_record.rs`, `log/message_tape.rs`,
/// `Message.from_json`). Taken with `try_lock`: a reader that finds it held reads as usual.
pub(crate) static RECENT_SOURCES: Mutex<RecentObjects> = Mutex::new(RecentObjects { kept: Vec::new(), uses: 0 });

impl RecentObjects {
    /// The object kept whose text `rest` starts with, its height and that text's length. A kept
    /// text is a whole JSON object, so a reader at the start of `rest` would read exactly it.
    pub(crate) fn starting<'py>(&mut self, py: Python<'py>, rest: &[u8]) -> Option<(Bound<'py, PyAny>, usize, usize)> {
        self.find(py, |text| rest.starts_with(text))
    }

    /// The object kept whose text is `text`, and its height.
    pub(crate) fn exactly<'py>(&mut self, py: Python<'py>, text: &[u8]) -> Option<(Bound<'py, PyAny>, usize)> {
        self.find(py, |kept| kept == text).map(|(value, height, _)| (value, height))
    }

    fn find<'py>(&mut self, py: Python<'py>, matches: impl Fn(&[u8]) -> bool) -> Option<(Bound<'py, PyAny>, usize, usize)> {
        self.uses += 1;
        let uses = self.uses;
        let kept = self.kept.iter_mut().find(|kept| matches(&kept.text))?;
        kept.used = uses;
        Some((kept.value.bind(py).clone(), kept.height, kept.text.len()))
    }

    /// Keep `value`, an object read from `text` (the whole of it, `{` to `}`), unless the text is long.
    pub(crate) fn keep(&mut self, text: &[u8], value: &Bound<'_, PyAny>, height: usize) {
        if text.len() > MAX_TEXT || text.first() != Some(&b'{') {
            return;
        }
        self.uses += 1;
        let kept = Kept { text: text.to_vec(), value: value.clone().unbind(), height, used: self.uses };
        if self.kept.len() < KEPT {
            self.kept.push(kept);
        } else if let Some(oldest) = self.kept.iter_mut().min_by_key(|kept| kept.used) {
            *oldest = kept;
        }
    }
}
