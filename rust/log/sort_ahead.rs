//! `decode_records`' sorting of records (`record_scan::sort`) on a second thread, ahead of the
//! loop that builds Python objects.
//!
//! Sorting a record (the strict scan of a plain record's `data`, the UTF-8 check of a message
//! record) touches no Python object, so it needs no GIL; building each message's `Message` does.
//! On a log of thousands of records a scoped thread sorts them chunk by chunk, in order, while the
//! calling thread, holding the GIL, builds the messages and writes the columns: the scan's time
//! overlaps the message building instead of adding to it. The calling thread never waits for it:
//! a chunk not sorted yet when it is needed is sorted there and then (and the thread skips past
//! it), so on a machine whose other core is busy the decode costs what it did on one thread, but
//! for the scope's join at the end (the chunk in flight, or a thread the scheduler has not run).
//! The verdicts are the same function of the same bytes either way (a sealed record's text is its
//! body and `}`, joined as the blob holds it), so nothing is decided differently on either path.
//! The thread and its chunks are generic over the work (`AheadWork`): the original harness's
//! records are read the same way (`original/read_ahead.rs`).

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::json::read::tape::{Tape, TapeBuffers};
use crate::log::sort_ahead::core_clock::{caller_cpu_clock, CoreClock};
use crate::log::checksum::crc32c_of;
use crate::log::record_scan::{sort, Sorted};

/// What the sorting thread reads the calling thread's CPU time with.
#[cfg(target_os = "linux")]
type CallerClock = libc::clockid_t;
#[cfg(not(target_os = "linux"))]
type CallerClock = ();

/// Logs of fewer records sort inline: a thread costs tens of microseconds, about what sorting a
/// hundred records does, and a small log has no message building long enough to hide it behind.
const THREAD_FROM_RECORDS: usize = 1024;
/// Records per chunk: small enough that the loop finds its first chunk sorted at once and that
/// the scope's end waits for little, large enough that claiming a chunk costs nothing per record.
const CHUNK: usize = 128;
/// How many chunks ahead of the calling thread the sorting thread must be to tape message records.
const TAPE_LEAD: usize = 2;

/// The part of reading a log's records that needs no GIL, done a record at a time ahead of the
/// GIL thread: dshkit's sorting and taping (`SortWork`), the original's rewrite and taping
/// (`original/read_ahead.rs`).
pub(crate) trait AheadWork: Sync {
    /// What the work on a chunk of records leaves; handed back and filled again for later chunks.
    type Chunk: Default + Send;
    /// Empties `chunk` for the next records, its buffers kept.
    fn clear(chunk: &mut Self::Chunk);
    /// The work on record `index` pushed onto `chunk`; message records taped when `taping`.
    fn work(&self, chunk: &mut Self::Chunk, index: usize, taping: bool);
}

/// The chunks of work: `next`, the first chunk the thread ahead has not claimed; `chunks[k]`,
/// the work on records `k * CHUNK..`, set by that thread and taken by the calling one, which
/// hands each back to `spare` once past it, for the thread ahead to fill again (tapes in memory
/// already touched, and no buffer freed on the other thread).
struct Ahead<'w, W: AheadWork> {
    work: &'w W,
    records: usize,
    next: AtomicUsize,
    chunks: Vec<Mutex<Option<W::Chunk>>>,
    spare: Mutex<Vec<W::Chunk>>,
    /// The chunk the calling thread is at, and how many chunks it has reached (0 before it
    /// reaches the first).
    at: AtomicUsize,
    reached: AtomicUsize,
}

impl<'w, W: AheadWork> Ahead<'w, W> {
    fn new(work: &'w W, records: usize) -> Self {
        let chunks = (0..records.div_ceil(CHUNK)).map(|_| Mutex::new(None)).collect();
        Ahead { work, records, next: AtomicUsize::new(0), chunks, spare: Mutex::new(Vec::new()), at: AtomicUsize::new(0), reached: AtomicUsize::new(0) }
    }

