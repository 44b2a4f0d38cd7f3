//! Helpers shared by the wire module's unit tests.

/// The octets a hex string spells (test vectors copied from captures).
pub(crate) fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digits"))
        .collect()
}
