//! Helpers shared by the crate's tests, in and outside the crate (with the
//! `testing` feature).

/// The octets a hex string spells (test vectors copied from captures).
///
/// # Panics
/// If `s` has an odd length or a character that is not a hex digit.
pub fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digits"))
        .collect()
}