    /// The work on `chunk`; `None` when the calling thread is done, or has reached the chunk
    /// (it then works on it itself, and the work here would be thrown away).
    fn worked_chunk(&self, chunk: usize, taping: bool) -> Option<W::Chunk> {
        let first = chunk * CHUNK;
        let mut worked = lock(&self.spare).pop().unwrap_or_default();
        W::clear(&mut worked);
        for index in first..(first + CHUNK).min(self.records) {
            // Checked a record at a time: when the calling thread is done, the scope's end waits
            // for one record at most; when it reached this chunk, no more is thrown away.
            if self.next.load(Ordering::Relaxed) >= self.chunks.len() || self.reached.load(Ordering::Relaxed) > chunk {
                lock(&self.spare).push(worked);
                return None;
            }
            self.work.work(&mut worked, index, taping);
        }
        Some(worked)
    }

    /// The thread ahead: every chunk in order, until the calling thread has passed them all.
    fn work_ahead(&self, caller_clock: Option<CallerClock>) {
        let clock = CoreClock::start(caller_clock);
        loop {
            let chunk = self.next.fetch_add(1, Ordering::Relaxed);
            if chunk >= self.chunks.len() {
                return;
            }
            // Taping costs more instructions than it saves the calling thread (about 6,000
            // against 3,800 a message record): a gain only on a core of its own, ahead of that
            // thread. A thread kept behind, or sharing a core with the calling thread (a busy
            // machine), does the rest of the work only, as before the tapes.
            let taping = clock.had_a_core() && chunk >= self.at.load(Ordering::Relaxed) + TAPE_LEAD;
            // A chunk the calling thread reached first is skipped: the next claim is past it.
            let Some(worked) = self.worked_chunk(chunk, taping) else { continue };
            *lock(&self.chunks[chunk]) = Some(worked);
        }
    }
}

/// The work on a log's records, in order: done ahead by a thread, or (`None`) left to the caller.
pub(crate) struct AheadRecords<'a, 'w, W: AheadWork> {
    ahead: Option<&'a Ahead<'w, W>>,
    /// The chunk being consumed, and its work when it was taken from `ahead` (`None`: the caller
    /// does that chunk's work itself).
    current: Option<(usize, Option<W::Chunk>)>,
}

impl<W: AheadWork> AheadRecords<'_, '_, W> {
    /// The chunk holding the work on record `index` and the record's place in it, when it was
    /// done ahead; else `None`, and the caller does that work itself (the thread then skips the
    /// chunk, and work on it the thread still finishes is left unused). Called for each record in
    /// order (again for the same record costs nothing).
    pub(crate) fn worked(&mut self, index: usize) -> Option<(&W::Chunk, usize)> {
        let ahead = self.ahead?;
        let chunk = index / CHUNK;
        // Once per chunk, not per record: the thread ahead reads `at`, `reached` and `next` at
        // every record it works on, so each write here moves their cache line between the cores.
        if self.current.as_ref().is_none_or(|(current, _)| *current != chunk) {
            ahead.at.store(chunk, Ordering::Relaxed);
            ahead.reached.store(chunk + 1, Ordering::Relaxed);
            let taken = lock(&ahead.chunks[chunk]).take();
            if taken.is_none() {
                // Not done yet: the caller works on this chunk, and the thread starts past it.
                ahead.next.fetch_max(chunk + 1, Ordering::Relaxed);
            }
            if let Some((_, Some(done))) = std::mem::replace(&mut self.current, Some((chunk, taken))) {
                lock(&ahead.spare).push(done);
            }
        }
        match &self.current {
            Some((_, Some(worked))) => Some((worked, index % CHUNK)),
            _ => None,
        }
    }
}

/// Run `consume` with the work on `records` records, done on a scoped thread ahead of it when
/// there are at least `THREAD_FROM_RECORDS`.
pub(crate) fn with_work_ahead<W: AheadWork, R>(work: &W, records: usize, consume: impl FnOnce(&mut AheadRecords<'_, '_, W>) -> R) -> R {
    if records < THREAD_FROM_RECORDS {
        return consume(&mut AheadRecords { ahead: None, current: None });
    }
    let ahead = Ahead::new(work, records);
    std::thread::scope(|scope| {
        // A thread that cannot be started (a process at its limit) leaves every chunk to this one.
        let (caller_clock, ahead) = (caller_cpu_clock(), &ahead);
        let _ = std::thread::Builder::new().spawn_scoped(scope, move || ahead.work_ahead(caller_clock));
        let result = consume(&mut AheadRecords { ahead: Some(ahead), current: None });
        // Done (or stopped by an error): the thread claims no further chunk.
        ahead.next.store(ahead.chunks.len(), Ordering::Relaxed);
        result
    })
}

