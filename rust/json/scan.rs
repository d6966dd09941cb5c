//! Finding the bytes a JSON string cannot hold as they are (`"`, `\\`, a control character), a
//! block of bytes at a time: shared by the writer (which copies a block and stops at the first
//! such byte to escape it) and the parser (which skips plain runs inside strings).
//!
//! On x86-64 a block is 16 bytes, tested with SSE2 (part of the x86-64 baseline, so no runtime
//! detection); elsewhere it is 8 bytes in a `u64`, tested with word arithmetic. Either way
//! `stops` gives a mask whose lowest set bit, through `first_stop`, is the index of the first
//! byte to stop at.
//!
//! The same blocks find one given byte (`find_byte`), and the same word arithmetic the end of a
//! run of digits (`digit_run_len`): a stored record's line end, and its `seq`, `time` and type.

/// The escape class of every byte: true for those a JSON string cannot hold as they are.
static STOPS: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        table[i] = true;
        i += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;
const SPACES: u64 = ONES * b' ' as u64;

/// The bytes of `word` to stop at, as the high bit of their lane: the classic "has a zero
/// byte" test, applied to each of the three. Lanes above the first flagged one may be flagged
/// wrongly (a borrow); the lowest set bit always marks the first byte to stop at.
#[inline(always)]
fn word_stops(word: u64) -> u64 {
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let quote = has_zero(word ^ (ONES * b'"' as u64));
    let backslash = has_zero(word ^ (ONES * b'\\' as u64));
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    quote | backslash | below_space
}

