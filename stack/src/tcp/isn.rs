//! Initial sequence numbers as RFC 6528 section 3 proposes: a 4 us clock
//! plus a keyed hash of the connection's addresses and ports, keyed by a
//! secret the caller supplies (e.g. from `getrandom` at start-up).
//!
//! The hash is SipHash (the standard library's `DefaultHasher`), fed the
//! secret before the 4-tuple; it is a keyed pseudorandom function, which is
//! what RFC 6528 asks of F().

use crate::tcp::connection::Endpoint;
use crate::tcp::seq::Seq;
use crate::tcp::timers::time::Instant;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Generates ISNs from a secret.
#[derive(Clone)]
pub struct IsnGenerator {
    secret: [u8; 16],
}

impl core::fmt::Debug for IsnGenerator {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("IsnGenerator { .. }")
    }
}

impl IsnGenerator {
    /// A generator keyed by `secret`.
    pub fn new(secret: [u8; 16]) -> Self {
        IsnGenerator { secret }
    }

    /// ISN = M + F(localip, localport, remoteip, remoteport, secret).
    pub fn isn(&self, now: Instant, local: Endpoint, remote: Endpoint) -> Seq {
        let mut hasher = DefaultHasher::new();
        self.secret.hash(&mut hasher);
        local.hash(&mut hasher);
        remote.hash(&mut hasher);
        let clock = (now.micros() / 4) as u32;
        Seq(clock.wrapping_add(hasher.finish() as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smoltcp::wire::Ipv4Address;

    #[test]
    fn depends_on_tuple_secret_and_clock() {
        let a = Endpoint::new(Ipv4Address::new(10, 0, 0, 1), 1000);
        let b = Endpoint::new(Ipv4Address::new(10, 0, 0, 2), 2000);
        let gen = IsnGenerator::new([7; 16]);
        let other = IsnGenerator::new([8; 16]);
        assert_eq!(gen.isn(Instant(0), a, b), gen.isn(Instant(0), a, b));
        assert_ne!(gen.isn(Instant(0), a, b), gen.isn(Instant(0), b, a));
        assert_ne!(gen.isn(Instant(0), a, b), other.isn(Instant(0), a, b));
        assert_eq!(
            gen.isn(Instant(40), a, b).diff(gen.isn(Instant(0), a, b)),
            10
        );
    }
}
