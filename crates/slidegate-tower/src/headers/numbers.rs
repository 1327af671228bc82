//! Whole numbers in header values, without `core::fmt`.

use std::sync::LazyLock;

use http::HeaderValue;

/// Appends `n` in decimal: the headers are written on every response,
/// and `core::fmt` was the largest part of the layer's own work.
pub(crate) fn push_number(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// The numbers whose header values are static (no allocation): the
/// common quota values, remaining counts and seconds.
const SMALL: usize = 1000;

/// The decimal digits of `0..SMALL`, left-aligned.
static DIGITS: [[u8; 3]; SMALL] = {
    let mut table = [[0u8; 3]; SMALL];
    let mut n = 0;
    while n < SMALL {
        let (a, b, c) = ((n / 100) as u8, (n / 10 % 10) as u8, (n % 10) as u8);
        table[n] = if n >= 100 {
            [b'0' + a, b'0' + b, b'0' + c]
        } else if n >= 10 {
            [b'0' + b, b'0' + c, 0]
        } else {
            [b'0' + c, 0, 0]
        };
        n += 1;
    }
    table
};

/// The header values of `0..SMALL`, static: cloning one copies a pointer.
static NUMBERS: LazyLock<Box<[HeaderValue]>> = LazyLock::new(|| {
    DIGITS
        .iter()
        .enumerate()
        .map(|(n, digits)| {
            let len = if n >= 100 {
                3
            } else if n >= 10 {
                2
            } else {
                1
            };
            match std::str::from_utf8(&digits[..len]) {
                Ok(text) => HeaderValue::from_static(text),
                Err(_) => HeaderValue::from(n),
            }
        })
        .collect()
});

/// `n` as a header value; static below [`SMALL`].
pub(crate) fn number_value(n: u64) -> HeaderValue {
    match usize::try_from(n).ok().and_then(|i| NUMBERS.get(i)) {
        Some(value) => value.clone(),
        None => HeaderValue::from(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 7, 9, 10, 42, 99, 100, 512, 999, 1000, 65_536, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(number_value(n).to_str().unwrap(), n.to_string());
        }
    }
}