/// dshkit's records checked against the checksums left to check (`unchecked`, one per record, or
/// none), sorted (`record_scan::sort`) and their message records taped.
struct SortWork<'t> {
    texts: &'t [[&'t [u8]; 2]],
    unchecked: &'t [u32],
}

impl SortWork<'_> {
    /// Whether record `index`, whose whole text is `text`, has the checksum left to check.
    fn holds(&self, text: &[u8], index: usize) -> bool {
        self.unchecked.get(index).is_none_or(|&crc| crc32c_of(text) == crc)
    }
}

/// The verdicts on a chunk of records, and the tapes (`json/read/tape.rs`) of its message records
/// that the tokenizer took: what the GIL thread would otherwise parse, read ahead.
#[derive(Default)]
struct SortedChunk {
    /// Each record's verdict, `None` for a record whose text does not have its checksum.
    sorted: Vec<Option<Sorted>>,
    /// For each record, the range of its tape's tokens in `tapes` (empty: no tape).
    tape_ranges: Vec<Range<usize>>,
    tapes: TapeBuffers,
    /// A sealed record's body and tail joined.
    joined: Vec<u8>,
}

impl AheadWork for SortWork<'_> {
    type Chunk = SortedChunk;

    fn clear(chunk: &mut SortedChunk) {
        chunk.sorted.clear();
        chunk.tape_ranges.clear();
        chunk.tapes.clear();
    }

    fn work(&self, chunk: &mut SortedChunk, index: usize, taping: bool) {
        let [body, tail] = self.texts[index];
        let text = if tail.is_empty() {
            body
        } else {
            chunk.joined.clear();
            chunk.joined.extend_from_slice(body);
            chunk.joined.extend_from_slice(tail);
            &chunk.joined[..]
        };
        let verdict = self.holds(text, index).then(|| sort(text, index));
        let tape = match verdict {
            // SAFETY: `sort` sorts only UTF-8 text as a message record.
            Some(Sorted::Message(_)) if taping => chunk.tapes.tokenize(unsafe { std::str::from_utf8_unchecked(text) }),
            _ => None,
        };
        chunk.sorted.push(verdict);
        chunk.tape_ranges.push(tape.unwrap_or(0..0));
    }
}

/// The verdicts of a log's records, in seq order: sorted ahead by a thread, or inline.
pub(crate) struct SortedRecords<'r, 'a, 'w, 't> {
    records: &'r mut AheadRecords<'a, 'w, SortWork<'t>>,
    work: &'r SortWork<'t>,
}

impl SortedRecords<'_, '_, '_, '_> {
    /// The verdict on record `seq` when it was sorted ahead (`None` inside: its checksum failed),
    /// else `None`; `next` then answers for it as before. Called in seq order, before `next`.
    pub(crate) fn verdict_ahead(&mut self, seq: usize) -> Option<Option<Sorted>> {
        self.records.worked(seq).map(|(sorted, at)| sorted.sorted[at])
    }

    /// The verdict on record `seq`, whose text is `text`, with the tape of a message record when
    /// it was read ahead (never when sorted here: the GIL thread then parses the text as before);
    /// `None` when the text does not have the checksum left to check. Called at most once per
    /// record, in seq order (after `verdict_ahead`, for a record the caller did not settle with it).
    pub(crate) fn next(&mut self, text: &[u8], seq: usize) -> Option<(Sorted, Option<Tape<'_>>)> {
        match self.records.worked(seq) {
            Some((sorted, at)) => {
                let range = sorted.tape_ranges[at].clone();
                Some((sorted.sorted[at]?, (!range.is_empty()).then(|| sorted.tapes.tape(range))))
            }
            None => self.work.holds(text, seq).then(|| (sort(text, seq), None)),
        }
    }
}

