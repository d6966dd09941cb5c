//! The leaves of the JSON writer: strings (read from Python `str`s, escaped a block at a time
//! with `json::scan`) and floats (shortest round-trip text).

use pyo3::ffi;

use crate::json::scan::{first_stop, load, load_padded, stops, store, Block, BLOCK};
use crate::value::errors::PathError;
use crate::value::strs::{compact_ascii, utf8_of_str};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The letter after the backslash of each byte's escape (`u` for a `\u00XX` one), 0 for a byte
/// written as it is.
const ESCAPE_LETTER: [u8; 256] = {
    let mut letters = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        letters[byte] = b'u';
        byte += 1;
    }
    letters[b'"' as usize] = b'"';
    letters[b'\\' as usize] = b'\\';
    letters[b'\n' as usize] = b'n';
    letters[b'\r' as usize] = b'r';
    letters[b'\t' as usize] = b't';
    letters[0x08] = b'b';
    letters[0x0c] = b'f';
    letters
};

/// Write the escape sequence of `byte` at `to` (6 writable bytes); its length, 0 for a byte that
/// needs none (the portable `stops` may flag one after the first byte it stops at).
#[inline(always)]
unsafe fn write_escape(byte: u8, to: *mut u8) -> usize {
    let letter = ESCAPE_LETTER[byte as usize];
    if letter == 0 {
        return 0;
    }
    *to = b'\\';
    *to.add(1) = letter;
    if letter != b'u' {
        return 2;
    }
    *to.add(2) = b'0';
    *to.add(3) = b'0';
    *to.add(4) = HEX[(byte >> 4) as usize];
    *to.add(5) = HEX[(byte & 0xf) as usize];
    6
}

/// Write `text` as a JSON string. A string of at most one block with nothing to escape (most
/// keys and many values) is stored in one go, inline in the caller; the rest go through
/// `write_str_blocks`.
#[inline(always)]
pub(crate) fn write_str_bytes(out: &mut Vec<u8>, text: &[u8]) {
    if let Some(block) = short_plain_block(text) {
        write_quoted_blocks(out, &[block], text.len());
    } else if let Some((first, second)) = two_plain_blocks(text) {
        write_quoted_blocks(out, &[first, second], text.len());
    } else {
        write_str_blocks(out, text);
    }
}

/// A quote, the `blocks` (a text of `len` bytes, the last block padded), and the closing quote
/// over the padding: whole-block stores, no copy call.
#[inline(always)]
fn write_quoted_blocks(out: &mut Vec<u8>, blocks: &[Block], len: usize) {
    out.reserve(blocks.len() * BLOCK + 2);
    // SAFETY: room for the quote, the whole blocks and the closing quote was reserved.
    unsafe {
        let at = out.len();
        let base = out.as_mut_ptr().add(at);
        *base = b'"';
        for (i, &block) in blocks.iter().enumerate() {
            store(block, base.add(1 + i * BLOCK));
        }
        *base.add(1 + len) = b'"';
        out.set_len(at + len + 2);
    }
}

/// The text as two blocks (the second padded with spaces), when it is `BLOCK + 1` to `2 * BLOCK`
/// bytes with nothing to escape: ids, e-mail addresses, timestamps.
#[inline(always)]
fn two_plain_blocks(text: &[u8]) -> Option<(Block, Block)> {
    if text.len() <= BLOCK || text.len() > 2 * BLOCK {
        return None;
    }
    let first = load(text, 0);
    let second = load_padded(text, BLOCK);
    (stops(first) | stops(second) == 0).then_some((first, second))
}

/// The text as one block (padded with spaces), when it is 1 to `BLOCK` bytes with nothing to
/// escape.
#[inline(always)]
fn short_plain_block(text: &[u8]) -> Option<Block> {
    if text.len() > BLOCK || text.is_empty() {
        return None;
    }
    let block = load_padded(text, 0);
    (stops(block) == 0).then_some(block)
}

/// An object member's key given by pointer: `,` before it unless it is the first, the key as
/// a JSON string, then `:`. A short plain key (most keys) goes in one store.
#[inline(always)]
pub(crate) unsafe fn write_member_key(out: &mut Vec<u8>, key: *mut ffi::PyObject, first: bool) -> Result<(), PathError> {
    let Some(text) = str_utf8(key) else { return Err(lone_surrogate()) };
    let comma = !first as usize;
    if let Some(block) = short_plain_block(text) {
        out.reserve(BLOCK + 4);
        // SAFETY: room for `,"`, a whole block and `":` was reserved.
        let at = out.len();
        let base = out.as_mut_ptr().add(at);
        *base = b',';
        let base = base.add(comma);
        *base = b'"';
        store(block, base.add(1));
        *base.add(1 + text.len()) = b'"';
        *base.add(2 + text.len()) = b':';
        out.set_len(at + comma + text.len() + 3);
        return Ok(());
    }
    if comma == 1 {
        out.push(b',');
    }
    write_str_blocks(out, text);
    out.push(b':');
    Ok(())
}

