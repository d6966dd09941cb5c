//! The checksum checks of a stored log's records (`split_records`, `verified_joined` in
//! `records.rs`), over two threads when the log is large.
//!
//! A log's lines are found first (`line_spans`, a `\n` search a block at a time); then each line
//! is checked on its own (`first_failure`: a CRC-32C and a comparison, no shared state), so runs
//! of lines are checked by two threads at once, and the first failing line overall is the first
//! failure of the first run that has one. The verdict and the line it names are those of
//! checking every line in order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::json::scan::find_byte;

/// Logs with fewer bytes than this are checked on the calling thread alone: starting a thread
/// costs tens of microseconds, about what checking 200 KB of lines does.
const TWO_THREADS_FROM_BYTES: usize = 1 << 20;
/// Runs of lines the two threads claim in turn.
const PIECES: usize = 32;

/// The lines of `bytes[start..end]` as spans without their `\n` (the last may lack one).
pub(crate) fn line_spans(bytes: &[u8], start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut at = start.min(end);
    while at < end {
        let line_end = find_byte(&bytes[at..end], b'\n').map_or(end, |i| at + i);
        spans.push((at, line_end));
        at = line_end + 1;
    }
    spans
}

/// The smallest `index < count` for which `passes(index)` is false, or `None`; on two threads
/// when the checks cover at least `TWO_THREADS_FROM_BYTES` bytes. The indices are cut into
/// `PIECES` runs that both threads claim in turn, so neither waits on the other for more than the
/// one run it is checking (a second core busy with other work leaves the first doing most runs).
pub(crate) fn first_failure(count: usize, bytes: usize, passes: impl Fn(usize) -> bool + Sync) -> Option<usize> {
    let in_order = |range: std::ops::Range<usize>| range.into_iter().find(|&index| !passes(index));
    if bytes < TWO_THREADS_FROM_BYTES || count < 2 {
        return in_order(0..count);
    }
    let size = count.div_ceil(PIECES);
    let pieces = count.div_ceil(size);
    let next = AtomicUsize::new(0);
    let found: Vec<OnceLock<Option<usize>>> = (0..pieces).map(|_| OnceLock::new()).collect();
    let piece_range = |piece: usize| piece * size..((piece + 1) * size).min(count);
    let claim_runs = || loop {
        let piece = next.fetch_add(1, Ordering::Relaxed);
        if piece >= pieces {
            return;
        }
        let _ = found[piece].set(in_order(piece_range(piece)));
    };
    std::thread::scope(|scope| {
        // A thread that cannot be started (a process at its limit) leaves every run to this one.
        let _ = std::thread::Builder::new().spawn_scoped(scope, claim_runs);
        claim_runs();
    });
    // Every run was claimed and the scope joined the thread, so each is set; the first failure
    // is the first run's that has one.
    (0..pieces).find_map(|piece| *found[piece].get_or_init(|| in_order(piece_range(piece))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_the_spans_between_newlines() {
        assert_eq!(line_spans(b"ab\ncd\n", 0, 6), vec![(0, 2), (3, 5)]);
        assert_eq!(line_spans(b"ab\ncd", 0, 5), vec![(0, 2), (3, 5)]);
        assert_eq!(line_spans(b"ab\n\ncd", 0, 6), vec![(0, 2), (3, 3), (4, 6)]);
        assert_eq!(line_spans(b"xab\ncd\n", 1, 4), vec![(1, 3)]);
        assert_eq!(line_spans(b"ab", 2, 2), vec![]);
        assert_eq!(line_spans(b"ab", 5, 2), vec![]);
    }

    #[test]
    fn the_first_failure_is_found_in_any_run() {
        for count in [0, 1, 2, 3, 10, 1001] {
            for bytes in [0, TWO_THREADS_FROM_BYTES] {
                assert_eq!(first_failure(count, bytes, |_| true), None);
                for bad in 0..count {
                    assert_eq!(first_failure(count, bytes, |index| index != bad), Some(bad), "{count} {bytes} {bad}");
                    // A failure in the last run too: the first overall.
                    let passes = |index: usize| index != bad && index != count - 1;
                    assert_eq!(first_failure(count, bytes, passes), Some(bad), "{count} {bytes} {bad}");
                }
            }
        }
    }
}
