//! Decoding the text of a JSON string that holds escapes, for the parser: plain runs are copied
//! a block at a time with `json::scan` (a store per block, no copy call per run), escapes are
//! decoded in place.

use crate::json::scan::{first_stop, load, stops, store, BLOCK};

/// What was wrong in a string, and the byte offset where it was found.
pub(crate) type StringError = (&'static str, usize);

/// Decode the rest of a string from `at` (a byte that is not plain: `"`, `\` or a control
/// character, or the end of `bytes`) into `out`; returns the offset past the closing quote.
/// `bytes` is valid UTF-8 and `out` only ever receives whole characters, so it stays UTF-8.
pub(crate) fn decode_escaped(bytes: &[u8], mut at: usize, out: &mut Vec<u8>) -> Result<usize, StringError> {
    loop {
        match bytes.get(at) {
            Some(b'"') => return Ok(at + 1),
            Some(b'\\') => at = escape(bytes, at + 1, out)?,
            Some(_) => return Err(("control character (\\u0000-\\u001F) found while parsing a string", at)),
            None => return Err(("EOF while parsing a string", at)),
        }
        at = copy_plain_run(bytes, at, out);
    }
}

/// Copy the plain run of `bytes` from `at` to `out`; returns where it stops. Each block is
/// stored whole and kept up to its first byte to stop at.
#[inline(always)]
fn copy_plain_run(bytes: &[u8], mut at: usize, out: &mut Vec<u8>) -> usize {
    while at + BLOCK <= bytes.len() {
        out.reserve(BLOCK);
        let block = load(bytes, at);
        let mask = stops(block);
        let step = if mask == 0 { BLOCK } else { first_stop(mask) };
        // SAFETY: a block's room was reserved; only the plain bytes (whole characters, as they
        // end before an ASCII byte or a block boundary that the next store continues) are kept.
        unsafe {
            store(block, out.as_mut_ptr().add(out.len()));
            out.set_len(out.len() + step);
        }
        at += step;
        if mask != 0 {
            return at;
        }
    }
    let end = at + crate::json::scan::plain_run_len(&bytes[at..]);
    out.extend_from_slice(&bytes[at..end]);
    end
}

/// Decode one escape (`at` is past its backslash) into `out`; returns the offset past it.
#[inline(always)]
fn escape(bytes: &[u8], at: usize, out: &mut Vec<u8>) -> Result<usize, StringError> {
    let Some(&byte) = bytes.get(at) else { return Err(("EOF while parsing a string", at)) };
    let decoded = match byte {
        b'"' => b'"',
        b'\\' => b'\\',
        b'/' => b'/',
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' => return unicode_escape(bytes, at + 1, out),
        _ => return Err(("invalid escape", at)),
    };
    out.push(decoded);
    Ok(at + 1)
}

/// A `\u` escape (`at` is past the `u`), with the second half of a surrogate pair.
#[inline(never)]
fn unicode_escape(bytes: &[u8], at: usize, out: &mut Vec<u8>) -> Result<usize, StringError> {
    let first = hex4(bytes, at)?;
    let mut at = at + 4;
    let code = match first {
        0xD800..=0xDBFF => {
            if !bytes[at..].starts_with(b"\\u") {
                return Err(("lone leading surrogate in hex escape", at));
            }
            at += 2;
            let second = hex4(bytes, at)?;
            at += 4;
            if !(0xDC00..=0xDFFF).contains(&second) {
                return Err(("lone leading surrogate in hex escape", at));
            }
            0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
        }
        0xDC00..=0xDFFF => return Err(("lone trailing surrogate in hex escape", at)),
        code => code,
    };
    let c = char::from_u32(code).expect("a valid scalar value");
    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
    Ok(at)
}

fn hex4(bytes: &[u8], at: usize) -> Result<u32, StringError> {
    let mut value = 0;
    for i in at..at + 4 {
        let digit = match bytes.get(i) {
            Some(b @ b'0'..=b'9') => b - b'0',
            Some(b @ b'a'..=b'f') => b - b'a' + 10,
            Some(b @ b'A'..=b'F') => b - b'A' + 10,
            Some(_) => return Err(("invalid escape", i)),
            None => return Err(("EOF while parsing a string", i)),
        };
        value = value * 16 + digit as u32;
    }
    Ok(value)
}
