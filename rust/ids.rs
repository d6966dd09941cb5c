//! Monotonic ULIDs: 48-bit millisecond time + 80 random bits, Crockford base32, 26 characters.
//!
//! One process-wide state holds the last id minted. A new millisecond draws fresh randomness;
//! within the same millisecond, or when the clock steps back, the previous id is incremented, so
//! ids are strictly increasing as strings across all threads. An increment that overflows the
//! random part carries into the time part (the id runs slightly ahead of the clock until the
//! clock catches up). The Python package resets the state in a forked child.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyString};

use crate::walk::type_name;

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const RANDOM_BITS: u32 = 80;
const RANDOM_MASK: u128 = (1u128 << RANDOM_BITS) - 1;
const MAX_TIMESTAMP: u64 = (1u64 << 48) - 1;
pub(crate) const ULID_LEN: usize = 26;

/// The last id minted by this process (0: none yet, or reset after fork).
static LAST_ID: Mutex<u128> = Mutex::new(0);

/// The id that follows `last` at time `now_ms`; `None` once the 128-bit space is exhausted.
pub(crate) fn next_id(last: u128, now_ms: u64, fresh_random: impl FnOnce() -> u128) -> Option<u128> {
    let last_ms = (last >> RANDOM_BITS) as u64;
    if now_ms > last_ms && now_ms <= MAX_TIMESTAMP {
        Some(((now_ms as u128) << RANDOM_BITS) | (fresh_random() & RANDOM_MASK))
    } else {
        last.checked_add(1)
    }
}

/// Crockford base32 of a 128-bit value: the first character holds the top 3 bits.
pub(crate) fn encode(value: u128) -> [u8; ULID_LEN] {
    let mut out = [0u8; ULID_LEN];
    for (i, slot) in out.iter_mut().enumerate() {
        let shift = 5 * (ULID_LEN - 1 - i);
        *slot = CROCKFORD[((value >> shift) & 0x1f) as usize];
    }
    out
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn random_bits() -> u128 {
    let mut bytes = [0u8; 16];
    // The OS random source does not fail on supported platforms once the process is running;
    // if it ever did, minting a predictable id would be worse than a loud panic.
    getrandom::fill(&mut bytes).expect("operating system random source failed");
    u128::from_le_bytes(bytes)
}

pub(crate) fn mint() -> Option<u128> {
    let mut last = LAST_ID.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let id = next_id(*last, now_ms(), random_bits)?;
    *last = id;
    Some(id)
}

/// A new message id: a monotonic ULID string.
#[pyfunction]
pub(crate) fn new_message_id(py: Python<'_>) -> PyResult<Bound<'_, PyString>> {
    let id = mint().ok_or_else(|| PyOverflowError::new_err("ULID space exhausted"))?;
    let text = encode(id);
    // SAFETY: the Crockford alphabet is ASCII.
    Ok(PyString::new(py, unsafe { std::str::from_utf8_unchecked(&text) }))
}

/// The 26-character ULID text (Crockford base32) of a 128-bit value: what `new_message_id`
/// mints, for ids derived from other data (crash repair's deterministic closer ids).
#[pyfunction]
#[pyo3(signature = (value, /))]
fn encode_ulid<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
    let py = value.py();
    if !value.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!("encode_ulid: value must be an int, not {}", type_name(value))));
    }
    let value: u128 = value
        .extract()
        .map_err(|_| PyValueError::new_err(format!("encode_ulid: value {value} is outside 0 .. 2**128 - 1")))?;
    let text = encode(value);
    // SAFETY: the Crockford alphabet is ASCII.
    Ok(PyString::new(py, unsafe { std::str::from_utf8_unchecked(&text) }))
}

/// Forget the last id (called in a forked child so that parent and child never continue the
/// same sequence: the child's next id draws fresh randomness).
#[pyfunction]
fn _reset_ids_after_fork() {
    *LAST_ID.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = 0;
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(new_message_id, m)?)?;
    m.add_function(wrap_pyfunction!(_reset_ids_after_fork, m)?)?;
    m.add_function(wrap_pyfunction!(encode_ulid, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_zero_and_max() {
        assert_eq!(&encode(0), b"00000000000000000000000000");
        assert_eq!(&encode(u128::MAX), b"7ZZZZZZZZZZZZZZZZZZZZZZZZZ");
    }

    #[test]
    fn encoding_preserves_order() {
        let values = [0u128, 1, 31, 32, 1 << 80, (1 << 80) + 1, u128::MAX - 1, u128::MAX];
        for pair in values.windows(2) {
            assert!(encode(pair[0]) < encode(pair[1]));
        }
    }

    #[test]
    fn new_millisecond_takes_fresh_randomness() {
        let last = (5u128 << 80) | 7;
        assert_eq!(next_id(last, 6, || 42), Some((6u128 << 80) | 42));
    }

    #[test]
    fn same_millisecond_increments() {
        let last = (5u128 << 80) | 7;
        assert_eq!(next_id(last, 5, || unreachable!()), Some(last + 1));
    }

    #[test]
    fn clock_stepping_back_still_increments() {
        let last = (5u128 << 80) | 7;
        assert_eq!(next_id(last, 3, || unreachable!()), Some(last + 1));
    }

    #[test]
    fn random_overflow_advances_time_part() {
        let last = (5u128 << 80) | RANDOM_MASK;
        assert_eq!(next_id(last, 5, || unreachable!()), Some(6u128 << 80));
    }

    #[test]
    fn exhausted_space_is_reported() {
        assert_eq!(next_id(u128::MAX, 1, || 0), None);
    }

    #[test]
    fn time_part_is_the_millisecond() {
        let id = next_id(0, 1_700_000_000_000, || u128::MAX).unwrap();
        assert_eq!((id >> 80) as u64, 1_700_000_000_000);
        assert_eq!(id & RANDOM_MASK, RANDOM_MASK);
    }
}
