//! The session log's accelerator (the `session` layer): records and their checksums (`checksum`,
//! `stored_records`), their decoding into columns (`records`), the strict scan of plain records on open (`record_scan`, `record_scanner`), the
//! one table of plain event types (`plain_rules`), message records read in one pass
//! (`message_record`, or from a tape read ahead without the GIL: `message_tape`), appends vouched for natively (`plain_vouch`, `message_vouch`), the fold of
//! vouched appends (`surface_fold`), the event columns (`event_columns`) and untracked `Event`s
//! (`event_record`). Uses every folder below it; none uses it.

pub(crate) mod checksum;
pub(crate) mod event_columns;
pub(crate) mod event_record;
pub(crate) mod message_record;
pub(crate) mod message_tape;
pub(crate) mod message_vouch;
pub(crate) mod plain_rules;
pub(crate) mod plain_vouch;
pub(crate) mod record_scan;
#[cfg(test)]
pub(crate) mod record_scan_reference;
pub(crate) mod record_scanner;
pub(crate) mod records;
pub(crate) mod sort_ahead;
pub(crate) mod stored_records;
pub(crate) mod surface_fold;

use pyo3::prelude::*;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    checksum::register(m)?;
    stored_records::register(m)?;
    records::register(m)?;
    event_columns::register(m)?;
    event_record::register(m)?;
    message_tape::register(m)?;
    message_vouch::register(m)?;
    plain_rules::register(m)?;
    plain_vouch::register(m)?;
    surface_fold::register(m)
}
