//! The 64-bit state word of an STag table slot: everything the data path
//! checks before it looks at the region descriptor, in one atomic load, and
//! what remote invalidation (RFC 5040 section 5.3) compare-and-swaps.
//!
//! ```text
//!  63          32 31    24 23    16 15     8 7    4   3   2   1   0
//! +--------------+--------+--------+--------+------+---+---+---+---+
//! |  generation  |  zero  |  key   | access | zero | I | B | A | V |
//! +--------------+--------+--------+--------+------+---+---+---+---+
//! ```
//!
//! - V (valid): the STag may be used. Implies A and not B.
//! - A (allocated): a registration owns the slot (valid or invalidated).
//! - B (busy): a registration or deregistration is under way; only the
//!   thread that set B touches the slot's descriptor.
//! - I (invalidatable): a Send with Invalidate may clear V.
//! - generation: bumped each time the slot is claimed, so that a state word
//!   and a descriptor from different registrations are never taken for one
//!   (the descriptor carries the generation too), and so that a stale
//!   compare-and-swap fails even when index and key are reused (ABA).

use core::fmt;

use super::access::Access;

/// One value of a slot's state word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct State(pub(crate) u64);

const VALID: u64 = 1 << 0;
const ALLOCATED: u64 = 1 << 1;
const BUSY: u64 = 1 << 2;
const INVALIDATABLE: u64 = 1 << 3;
const ACCESS_SHIFT: u32 = 8;
const KEY_SHIFT: u32 = 16;
const GENERATION_SHIFT: u32 = 32;

impl State {
    /// A free slot that has seen `generation` registrations (mod 2^32).
    pub(crate) const fn free(generation: u32) -> State {
        State((generation as u64) << GENERATION_SHIFT)
    }

    /// A slot claimed by a control operation: allocated, busy, not valid.
    pub(crate) const fn claimed(generation: u32) -> State {
        State(Self::free(generation).0 | ALLOCATED | BUSY)
    }

    /// A live registration.
    pub(crate) const fn registered(
        generation: u32,
        key: u8,
        access: Access,
        invalidatable: bool,
    ) -> State {
        let mut word = Self::free(generation).0
            | ALLOCATED
            | VALID
            | (access.bits() as u64) << ACCESS_SHIFT
            | (key as u64) << KEY_SHIFT;
        if invalidatable {
            word |= INVALIDATABLE;
        }
        State(word)
    }

    /// V: the STag may be used.
    pub(crate) const fn is_valid(self) -> bool {
        self.0 & VALID != 0
    }

    /// A: a registration owns the slot.
    pub(crate) const fn is_allocated(self) -> bool {
        self.0 & ALLOCATED != 0
    }

    /// B: a control operation is under way.
    pub(crate) const fn is_busy(self) -> bool {
        self.0 & BUSY != 0
    }

    /// I: remote invalidation is allowed.
    pub(crate) const fn is_invalidatable(self) -> bool {
        self.0 & INVALIDATABLE != 0
    }

    /// The consumer key of the registration.
    pub(crate) const fn key(self) -> u8 {
        (self.0 >> KEY_SHIFT) as u8
    }

    /// The access rights of the registration.
    pub(crate) const fn access(self) -> Access {
        Access::from_bits_truncate((self.0 >> ACCESS_SHIFT) as u8)
    }

    /// The slot's generation.
    pub(crate) const fn generation(self) -> u32 {
        (self.0 >> GENERATION_SHIFT) as u32
    }

    /// The same state with V cleared.
    pub(crate) const fn invalidated(self) -> State {
        State(self.0 & !VALID)
    }

    /// Whether an STag with `key` may be used now: valid and the key
    /// matches.
    pub(crate) const fn admits(self, key: u8) -> bool {
        self.is_valid() && self.key() == key
    }

    /// Whether a control operation on an STag with `key` may act on this
    /// registration: allocated (valid or invalidated), not busy, key equal.
    pub(crate) const fn owned_by(self, key: u8) -> bool {
        self.is_allocated() && !self.is_busy() && self.key() == key
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State")
            .field("valid", &self.is_valid())
            .field("allocated", &self.is_allocated())
            .field("busy", &self.is_busy())
            .field("invalidatable", &self.is_invalidatable())
            .field("key", &self.key())
            .field("access", &self.access())
            .field("generation", &self.generation())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let access = Access::REMOTE_READ | Access::LOCAL_WRITE;
        let state = State::registered(0xDEAD_BEEF, 0x5A, access, true);
        assert!(state.is_valid() && state.is_allocated() && !state.is_busy());
        assert!(state.is_invalidatable());
        assert_eq!(state.key(), 0x5A);
        assert_eq!(state.access(), access);
        assert_eq!(state.generation(), 0xDEAD_BEEF);
        assert!(state.admits(0x5A) && !state.admits(0x5B));
        assert!(state.owned_by(0x5A));

        let invalid = state.invalidated();
        assert!(!invalid.is_valid() && invalid.is_allocated());
        assert!(!invalid.admits(0x5A) && invalid.owned_by(0x5A));
        assert_eq!(invalid.generation(), state.generation());

        let fixed = State::registered(7, 0, Access::NONE, false);
        assert!(!fixed.is_invalidatable());
        assert_eq!(fixed.access(), Access::NONE);
    }

    #[test]
    fn free_and_claimed_slots() {
        let free = State::free(3);
        assert!(!free.is_allocated() && !free.is_valid() && !free.is_busy());
        assert!(!free.admits(0) && !free.owned_by(0));
        assert_eq!(free.generation(), 3);
        let claimed = State::claimed(4);
        assert!(claimed.is_allocated() && claimed.is_busy() && !claimed.is_valid());
        assert!(!claimed.admits(0) && !claimed.owned_by(0));
    }
}
