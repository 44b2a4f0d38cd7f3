//! The frames a test peer of Linux siw sends it, as rping's client would
//! (RFC 5044 section 7's startup frames with RFC 6581's block, RFC 5041
//! section 4's untagged DDP header): for the probes that capture siw's
//! answers and the decoder tests that synthesise them.

use uwarp_stack::wire::ddp::{BufferModel, DdpRepr};
use uwarp_stack::wire::mpa::{EnhancedBlock, FrameKind, Revision, StartupRepr};

/// An untagged ULPDU with L set: DDP version 1, `rdmap` as the RDMAP
/// control octet, on queue `qn` with MSN `msn`, then `payload`.
pub fn untagged(rdmap: u8, qn: u32, msn: u32, payload: &[u8]) -> Vec<u8> {
    let ddp = DdpRepr {
        last: true,
        reserved: 0,
        ulp_control: rdmap,
        model: BufferModel::Untagged {
            ulp_word: 0,
            qn,
            msn,
            mo: 0,
        },
    };
    let mut ulpdu = vec![0; ddp.header_len()];
    ddp.emit(&mut ulpdu)
        .expect("a buffer of the header's length holds it");
    [ulpdu, payload.to_vec()].concat()
}

/// The MPA Request or Reply rping and siw exchange by default: revision
/// 2, IRD and ORD 1, no CRC, no Markers.
pub fn startup(kind: FrameKind) -> Vec<u8> {
    StartupRepr {
        kind,
        markers: false,
        crc: false,
        reject: false,
        reserved_flags: 0,
        revision: Revision::Enhanced,
        enhanced: Some(EnhancedBlock {
            ird: 1,
            ord: 1,
            ..EnhancedBlock::default()
        }),
        private_data: &[],
    }
    .to_vec()
    .expect("a valid startup frame")
}
