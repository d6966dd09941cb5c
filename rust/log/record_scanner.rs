//! The JSON grammar of the validating scan of records (`record_scan.rs`): a `Scanner` that walks
//! a value and says what it is (`Kind`), or `Err(())` for anything the frozen-value parser might
//! refuse or read differently (a control character in a string, a surrogate escape, a number with
//! a leading zero or an exponent, more than 18 digits, nesting past `MAX_SCAN_DEPTH`).
//!
//! Strings are scanned a 16-byte block at a time (`json/scan.rs`), stopping at `"`, `\\`, a
//! control character, and (until the first one) a byte that is not ASCII: the scanner then notes
//! that the whole text must be checked as UTF-8 (any such byte outside a string fails the scan).

use crate::json::scan::{first_stop, load, load_tail, non_ascii, stops, Block, Mask, BLOCK};

/// Deeper records take the full path (the parser's own limit is higher).
pub(crate) const MAX_SCAN_DEPTH: usize = 64;

/// What a scanned value is.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Kind {
    Int(i64),
    Str,
    Object,
    Other,
}

/// `Err(())`: not vouched for, take the full path.
pub(crate) type Scan<T> = Result<T, ()>;

pub(crate) struct Scanner<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) pos: usize,
    /// A string held a byte that is not ASCII: the whole text must be checked as UTF-8.
    pub(crate) non_ascii: bool,
}