#[inline(always)]
pub(crate) fn read_word(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// The last 1 to 7 bytes of `text` from `at`, as a word padded with spaces (which need no
/// escape). Read with overlapping loads rather than copied into a padded buffer: a byte-wise
/// copy followed by a word load of the same memory stalls store-to-load forwarding, which cost
/// more than the rest of the string writer together.
#[inline(always)]
pub(crate) fn read_tail(text: &[u8], at: usize) -> u64 {
    let left = text.len() - at;
    assert!((1..8).contains(&left));
    // SAFETY: every read below is within `text[at..]`, which holds 1 to 7 bytes (checked above;
    // the check is all the compiler needs to drop the bounds checks of the reads).
    let word = unsafe {
        let from = text.as_ptr().add(at);
        if left >= 4 {
            let low = u32::from_le(std::ptr::read_unaligned(from as *const u32)) as u64;
            let high = u32::from_le(std::ptr::read_unaligned(from.add(left - 4) as *const u32)) as u64;
            low | (high << ((left - 4) * 8))
        } else {
            let middle = left / 2;
            *from as u64 | (*from.add(middle) as u64) << (middle * 8) | (*from.add(left - 1) as u64) << ((left - 1) * 8)
        }
    };
    word | SPACES & !((1u64 << (left * 8)) - 1)
}

#[cfg(target_arch = "x86_64")]
mod block {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
        _mm_set_epi64x, _mm_storeu_si128,
    };

    use super::{read_tail, read_word, SPACES};

    pub(crate) const BLOCK: usize = 16;
    pub(crate) type Block = __m128i;
    pub(crate) type Mask = u32;

    /// The 16 bytes of `text` from `at` (all in bounds).
    #[inline(always)]
    pub(crate) fn load(text: &[u8], at: usize) -> Block {
        let bytes = &text[at..at + BLOCK];
        // SAFETY: SSE2 is in the x86-64 baseline; the 16 bytes are in bounds (checked above).
        unsafe { _mm_loadu_si128(bytes.as_ptr() as *const __m128i) }
    }

    /// The last 1 to 15 bytes of `text` from `at`, padded with spaces.
    #[inline(always)]
    pub(crate) fn load_tail(text: &[u8], at: usize) -> Block {
        let left = text.len() - at;
        debug_assert!((1..BLOCK).contains(&left));
        let (low, high) = match left {
            9.. => (read_word(text, at), read_tail(text, at + 8)),
            8 => (read_word(text, at), SPACES),
            _ => (read_tail(text, at), SPACES),
        };
        // SAFETY: SSE2 is in the x86-64 baseline.
        unsafe { _mm_set_epi64x(high as i64, low as i64) }
    }

    /// Store the block at `to` (16 writable bytes).
    #[inline(always)]
    pub(crate) unsafe fn store(block: Block, to: *mut u8) {
        _mm_storeu_si128(to as *mut __m128i, block)
    }

    /// Bit `k` set when byte `k` of the block is one to stop at.
    #[inline(always)]
    pub(crate) fn stops(block: Block) -> Mask {
        // SAFETY: SSE2 is in the x86-64 baseline.
        unsafe {
            let quote = _mm_cmpeq_epi8(block, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(block, _mm_set1_epi8(b'\\' as i8));
            // Unsigned `byte <= 0x1f`: the byte is its own minimum with 0x1f.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(block, _mm_set1_epi8(0x1f)), block);
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as Mask
        }
    }

    /// Bit `k` set when byte `k` of the block is not ASCII (its high bit).
    #[inline(always)]
    pub(crate) fn non_ascii(block: Block) -> Mask {
        // SAFETY: SSE2 is in the x86-64 baseline.
        unsafe { _mm_movemask_epi8(block) as Mask }
    }

    /// Bit `k` set when byte `k` of the block is `byte`.
    #[inline(always)]
    pub(crate) fn equals(block: Block, byte: u8) -> Mask {
        // SAFETY: SSE2 is in the x86-64 baseline.
        unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(block, _mm_set1_epi8(byte as i8))) as Mask }
    }

    #[inline(always)]
    pub(crate) fn first_stop(mask: Mask) -> usize {
        mask.trailing_zeros() as usize
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod block {
    use super::{read_tail, read_word, word_stops};

    pub(crate) const BLOCK: usize = 8;
    pub(crate) type Block = u64;
    pub(crate) type Mask = u64;

    #[inline(always)]
    pub(crate) fn load(text: &[u8], at: usize) -> Block {
        read_word(text, at)
    }

    #[inline(always)]
    pub(crate) fn load_tail(text: &[u8], at: usize) -> Block {
        read_tail(text, at)
    }

    #[inline(always)]
    pub(crate) unsafe fn store(block: Block, to: *mut u8) {
        std::ptr::write_unaligned(to as *mut u64, block.to_le())
    }

    #[inline(always)]
    pub(crate) fn stops(block: Block) -> Mask {
        word_stops(block)
    }

    /// The high bit of each lane holding a byte that is not ASCII.
    #[inline(always)]
    pub(crate) fn non_ascii(block: Block) -> Mask {
        block & super::HIGHS
    }

    /// The high bit of each lane holding `byte` (exact up to the first such lane).
    #[inline(always)]
    pub(crate) fn equals(block: Block, byte: u8) -> Mask {
        let word = block ^ (super::ONES * byte as u64);
        word.wrapping_sub(super::ONES) & !word & super::HIGHS
    }

    #[inline(always)]
    pub(crate) fn first_stop(mask: Mask) -> usize {
        (mask.trailing_zeros() / 8) as usize
    }
}

pub(crate) use block::{equals, first_stop, load, load_tail, non_ascii, stops, store, Block, Mask, BLOCK};

/// The block of `text` from `at` (at least one byte left): its 16 bytes, or the last 1 to 15
/// padded with spaces.
#[inline(always)]
pub(crate) fn load_padded(text: &[u8], at: usize) -> Block {
    if text.len() - at >= BLOCK {
        load(text, at)
    } else {
        load_tail(text, at)
    }
}

/// Length of the leading run of `text` that a JSON string holds as it is (no `"`, `\\` or
/// control character): whole blocks, then words, then bytes.
#[inline(always)]
pub(crate) fn plain_run_len(text: &[u8]) -> usize {
    let mut i = 0;
    while i + BLOCK <= text.len() {
        let mask = stops(load(text, i));
        if mask != 0 {
            return i + first_stop(mask);
        }
        i += BLOCK;
    }
    plain_tail_len(text, i)
}

/// `plain_run_len` for the last bytes of `text` from `at` (fewer than a block).
#[inline(never)]
fn plain_tail_len(text: &[u8], mut at: usize) -> usize {
    while at + 8 <= text.len() {
        let mask = word_stops(read_word(text, at));
        if mask != 0 {
            return at + (mask.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while at < text.len() && !STOPS[text[at] as usize] {
        at += 1;
    }
    at
}

/// Offset of the first `byte` in `data`, a block at a time.
#[inline]
pub(crate) fn find_byte(data: &[u8], byte: u8) -> Option<usize> {
    let mut at = 0;
    while at + BLOCK <= data.len() {
        let mask = equals(load(data, at), byte);
        if mask != 0 {
            return Some(at + first_stop(mask));
        }
        at += BLOCK;
    }
    data[at..].iter().position(|&b| b == byte).map(|i| at + i)
}

/// Length of the run of ASCII digits `data` starts with, a word at a time.
#[inline]
pub(crate) fn digit_run_len(data: &[u8]) -> usize {
    let mut at = 0;
    while at + 8 <= data.len() {
        let word = read_word(data, at);
        // A digit is 0x30..=0x39: high nibble 3, and adding 6 leaves it 3. A lane that is not
        // a digit is non-zero here; a carry out of such a lane only reaches later lanes, so
        // the lowest non-zero lane is exactly the first byte that is not a digit.
        let high = (word & (ONES * 0xf0)) ^ (ONES * 0x30);
        let low = (word.wrapping_add(ONES * 0x06) & (ONES * 0xf0)) ^ (ONES * 0x30);
        let others = high | low;
        if others != 0 {
            return at + (others.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + data[at..].iter().take_while(|b| b.is_ascii_digit()).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_byte_and_digit_run_len_agree_with_a_byte_scan_at_every_lane() {
        for length in 0..40 {
            for lane in 0..length {
                for byte in 0..=255u8 {
                    let mut digits = vec![b'7'; length];
                    digits[lane] = byte;
                    let run = digits.iter().take_while(|b| b.is_ascii_digit()).count();
                    assert_eq!(digit_run_len(&digits), run, "{byte:#x} at {lane} of {length}");
                    let mut other = vec![b'x'; length];
                    other[lane] = byte;
                    let first = other.iter().position(|&b| b == byte);
                    assert_eq!(find_byte(&other, byte), first, "{byte:#x} at {lane} of {length}");
                    // After a lane that carries (0xfa..=0xff) or borrows (0x00), the result holds.
                    let mut two = vec![b'1'; length];
                    two[lane] = byte;
                    if lane + 1 < length {
                        two[lane + 1] = b'/';
                    }
                    let run = two.iter().take_while(|b| b.is_ascii_digit()).count();
                    assert_eq!(digit_run_len(&two), run, "{byte:#x} at {lane} of {length}");
                }
            }
            assert_eq!(digit_run_len(&vec![b'0'; length]), length);
            assert_eq!(find_byte(&vec![b'x'; length], b'"'), None);
        }
    }

    #[test]
    fn every_byte_to_stop_at_is_found_in_any_lane_of_a_word_or_a_block() {
        for length in 1..40 {
            for lane in 0..length {
                for byte in 0..=255u8 {
                    let mut bytes = vec![b'a'; length];
                    bytes[lane] = byte;
                    let expected = if STOPS[byte as usize] { lane } else { length };
                    assert_eq!(plain_run_len(&bytes), expected, "{byte:#x} at {lane} of {length}");
                }
            }
        }
    }

    fn word_needs_escape(word: u64) -> bool {
        word_stops(word) != 0
    }

    #[test]
    fn the_word_test_finds_every_byte_to_escape_in_any_lane() {
        for lane in 0..8 {
            for stop in [b'"', b'\\', 0x00, 0x1f] {
                let mut bytes = [b'a'; 8];
                bytes[lane] = stop;
                assert!(word_needs_escape(u64::from_le_bytes(bytes)), "{stop:#x} in lane {lane}");
                assert_eq!(plain_run_len(&bytes), lane);
            }
        }
        assert!(!word_needs_escape(u64::from_le_bytes(*b"plain ok")));
        assert!(!word_needs_escape(u64::from_le_bytes([0x20, 0x7f, 0x80, 0xff, b'!', b'#', b'[', b']'])));
        assert_eq!(plain_run_len(b"0123456789abcdefg"), 17);
    }

    #[test]
    fn the_tail_word_holds_the_last_bytes_padded_with_spaces() {
        let text = b"0123456789abcdef";
        for at in 9..text.len() {
            let mut expected = [b' '; 8];
            expected[..text.len() - at].copy_from_slice(&text[at..]);
            assert_eq!(read_tail(text, at), u64::from_le_bytes(expected), "from {at}");
        }
        for len in 1..8 {
            let text = &b"abcdefg"[..len];
            let mut expected = [b' '; 8];
            expected[..len].copy_from_slice(text);
            assert_eq!(read_tail(text, 0), u64::from_le_bytes(expected), "length {len}");
        }
    }

    #[test]
    fn a_tail_block_holds_the_last_bytes_padded_with_spaces() {
        let text: Vec<u8> = (0..40u8).map(|i| b'a' + i).collect();
        for at in 0..text.len() {
            let left = text.len() - at;
            if left >= BLOCK {
                continue;
            }
            let mut expected = [b' '; BLOCK];
            expected[..left].copy_from_slice(&text[at..]);
            let mut stored = [0u8; BLOCK];
            unsafe { store(load_tail(&text, at), stored.as_mut_ptr()) };
            assert_eq!(stored, expected, "from {at}");
            assert_eq!(stops(load_tail(&text, at)), 0);
        }
    }
}