/// `write_str_bytes` for any string. Room for the worst case (every byte a 6-byte escape) is
/// reserved up front, so the loop stores a whole block at a time without bounds checks and
/// without a copy call per run: a block with nothing to escape is stored and passed; otherwise
/// each byte it flags is replaced by its escape sequence in turn, the text after it loaded and
/// stored again behind the escape (arguments of tool calls, JSON in a string, flag several per
/// block). The last partial block is padded with spaces (which need no escape).
#[inline(never)]
fn write_str_blocks(out: &mut Vec<u8>, text: &[u8]) {
    out.reserve(text.len() * 6 + 2 + BLOCK);
    unsafe {
        let start = out.len();
        let base = out.as_mut_ptr();
        let mut at = start;
        *base.add(at) = b'"';
        at += 1;
        let mut i = 0;
        while i < text.len() {
            let block = load_padded(text, i);
            store(block, base.add(at));
            let mut mask = stops(block);
            if mask == 0 {
                let step = (text.len() - i).min(BLOCK);
                at += step;
                i += step;
                continue;
            }
            // Bytes `run..` of the text are stored at `at`, up to the block's end at least.
            let mut run = i;
            loop {
                let stop = i + first_stop(mask);
                if stop >= text.len() {
                    break; // a portable mask's error in the padding: the text is all written
                }
                at += stop - run;
                at += match write_escape(text[stop], base.add(at)) {
                    0 => 1, // flagged in error: the byte is in place
                    len => len,
                };
                run = stop + 1;
                mask &= mask - 1; // one lane per flagged byte: this clears the one just written
                if mask == 0 {
                    break;
                }
                store(load_padded(text, run), base.add(at));
            }
            i = run;
        }
        *base.add(at) = b'"';
        out.set_len(at + 1);
    }
}