/// Whether the two threads run side by side (`CoreClock`), from Linux's per-thread CPU clocks;
/// elsewhere the answer is always yes.
#[cfg(target_os = "linux")]
mod core_clock {
    /// Whether the two threads of a decode have run side by side since the sorting thread started:
    /// the CPU time of both against twice the wall clock. On one shared core they take turns, and
    /// their CPU times add up to the wall clock at most (a share of 0.5); with a third task on the
    /// two cores, to about 0.67. Counted from the start, not per chunk: a chunk is shorter than a
    /// scheduler's time slice, so a thread sharing a core runs most chunks whole and waits between them.
    pub(super) struct CoreClock {
        wall: std::time::Instant,
        /// The CPU clock of the calling thread, and both threads' CPU times at the start.
        start: Option<(libc::clockid_t, u64, u64)>,
    }

    impl CoreClock {
        /// The share of two cores below which the threads are taken to have shared one.
        const PARALLEL: f64 = 0.8;
        /// Windows shorter than this say nothing yet (the first chunks are behind the calling thread anyway).
        const MIN_NANOS: f64 = 100_000.0;

        /// Started on the sorting thread, with the calling thread's CPU clock (`caller_clock`).
        pub(super) fn start(caller_clock: Option<libc::clockid_t>) -> Self {
            let start = caller_clock.and_then(|clock| Some((clock, cpu_nanos(clock)?, cpu_nanos(libc::CLOCK_THREAD_CPUTIME_ID)?)));
            CoreClock { wall: std::time::Instant::now(), start }
        }

        pub(super) fn had_a_core(&self) -> bool {
            let Some((caller_clock, caller_start, own_start)) = self.start else { return true };
            let elapsed = self.wall.elapsed().as_nanos() as f64;
            let (Some(caller), Some(own)) = (cpu_nanos(caller_clock), cpu_nanos(libc::CLOCK_THREAD_CPUTIME_ID)) else { return true };
            let ran = caller.saturating_sub(caller_start) + own.saturating_sub(own_start);
            elapsed >= Self::MIN_NANOS && ran as f64 >= Self::PARALLEL * 2.0 * elapsed
        }
    }

    /// The calling thread's CPU clock, for the sorting thread to read (Linux only).
    pub(super) fn caller_cpu_clock() -> Option<libc::clockid_t> {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: writes the one clock id it is given, for this thread, which outlives the scope.
        (unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0).then_some(clock)
    }

    /// A CPU clock's time in nanoseconds.
    fn cpu_nanos(clock: libc::clockid_t) -> Option<u64> {
        let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: writes the one timespec it is given.
        (unsafe { libc::clock_gettime(clock, &mut time) } == 0).then(|| time.tv_sec as u64 * 1_000_000_000 + time.tv_nsec as u64)
    }
}

#[cfg(not(target_os = "linux"))]
mod core_clock {
    pub(super) struct CoreClock;

    impl CoreClock {
        pub(super) fn start(_caller_clock: Option<()>) -> Self {
            CoreClock
        }

        pub(super) fn had_a_core(&self) -> bool {
            true
        }
    }

    pub(super) fn caller_cpu_clock() -> Option<()> {
        None
    }
}

