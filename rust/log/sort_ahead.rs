//! `decode_records`' sorting of records (`record_scan::sort`) on a second thread, ahead of the
//! loop that builds Python objects.
//!
//! Sorting a record (the strict scan of a plain record's `data`, the UTF-8 check of a message
//! record) touches no Python object, so it needs no GIL; building each message's `Message` does.
//! On a log of thousands of records a scoped thread sorts them in order and hands the verdicts over
//! in chunks, while the calling thread, holding the GIL, builds the messages and writes the columns:
//! the scan's time overlaps the message building instead of adding to it. The verdicts are the
//! same function of the same bytes either way (a sealed record's text is its body and `}`, copied
//! contiguously as the blob holds it), so nothing is decided differently on either path.

use std::sync::mpsc::{channel, Receiver};

use crate::log::record_scan::{sort, Sorted};

/// Logs of fewer records sort inline: a thread costs tens of microseconds, about what sorting a
/// hundred records does, and a small log has no message building long enough to hide it behind.
const THREAD_FROM_RECORDS: usize = 1024;
/// Verdicts per hand-over: small enough that the loop starts at once, large enough that the
/// channel's cost per record is nothing.
const CHUNK: usize = 128;

/// The verdicts of a log's records, in seq order: sorted ahead by a thread, or inline.
pub(crate) struct SortedRecords {
    ahead: Option<Receiver<Vec<Sorted>>>,
    chunk: std::vec::IntoIter<Sorted>,
}

impl SortedRecords {
    /// The verdict on record `seq`, whose text is `text`. Called once per record, in seq order.
    pub(crate) fn next(&mut self, text: &[u8], seq: usize) -> Sorted {
        let Some(ahead) = &self.ahead else { return sort(text, seq) };
        loop {
            if let Some(sorted) = self.chunk.next() {
                return sorted;
            }
            match ahead.recv() {
                Ok(chunk) => self.chunk = chunk.into_iter(),
                // The thread is gone (it panicked; the scope re-raises that at its end): sort here.
                Err(_) => {
                    self.ahead = None;
                    return sort(text, seq);
                }
            }
        }
    }
}

/// Run `consume` with the verdicts on `texts` (each record as its parts, joined); sorted on a
/// scoped thread when there are at least `THREAD_FROM_RECORDS` records.
pub(crate) fn with_sorted_records<R>(texts: &[[&[u8]; 2]], consume: impl FnOnce(&mut SortedRecords) -> R) -> R {
    if texts.len() < THREAD_FROM_RECORDS {
        return consume(&mut SortedRecords { ahead: None, chunk: Vec::new().into_iter() });
    }
    std::thread::scope(|scope| {
        let (sender, receiver) = channel();
        scope.spawn(move || {
            let mut joined = Vec::new();
            for (chunk_index, chunk) in texts.chunks(CHUNK).enumerate() {
                let first = chunk_index * CHUNK;
                let verdicts = chunk
                    .iter()
                    .enumerate()
                    .map(|(offset, [body, tail])| {
                        if tail.is_empty() {
                            return sort(body, first + offset);
                        }
                        joined.clear();
                        joined.extend_from_slice(body);
                        joined.extend_from_slice(tail);
                        sort(&joined, first + offset)
                    })
                    .collect();
                if sender.send(verdicts).is_err() {
                    return; // the loop stopped early (an error): nothing more is read
                }
            }
        });
        // Dropped before the scope joins, so a thread still sending after an error stops.
        let mut sorted = SortedRecords { ahead: Some(receiver), chunk: Vec::new().into_iter() };
        consume(&mut sorted)
    })
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
            let got = with_sorted_records(&texts, |sorted| {
                (0..count).map(|seq| sorted.next(&whole[seq], seq)).collect::<Vec<_>>()
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
    fn a_loop_stopping_early_ends_the_thread() {
        let bodies = records(THREAD_FROM_RECORDS * 4);
        let texts: Vec<[&[u8]; 2]> = bodies.iter().map(|body| [&body[..], &b""[..]]).collect();
        let first = with_sorted_records(&texts, |sorted| sorted.next(&[], 0));
        assert_eq!(first, Sorted::Other); // unsealed and without its brace: not a whole record
    }
}
