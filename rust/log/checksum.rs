//! CRC-32C (Castagnoli), the checksum the session layer puts on every stored record (as LevelDB
//! and RocksDB log records and Kafka batches do).
//!
//! The CPU's CRC-32C instruction where there is one (SSE 4.2 on x86-64, three registers side by
//! side; the CRC extension on AArch64), else a table-driven version (slicing by 8). Both are checked against each other and
//! against the catalogue vectors.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::value::walk::type_name;

/// The Castagnoli polynomial, bit-reflected.
const POLYNOMIAL: u32 = 0x82F6_3B78;

/// `TABLES[k][b]`: the CRC of byte `b` followed by `k` zero bytes.
static TABLES: [[u32; 256]; 8] = {
    let mut tables = [[0u32; 256]; 8];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = byte as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ POLYNOMIAL } else { crc >> 1 };
            bit += 1;
        }
        tables[0][byte] = crc;
        byte += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut byte = 0;
        while byte < 256 {
            let previous = tables[k - 1][byte];
            tables[k][byte] = (previous >> 8) ^ tables[0][(previous & 0xff) as usize];
            byte += 1;
        }
        k += 1;
    }
    tables
};

/// Continue the (pre-inverted) register `crc` over `data`, 8 bytes per step.
fn update_by_table(mut crc: u32, data: &[u8]) -> u32 {
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let low = crc ^ u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        crc = TABLES[7][(low & 0xff) as usize]
            ^ TABLES[6][((low >> 8) & 0xff) as usize]
            ^ TABLES[5][((low >> 16) & 0xff) as usize]
            ^ TABLES[4][(low >> 24) as usize]
            ^ TABLES[3][word[4] as usize]
            ^ TABLES[2][word[5] as usize]
            ^ TABLES[1][word[6] as usize]
            ^ TABLES[0][word[7] as usize];
    }
    for &byte in words.remainder() {
        crc = (crc >> 8) ^ TABLES[0][((crc ^ byte as u32) & 0xff) as usize];
    }
    crc
}

/// Bytes per lane of `update_by_instruction`'s three lanes: a record's length or so (a log's
/// records are 100 to 500 bytes), so that most records take at least one block of three.
const LANE: usize = 64;

/// `SHIFT_LANE[k][b]`: the register `b << 8k` run over `LANE` zero bytes. The register update is
/// linear, so running any register over `LANE` zero bytes is four lookups in these tables.
static SHIFT_LANE: [[u32; 256]; 4] = {
    let mut tables = [[0u32; 256]; 4];
    let mut k = 0;
    while k < 4 {
        let mut byte = 0;
        while byte < 256 {
            let mut crc = (byte as u32) << (8 * k);
            let mut zeros = 0;
            while zeros < LANE {
                crc = (crc >> 8) ^ TABLES[0][(crc & 0xff) as usize];
                zeros += 1;
            }
            tables[k][byte] = crc;
            byte += 1;
        }
        k += 1;
    }
    tables
};

/// The register `crc` run over `LANE` zero bytes.
fn shift_lane(crc: u32) -> u32 {
    SHIFT_LANE[0][(crc & 0xff) as usize]
        ^ SHIFT_LANE[1][((crc >> 8) & 0xff) as usize]
        ^ SHIFT_LANE[2][((crc >> 16) & 0xff) as usize]
        ^ SHIFT_LANE[3][(crc >> 24) as usize]
}