thread_local! {
    /// Whether a `str` read on this thread since the flag was last cleared may hold non-ASCII
    /// text (it was not a compact ASCII str). The writer takes every string through
    /// `str_utf8`, so while the flag is clear its output is ASCII and becomes a `str` without
    /// a pass to check that (see `json::with_buffer`).
    pub(crate) static WROTE_NON_ASCII: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The UTF-8 text of a `str` (or subclass) given by pointer, or `None` when it has none (a lone
/// surrogate). An ASCII str is read from the object itself, where CPython keeps its text.
/// Notes in `WROTE_NON_ASCII` that the text being written may not be ASCII.
#[inline(always)]
pub(crate) unsafe fn str_utf8<'a>(text: *mut ffi::PyObject) -> Option<&'a [u8]> {
    if let Some(ascii) = compact_ascii(text) {
        return Some(ascii);
    }
    WROTE_NON_ASCII.set(true);
    utf8_of_str(text)
}

/// Write a `str` (or subclass) given by pointer.
#[inline(always)]
pub(crate) unsafe fn write_str_ptr(out: &mut Vec<u8>, text: *mut ffi::PyObject) -> Result<(), PathError> {
    let Some(bytes) = str_utf8(text) else { return Err(lone_surrogate()) };
    write_str_bytes(out, bytes);
    Ok(())
}

#[cold]
fn lone_surrogate() -> PathError {
    PathError::value_error("str is not valid UTF-8 (it contains a lone surrogate) and cannot be written as JSON")
}

/// Two decimal digits for each number below 100.
static DIGIT_PAIRS: [u8; 200] = {
    let mut pairs = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        pairs[2 * i] = b'0' + (i / 10) as u8;
        pairs[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    pairs
};

/// The last `width` decimal digits of `n` (zero-padded) ending at `end`, two at a time.
#[inline(always)]
unsafe fn digits_backwards(mut n: u64, width: usize, end: *mut u8) {
    let mut at = width;
    while at >= 2 {
        at -= 2;
        let pair = (n % 100) as usize * 2;
        n /= 100;
        std::ptr::copy_nonoverlapping(DIGIT_PAIRS.as_ptr().add(pair), end.sub(width - at), 2);
    }
    if at == 1 {
        *end.sub(width) = b'0' + (n % 10) as u8;
    }
}

/// `n` in decimal, as itoa writes it, straight into `out`. Below 10^8 (ids, counts, sizes) in
/// 32-bit arithmetic, in halves of four digits whose digit pairs do not wait on each other: the
/// pair-by-pair loop is one chain of dependent multiplications, as long as the number.
#[inline(always)]
fn write_u64(out: &mut Vec<u8>, n: u64) {
    out.reserve(20);
    // SAFETY: an u64 has at most 20 digits, reserved above.
    unsafe {
        let at = out.len();
        let base = out.as_mut_ptr().add(at);
        let width = if n < 10_000 {
            write_up_to_four_digits(base, n as u32)
        } else if n < 100_000_000 {
            let (high, low) = (n as u32 / 10_000, n as u32 % 10_000);
            let width = write_up_to_four_digits(base, high);
            write_four_digits(base.add(width), low);
            width + 4
        } else {
            let width = n.ilog10() as usize + 1;
            digits_backwards(n, width, base.add(width));
            width
        };
        out.set_len(at + width);
    }
}

/// `n` (below 10^4) without leading zeros at `to`; how many digits that is.
#[inline(always)]
unsafe fn write_up_to_four_digits(to: *mut u8, n: u32) -> usize {
    let pairs = DIGIT_PAIRS.as_ptr();
    if n < 100 {
        if n < 10 {
            *to = b'0' + n as u8;
            return 1;
        }
        std::ptr::copy_nonoverlapping(pairs.add(2 * n as usize), to, 2);
        return 2;
    }
    let (high, low) = (n / 100, n % 100);
    let width = if high < 10 {
        *to = b'0' + high as u8;
        1
    } else {
        std::ptr::copy_nonoverlapping(pairs.add(2 * high as usize), to, 2);
        2
    };
    std::ptr::copy_nonoverlapping(pairs.add(2 * low as usize), to.add(width), 2);
    width + 2
}

/// `n` (below 10^4) as exactly four digits, zero-padded, at `to`.
#[inline(always)]
unsafe fn write_four_digits(to: *mut u8, n: u32) {
    let pairs = DIGIT_PAIRS.as_ptr();
    std::ptr::copy_nonoverlapping(pairs.add(2 * (n / 100) as usize), to, 2);
    std::ptr::copy_nonoverlapping(pairs.add(2 * (n % 100) as usize), to.add(2), 2);
}

/// An integer in decimal, as itoa writes it.
#[inline]
pub(crate) fn write_i64(out: &mut Vec<u8>, value: i64) {
    if value < 0 {
        out.push(b'-');
    }
    write_u64(out, value.unsigned_abs());
}

const POWERS_OF_TEN: [f64; 5] = [1.0, 10.0, 100.0, 1_000.0, 10_000.0];

/// A finite float, as ryu writes it (the shortest text that reads back exactly).
#[inline(never)]
pub(crate) fn write_f64(out: &mut Vec<u8>, value: f64) {
    if !write_short_decimal(out, value) {
        out.extend_from_slice(ryu::Buffer::new().format_finite(value).as_bytes());
    }
}

/// The floats JSON mostly holds (prices, scores, coordinates: below 2^30 with at most 4
/// decimals) without ryu's general search, which costs several hundred instructions a float.
/// For the fewest decimals `k` whose integer `n = round(|value| * 10^k)` reads back exactly
/// (`n / 10^k`, one correctly rounded division, is what parsing the text gives), `n` with `k`
/// decimals is the shortest text: below 2^30 an ulp is at most 2^-23, so the texts that read
/// back as the value span far less than 10^-4 and at most one `n` fits for each `k`. ryu prints such a value
/// in plain notation (`12.5`, `0.0001`, `3.0`), as here. Returns false to leave it to ryu.
#[inline]
fn write_short_decimal(out: &mut Vec<u8>, value: f64) -> bool {
    let magnitude = value.abs();
    if !(magnitude >= 1e-4 && magnitude < (1u64 << 30) as f64) {
        return false; // zero (keeps the sign of -0.0), tiny, large: ryu
    }
    for (decimals, &scale) in POWERS_OF_TEN.iter().enumerate() {
        let n = (magnitude * scale + 0.5) as u64;
        if n as f64 / scale != magnitude {
            continue;
        }
        if value < 0.0 {
            out.push(b'-');
        }
        let unit = POWERS_OF_TEN[decimals] as u64;
        write_u64(out, n / unit);
        // `.` and the decimals (at least one: `3.0`), zero-padded, in one go.
        let width = decimals.max(1);
        out.reserve(8);
        // SAFETY: `.` and at most 4 digits fit in the 8 bytes reserved.
        unsafe {
            let at = out.len();
            let base = out.as_mut_ptr().add(at);
            *base = b'.';
            digits_backwards(n % unit, width, base.add(1 + width));
            out.set_len(at + 1 + width);
        }
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::{write_f64, write_i64, write_str_bytes};

    fn escaped(text: &str) -> String {
        let mut out = Vec::new();
        write_str_bytes(&mut out, text.as_bytes());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn integers_are_written_as_std_formats_them() {
        let mut values: Vec<i64> = vec![0, i64::MAX, i64::MIN, i64::MIN + 1, -1];
        for digits in 0..19u32 {
            let power = 10i64.pow(digits);
            values.extend([power - 1, power, power + 1, -power, -(power - 1), 2 * power + 3]);
        }
        values.extend((0..20_000).map(|n| n * 7919 % 1_000_003));
        for value in values {
            let mut out = Vec::new();
            write_i64(&mut out, value);
            assert_eq!(String::from_utf8(out).unwrap(), value.to_string());
        }
    }

    #[test]
    fn escapes_quotes_backslashes_and_controls() {
        assert_eq!(escaped("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(escaped("\n\r\t\u{8}\u{c}"), r#""\n\r\t\b\f""#);
        assert_eq!(escaped("\u{1}\u{1f}"), r#""\u0001\u001f""#);
    }

    /// The escaping rule written out byte by byte, to check the block-at-a-time writer against.
    fn escaped_slowly(text: &str) -> String {
        let mut out = String::from("\"");
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    #[test]
    fn every_byte_to_escape_at_every_position_of_every_length_up_to_three_blocks() {
        let specials: Vec<char> = (0u8..0x20).map(char::from).chain(['"', '\\', ' ', '\u{7f}', 'é', '😀']).collect();
        for length in 0..50 {
            for at in 0..=length {
                for &special in &specials {
                    let mut text: String = (0..length).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
                    text.insert(at, special);
                    assert_eq!(escaped(&text), escaped_slowly(&text), "{special:?} at {at} of {length}");
                    // Two in a row, and one at each end as well.
                    text.insert(at, special);
                    text.push(special);
                    assert_eq!(escaped(&text), escaped_slowly(&text), "{special:?}x2 at {at} of {length}");
                }
            }
        }
        let long = "x\"y\u{1}é".repeat(10_000);
        assert_eq!(escaped(&long), escaped_slowly(&long));
        assert_eq!(escaped(""), "\"\"");
    }

    #[test]
    fn blocks_with_many_bytes_to_escape() {
        // Every string of up to 7 characters over these, at three offsets into a block, and
        // JSON text as a tool call's arguments hold it.
        let alphabet = ['a', '"', '\\', '\n', '\u{1}', '\u{1f}', 'é'];
        let mut text = String::new();
        for length in 0..=7u32 {
            for mut code in 0..alphabet.len().pow(length) {
                text.clear();
                for _ in 0..length {
                    text.push(alphabet[code % alphabet.len()]);
                    code /= alphabet.len();
                }
                for offset in [0, 9, 15] {
                    let shifted = format!("{}{text}", "x".repeat(offset));
                    assert_eq!(escaped(&shifted), escaped_slowly(&shifted), "{shifted:?}");
                }
            }
        }
        let arguments = r#"{"path": "src/app.py", "pattern": "def handle_(request|event)", "include": ["*.py", "*.pyi"]}"#;
        assert_eq!(escaped(arguments), escaped_slowly(arguments));
        assert_eq!(escaped(&"\"".repeat(40)), escaped_slowly(&"\"".repeat(40)));
    }

    fn both_ways(value: f64) -> (String, String) {
        let mut out = Vec::new();
        write_f64(&mut out, value);
        (String::from_utf8(out).unwrap(), ryu::Buffer::new().format_finite(value).to_owned())
    }

    #[test]
    fn short_decimals_are_written_as_ryu_writes_them() {
        let mut checked = 0;
        for decimals in 0..6 {
            let scale = 10f64.powi(decimals);
            for n in (0..200_000u64).chain((1u64 << 30) * 10u64.pow(decimals as u32) - 1000..(1u64 << 30) * 10u64.pow(decimals as u32) + 1000) {
                for value in [n as f64 / scale, -(n as f64) / scale] {
                    let (ours, ryu) = both_ways(value);
                    assert_eq!(ours, ryu, "{value:e}");
                    checked += 1;
                }
            }
        }
        // Values next to short decimals, and values spread over many magnitudes.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..300_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let value = f64::from_bits(state);
            if value.is_finite() {
                assert_eq!(both_ways(value).0, both_ways(value).1, "{value:e}");
                let near = ((state % 2_000_000) as f64 / 1e4).to_bits() as i64 + (state >> 60) as i64 - 8;
                let near = f64::from_bits(near as u64);
                assert_eq!(both_ways(near).0, both_ways(near).1, "{near:e}");
            }
        }
        assert!(checked > 1_000_000);
        assert_eq!(both_ways(-0.0).0, "-0.0");
        assert_eq!(both_ways(1e-4).0, "0.0001");
        assert_eq!(both_ways(1073741823.5).0, "1073741823.5");
    }

    #[test]
    fn keeps_non_ascii_as_utf8() {
        assert_eq!(escaped("é😀"), "\"é😀\"");
    }
}