impl Scanner<'_> {
    #[inline(always)]
    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline(always)]
    pub(crate) fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    /// After whitespace, the byte `byte`.
    #[inline(always)]
    pub(crate) fn expect(&mut self, byte: u8) -> Scan<()> {
        if self.peek() != Some(byte) {
            self.skip_whitespace(); // rare: dshkit writes none
            if self.peek() != Some(byte) {
                return Err(());
            }
        }
        self.pos += 1;
        Ok(())
    }

    pub(crate) fn value(&mut self, depth: usize) -> Scan<Kind> {
        self.skip_whitespace();
        match self.peek().ok_or(())? {
            b'"' => self.string().map(|_| Kind::Str),
            b'{' => {
                self.object(depth, |scanner, _, depth| scanner.member_value(depth).map(drop))?;
                Ok(Kind::Object)
            }
            b'[' => self.array(depth),
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => Err(()),
        }
    }

    /// A member's value: strings and numbers (most values of a record) without a call.
    #[inline(always)]
    pub(crate) fn member_value(&mut self, depth: usize) -> Scan<Kind> {
        self.skip_whitespace();
        match self.peek() {
            Some(b'"') => self.string().map(|_| Kind::Str),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => self.value(depth),
        }
    }

    pub(crate) fn literal(&mut self, word: &[u8]) -> Scan<Kind> {
        if !self.bytes[self.pos..].starts_with(word) {
            return Err(());
        }
        self.pos += word.len();
        Ok(Kind::Other)
    }

    /// An object at its `{`: `member` scans each member's value (given the key's text, `None`
    /// if it holds an escape: it could spell a key a rule looks at); the number of members.
    #[inline(always)]
    pub(crate) fn object(
        &mut self,
        depth: usize,
        member: impl FnMut(&mut Self, Option<&[u8]>, usize) -> Scan<()>,
    ) -> Scan<usize> {
        if depth >= MAX_SCAN_DEPTH {
            return Err(());
        }
        self.pos += 1; // '{'
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(0);
        }
        self.members(depth, 0, member)
    }

    /// The members of an object from the next key on (after its `{` or a `,`), `count` members
    /// already read: as `object`, the number of members in all.
    #[inline(always)]
    pub(crate) fn members(
        &mut self,
        depth: usize,
        mut count: usize,
        mut member: impl FnMut(&mut Self, Option<&[u8]>, usize) -> Scan<()>,
    ) -> Scan<usize> {
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(());
            }
            let start = self.pos + 1;
            let escaped = self.string()?;
            let bytes = self.bytes;
            let key = (!escaped).then(|| &bytes[start..self.pos - 1]);
            self.expect(b':')?;
            member(self, key, depth + 1)?;
            count += 1;
            if !self.member_end()? {
                return Ok(count);
            }
        }
    }

    /// After a member's value: `true` past a `,` (another member follows), `false` past the
    /// closing `}`.
    #[inline(always)]
    pub(crate) fn member_end(&mut self) -> Scan<bool> {
        self.skip_whitespace();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(b'}') => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(()),
        }
    }

    pub(crate) fn array(&mut self, depth: usize) -> Scan<Kind> {
        if depth >= MAX_SCAN_DEPTH {
            return Err(());
        }
        self.pos += 1; // '['
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Kind::Other);
        }
        loop {
            self.value(depth + 1)?;
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Kind::Other);
                }
                _ => return Err(()),
            }
        }
    }

    /// A string at its opening quote, a block at a time up to the first byte that is `"`, `\\`,
    /// a control character or (until one is seen) not ASCII: whether it holds an escape.
    #[inline(always)]
    pub(crate) fn string(&mut self) -> Scan<bool> {
        let bytes = self.bytes;
        let mut at = self.pos + 1;
        let mut escaped = false;
        loop {
            let mask = if at + BLOCK <= bytes.len() { self.stops_in(load(bytes, at)) } else { self.tail_stops(at)? };
            if mask == 0 {
                at += BLOCK;
                continue;
            }
            at += first_stop(mask);
            match bytes[at] {
                b'"' => {
                    self.pos = at + 1;
                    return Ok(escaped);
                }
                b'\\' => {
                    escaped = true;
                    at = escape_end(bytes, at)?;
                }
                0x80.. => {
                    self.non_ascii = true;
                    at += 1;
                }
                _ => return Err(()), // a control character
            }
        }
    }

    /// The bytes of `block` a string stops at (`json::scan::stops`, and until one is seen, bytes
    /// that are not ASCII).
    #[inline(always)]
    fn stops_in(&self, block: Block) -> Mask {
        if self.non_ascii {
            stops(block)
        } else {
            stops(block) | non_ascii(block)
        }
    }

    /// `stops_in` for the last bytes of the text from `at` (fewer than a block), padded with
    /// spaces (no stop past the end); `Err` at the end. Apart, so the loop over whole blocks
    /// keeps its few variables in registers.
    #[inline(never)]
    fn tail_stops(&self, at: usize) -> Scan<Mask> {
        if at >= self.bytes.len() {
            return Err(());
        }
        Ok(self.stops_in(load_tail(self.bytes, at)))
    }

    /// An integer of at most 18 digits (always in range, read as it is scanned), or a fraction
    /// without exponent; no leading zero.
    #[inline]
    pub(crate) fn number(&mut self) -> Scan<Kind> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let start = self.pos;
        let mut magnitude: i64 = 0;
        match self.peek().ok_or(())? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => {
                while let Some(digit @ b'0'..=b'9') = self.peek() {
                    if self.pos - start == 18 {
                        return Err(());
                    }
                    magnitude = magnitude * 10 + (digit - b'0') as i64;
                    self.pos += 1;
                }
            }
            _ => return Err(()),
        }
        match self.peek() {
            Some(b'0'..=b'9' | b'e' | b'E') => Err(()),
            Some(b'.') => {
                self.pos += 1;
                let fraction = self.pos;
                while let Some(b'0'..=b'9') = self.peek() {
                    self.pos += 1;
                }
                if self.pos == fraction || self.pos - fraction > 20 || matches!(self.peek(), Some(b'e' | b'E')) {
                    return Err(());
                }
                Ok(Kind::Other)
            }
            _ => Ok(Kind::Int(if negative { -magnitude } else { magnitude })),
        }
    }
}

/// The end of the escape at `at` (a `\\`): one of `"\/bfnrt`, or `u` and four hex digits that
/// are not a surrogate (pairs take the full path too).
#[inline(never)]
fn escape_end(bytes: &[u8], at: usize) -> Scan<usize> {
    match bytes.get(at + 1).ok_or(())? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Ok(at + 2),
        b'u' => {
            let hex = bytes.get(at + 2..at + 6).ok_or(())?;
            let mut code = 0u32;
            for &digit in hex {
                code = code * 16 + (digit as char).to_digit(16).ok_or(())?;
            }
            if (0xD800..=0xDFFF).contains(&code) {
                return Err(());
            }
            Ok(at + 6)
        }
        _ => Err(()),
    }
}