/// A lock that a panic on the other thread (none is expected) does not poison for this one.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Run `consume` with the verdicts on `texts` (each record as its parts, joined), each checked
/// first against its checksum in `unchecked` (one per record, or none); sorted on a scoped thread
/// when there are at least `THREAD_FROM_RECORDS` records.
pub(crate) fn with_sorted_records<R>(
    texts: &[[&[u8]; 2]],
    unchecked: &[u32],
    consume: impl FnOnce(&mut SortedRecords<'_, '_, '_, '_>) -> R,
) -> R {
    let work = SortWork { texts, unchecked };
    with_work_ahead(&work, texts.len(), |records| consume(&mut SortedRecords { records, work: &work }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(count: usize) -> Vec<Vec<u8>> {
        (0..count)
            .map(|seq| match seq % 4 {
                0 => format!(r#"{{"seq":{seq},"time":7,"type":"turn/start","data":{{"turn":1}}"#).into_bytes(),
                1 => format!(r#"{{"seq":{seq},"time":7,"type":"user/message","data":{{}}"#).into_bytes(),
                2 => format!(r#"{{"seq":{},"time":7,"type":"step/start","data":{{"turn":1,"step":1}}"#, seq + 1).into_bytes(),
                _ => b"{\"seq\":".to_vec(),
            })
            .collect()
    }

    #[test]
    fn the_verdicts_ahead_are_those_inline_in_order() {
        for count in [0, 5, THREAD_FROM_RECORDS - 1, THREAD_FROM_RECORDS, THREAD_FROM_RECORDS + CHUNK + 3] {
            let bodies = records(count);
            // Sealed form: the body without its closing brace, the brace as the tail.
            let texts: Vec<[&[u8]; 2]> = bodies.iter().map(|body| [&body[..], &b"}"[..]]).collect();
            let whole: Vec<Vec<u8>> = bodies.iter().map(|body| [&body[..], b"}"].concat()).collect();
            let got = with_sorted_records(&texts, &[], |sorted| {
                (0..count).map(|seq| sorted.next(&whole[seq], seq).expect("no checksum to fail").0).collect::<Vec<_>>()
            });
            let want: Vec<Sorted> = (0..count).map(|seq| sort(&whole[seq], seq)).collect();
            assert_eq!(got, want, "{count} records");
            if count > 4 {
                assert!(matches!(want[0], Sorted::Plain(..)) && matches!(want[1], Sorted::Message(..)));
                assert_eq!((&want[2], &want[3]), (&Sorted::Other, &Sorted::Other));
            }
        }
    }

    #[test]
    fn a_chunk_sorted_ahead_holds_the_tapes_of_its_message_records() {
        let bodies = records(2 * CHUNK + 8);
        let texts: Vec<[&[u8]; 2]> = bodies.iter().map(|body| [&body[..], &b"}"[..]]).collect();
        let work = SortWork { texts: &texts, unchecked: &[] };
        let ahead = Ahead::new(&work, texts.len());
        for chunk in [0, 1] {
            let sorted = ahead.worked_chunk(chunk, true).expect("not stopped");
            let taped: Vec<bool> = sorted.tape_ranges.iter().map(|range| !range.is_empty()).collect();
            let messages: Vec<bool> = sorted.sorted.iter().map(|verdict| matches!(verdict, Some(Sorted::Message(_)))).collect();
            assert_eq!(taped, messages);
            assert!(messages.iter().any(|&message| message));
            // A chunk handed back is filled again from empty.
            lock(&ahead.spare).push(sorted);
        }
        // Behind the calling thread: verdicts only, no tapes.
        let sorted = ahead.worked_chunk(0, false).expect("not stopped");
        assert!(sorted.tape_ranges.iter().all(|range| range.is_empty()) && sorted.sorted.len() == CHUNK);
        // The calling thread at the chunk (it reads it itself): the chunk in flight is handed back.
        let spare = lock(&ahead.spare).len();
        ahead.reached.store(2, Ordering::Relaxed);
        assert!(ahead.worked_chunk(1, true).is_none() && ahead.worked_chunk(0, true).is_none());
        assert_eq!(lock(&ahead.spare).len(), spare + 1, "one buffer, handed back each time");
        assert!(ahead.worked_chunk(2, true).is_some(), "a chunk past it is read");
        // The calling thread done: the chunk in flight is dropped.
        ahead.next.store(ahead.chunks.len(), Ordering::Relaxed);
        assert!(ahead.worked_chunk(2, true).is_none());
    }

    #[test]
    fn a_loop_stopping_early_ends_the_thread() {
        let bodies = records(THREAD_FROM_RECORDS * 4);
        let texts: Vec<[&[u8]; 2]> = bodies.iter().map(|body| [&body[..], &b""[..]]).collect();
        let first = with_sorted_records(&texts, &[], |sorted| sorted.next(&[], 0).expect("no checksum to fail").0);
        assert_eq!(first, Sorted::Other); // unsealed and without its brace: not a whole record
    }
}
