//! Monotonic ULIDs: 48-bit millisecond time + 80 random bits, Crockford base32, 26 characters.
//!
//! One process-wide state holds the last id minted. A new millisecond draws fresh randomness;
//! within the same millisecond, or when the clock steps back, the previous id is incremented, so
//! ids are strictly increasing as strings across all threads. An increment that overflows the
//! random part carries into the time part (the id runs slightly ahead of the clock until the
//! clock catches up).
//!
//! A forked child forgets the last id, so that parent and child never both mint "last + 1": the
//! reset is a `pthread_atfork` handler, so it also runs for forks that bypass Python's
//! `os.register_at_fork` (ctypes `libc.fork`, C extensions).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyString};

use crate::value::walk::type_name;

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const RANDOM_BITS: u32 = 80;
const RANDOM_MASK: u128 = (1u128 << RANDOM_BITS) - 1;
const MAX_TIMESTAMP: u64 = (1u64 << 48) - 1;
pub(crate) const ULID_LEN: usize = 26;

/// The last id minted by this process (0: none yet, or reset after fork), behind a spin lock
/// rather than a `Mutex`: the fork handlers hold it across `fork()` (so that no thread is
/// half-way through minting when the child's copy is taken) and release it on both sides, which
/// a `Mutex` guard cannot do. The lock is held for a few arithmetic steps (and one `getrandom`
/// per new millisecond).
struct LastId {
    locked: AtomicBool,
    value: UnsafeCell<u128>,
}

// SAFETY: `value` is only touched while `locked` is held.
unsafe impl Sync for LastId {}

static LAST_ID: LastId = LastId { locked: AtomicBool::new(false), value: UnsafeCell::new(0) };

impl LastId {
    fn lock(&self) {
        let mut spins = 0u32;
        while self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }

    /// Run `update` on the last id with the lock held (released even if `update` panics).
    fn update<T>(&self, update: impl FnOnce(&mut u128) -> T) -> T {
        struct Release<'a>(&'a LastId);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.unlock();
            }
        }
        self.lock();
        let _release = Release(self);
        // SAFETY: the lock is held until `_release` drops.
        update(unsafe { &mut *self.value.get() })
    }
}

extern "C" fn before_fork() {
    LAST_ID.lock();
}

extern "C" fn after_fork_in_parent() {
    LAST_ID.unlock();
}

extern "C" fn after_fork_in_child() {
    // SAFETY: the lock was taken by `before_fork` in the thread that forked, the only thread
    // the child has.
    unsafe { *LAST_ID.value.get() = 0 };
    LAST_ID.unlock();
}

/// Install the fork handlers, once per process.
fn reset_in_forked_children() -> PyResult<()> {
    #[cfg(unix)]
    {
        static INSTALLED: std::sync::OnceLock<libc::c_int> = std::sync::OnceLock::new();
        let status = *INSTALLED.get_or_init(|| unsafe {
            libc::pthread_atfork(Some(before_fork), Some(after_fork_in_parent), Some(after_fork_in_child))
        });
        if status != 0 {
            return Err(pyo3::exceptions::PyOSError::new_err(format!(
                "pthread_atfork failed (error {status}): ids would repeat in forked children"
            )));
        }
    }
    Ok(())
}

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
    LAST_ID.update(|last| {
        let id = next_id(*last, now_ms(), random_bits)?;
        *last = id;
        Some(id)
    })
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

/// Forget the last id, so that the next one draws fresh randomness. The fork handlers do this
/// in every forked child already; kept for `os.register_at_fork` callers of earlier versions.
#[pyfunction]
fn _reset_ids_after_fork() {
    LAST_ID.update(|last| *last = 0);
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    reset_in_forked_children()?;
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

    /// The fork handlers hold the lock across fork(): a child forked while another thread is
    /// minting can mint at once (a lock copied in its held state would hang it) and does not
    /// continue the parent's sequence. Native threads here: a Python thread would hold the GIL,
    /// which a raw fork's child cannot take back whatever the core does.
    #[cfg(unix)]
    #[test]
    fn a_child_forked_while_another_thread_mints_mints_at_once_and_fresh() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        use std::time::{Duration, Instant};

        reset_in_forked_children().expect("pthread_atfork");
        let stop = Arc::new(AtomicBool::new(false));
        let minter = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut ids = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    ids.push(mint().expect("id"));
                }
                ids
            })
        };
        let mut child_ids = Vec::new();
        for _ in 0..100 {
            let mut fds = [0; 2];
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let id = mint().unwrap_or(0).to_le_bytes();
                unsafe {
                    libc::write(fds[1], id.as_ptr().cast(), id.len());
                    libc::_exit(0);
                }
            }
            assert!(pid > 0, "fork failed");
            unsafe { libc::close(fds[1]) };
            let started = Instant::now();
            let mut status = 0;
            while unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } != pid {
                if started.elapsed() > Duration::from_secs(20) {
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                        libc::waitpid(pid, &mut status, 0);
                    }
                    panic!("a child forked while another thread minted hung");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            let mut id = [0u8; 16];
            let read = unsafe { libc::read(fds[0], id.as_mut_ptr().cast(), id.len()) };
            unsafe { libc::close(fds[0]) };
            assert_eq!(read, 16);
            child_ids.push(u128::from_le_bytes(id));
        }
        stop.store(true, Ordering::Relaxed);
        let parent_ids: std::collections::HashSet<u128> = minter.join().expect("minter").into_iter().collect();
        assert!(!parent_ids.is_empty());
        assert!(child_ids.iter().all(|id| *id != 0 && !parent_ids.contains(id)));
    }
}