/// The CRC instruction takes three cycles to give its result and can start one every cycle, so
/// one running register waits two cycles in three. Blocks of `3 * LANE` bytes run as three
/// registers side by side (the first continuing `crc`, the others from zero), then joined:
/// running a register over `A` then `B` gives the register run over `B` from zero, XORed with
/// the first register run over `B`'s length of zero bytes (`shift_lane`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn update_by_instruction(crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let word = |bytes: &[u8], at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let mut wide = crc as u64;
    let mut blocks = data.chunks_exact(3 * LANE);
    for block in &mut blocks {
        let (first, rest) = block.split_at(LANE);
        let (second, third) = rest.split_at(LANE);
        let (mut a, mut b, mut c) = (wide, 0u64, 0u64);
        for at in (0..LANE).step_by(8) {
            a = _mm_crc32_u64(a, word(first, at));
            b = _mm_crc32_u64(b, word(second, at));
            c = _mm_crc32_u64(c, word(third, at));
        }
        wide = u64::from(shift_lane(shift_lane(a as u32) ^ b as u32) ^ c as u32);
    }
    let mut words = blocks.remainder().chunks_exact(8);
    for word in &mut words {
        wide = _mm_crc32_u64(wide, u64::from_le_bytes(word.try_into().expect("8 bytes")));
    }
    let mut crc = wide as u32;
    for &byte in words.remainder() {
        crc = _mm_crc32_u8(crc, byte);
    }
    crc
}

#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "crc")]
unsafe fn update_by_instruction(mut crc: u32, data: &[u8]) -> u32 {
    use std::arch::aarch64::{__crc32cb, __crc32cd};
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        crc = __crc32cd(crc, u64::from_le_bytes(word.try_into().expect("8 bytes")));
    }
    for &byte in words.remainder() {
        crc = __crc32cb(crc, byte);
    }
    crc
}

fn has_crc_instruction() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("sse4.2");
    #[cfg(target_arch = "aarch64")]
    return std::arch::is_aarch64_feature_detected!("crc");
    #[allow(unreachable_code)]
    false
}

/// CRC-32C of `data`.
pub(crate) fn crc32c_of(data: &[u8]) -> u32 {
    crc32c_of_parts(&[data])
}

/// CRC-32C of the concatenation of `parts` (without building it).
pub(crate) fn crc32c_of_parts(parts: &[&[u8]]) -> u32 {
    let mut crc = !0;
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    if has_crc_instruction() {
        for part in parts {
            // SAFETY: the CPU was just checked to have the instruction.
            crc = unsafe { update_by_instruction(crc, part) };
        }
        return !crc;
    }
    for part in parts {
        crc = update_by_table(crc, part);
    }
    !crc
}

/// CRC-32C (Castagnoli) of `bytes`, or of the UTF-8 of a `str`.
#[pyfunction]
#[pyo3(signature = (data, /))]
fn crc32c(data: &Bound<'_, PyAny>) -> PyResult<u32> {
    if let Ok(bytes) = data.cast::<PyBytes>() {
        return Ok(crc32c_of(bytes.as_bytes()));
    }
    if let Ok(text) = data.cast::<PyString>() {
        let mut size: ffi::Py_ssize_t = 0;
        let utf8 = unsafe { ffi::PyUnicode_AsUTF8AndSize(text.as_ptr(), &mut size) };
        if utf8.is_null() {
            unsafe { ffi::PyErr_Clear() };
            return Err(PyValueError::new_err(
                "crc32c: the str is not valid UTF-8 (it contains a lone surrogate)",
            ));
        }
        // SAFETY: CPython keeps the UTF-8 form alive as long as the str.
        return Ok(crc32c_of(unsafe { std::slice::from_raw_parts(utf8 as *const u8, size as usize) }));
    }
    Err(PyTypeError::new_err(format!("crc32c: data must be bytes or str, not {}", type_name(data))))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(crc32c, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_check_value() {
        assert_eq!(crc32c_of(b"123456789"), 0xE306_9283);
        assert_eq!(!update_by_table(!0, b"123456789"), 0xE306_9283);
        assert_eq!(crc32c_of(b""), 0);
    }

    #[test]
    fn the_instruction_and_the_tables_agree_at_every_length() {
        // Past three blocks of three lanes, at every alignment.
        let data: Vec<u8> = (0..700u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for start in 0..8 {
            for end in start..data.len() {
                let slice = &data[start..end];
                assert_eq!(crc32c_of(slice), !update_by_table(!0, slice), "{start}..{end}");
            }
        }
    }
}
