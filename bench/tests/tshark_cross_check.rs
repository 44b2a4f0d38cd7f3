//! Cross-checks the frames uwarp emits against an independent decoder:
//! Wireshark's tshark (4.0) and its iWARP dissectors, `iwarp_mpa`
//! (RFC 5044) and `iwarp_ddp_rdmap` (RFC 5041 and RFC 5040).
//!
//! Each test builds one TCP connection with uwarp's own emitters only (the
//! MPA Request and Reply, then FPDUs both ways: Sends, RDMA Writes, an RDMA
//! Read Request and Response, a Terminate), writes it with
//! [`PcapTcpWriter`], runs tshark on it and asserts that
//!
//! - tshark decodes the Request, the Reply and every FPDU uwarp wrote, and
//!   nothing else, as MPA;
//! - every MPA, DDP and RDMAP field tshark shows equals what uwarp put in;
//! - with CRCs negotiated every FPDU is "Good CRC32"; without, the CRC field
//!   is zero and not checked;
//! - with Markers in both directions, tshark finds them where the RFC 5044
//!   section 4.3 rule puts them (first one at the first FPDU of each side),
//!   reads the FPDUPTR values that rule gives, and decodes every header and
//!   CRC right; the payloads it shows are those of its own (faulty) Marker
//!   removal, see below;
//! - there is no malformed packet and no expert error or warning, except the
//!   two warnings tshark 4.0 gives an MPA revision 2 (RFC 6581) startup;
//! - a flipped payload octet is reported as a bad CRC in exactly that frame.
//!
//! tshark 4.0 quirks this file works around or pins down:
//!
//! - MPA is a heuristic dissector that needs the Request and Reply in the
//!   capture; there is no port preference.
//! - CRC status is only in the display text of `iwarp_mpa.crc_check`.
//! - The `rpcordma` heuristic under `iwarp_ddp_rdmap` reads the word at
//!   offset 12 of every Send and Send with Invalidate payload before it
//!   checks that there are 16 octets, so a shorter payload (the 5-octet Send
//!   with Invalidate here) is reported as "Malformed Packet: RPCoRDMA". It
//!   and `smb_direct` are disabled: they decode upper layers, not iWARP.
//! - Marker removal steps 512 octets from one Marker to the next instead of
//!   508, so an FPDU with two or more Markers inside loses 4 payload octets
//!   after each later Marker and keeps that Marker in the payload it shows
//!   (see `tshark_4_0_strip_markers`). uwarp is right here: Markers sit every
//!   512 octets of the stream, Markers included, and tshark itself reads
//!   them (FPDUPTR) at those places.
//! - An MPA revision 2 startup is decoded, its S bit counted as a reserved
//!   bit; the "Rev field is NOT set to one" and "Res field is NOT set to
//!   zero" warnings are added without a tree item, so they show only in
//!   `-z expert`, not in `-V` and not to display filters.
//!
//! tshark is required: `scripts/setup.sh` installs it (CI runs it).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{BufWriter, ErrorKind};
use std::path::{Path, PathBuf};
use std::process::Command;

use uwarp_bench::capture::PcapTcpWriter;
use uwarp_stack::wire::crc;
use uwarp_stack::wire::ddp::{self, BufferModel, DdpRepr};
use uwarp_stack::wire::fpdu::{self, CrcVerdict, LENGTH_FIELD_LEN};
use uwarp_stack::wire::marker::{self, MarkedFpdu, MARKER_INTERVAL, MARKER_LEN};
use uwarp_stack::wire::mpa::{EnhancedBlock, FrameKind, Revision, StartupRepr, HEADER_LEN};
use uwarp_stack::wire::rdmap::{Opcode, RdmapControl, RdmapSegment, ReadRequest};
use uwarp_stack::wire::terminate::{Layer, TermError, TerminateRepr};

/// The MPA Request's frame number: frames 1-3 are the TCP handshake.
const REQUEST_FRAME: u32 = 4;
/// The MPA Reply's frame number.
const REPLY_FRAME: u32 = 5;
/// Frames the writer adds after the last FPDU: FIN, FIN, ACK.
const CLOSING_FRAMES: u32 = 3;

/// The fields read from tshark for every frame, in `-e` order.
const FIELDS: &[&str] = &[
    "frame.number",
    "iwarp_mpa.key.req",
    "iwarp_mpa.key.rep",
    "iwarp_mpa.marker_flag",
    "iwarp_mpa.crc_flag",
    "iwarp_mpa.rej_flag",
    "iwarp_mpa.res",
    "iwarp_mpa.rev",
    "iwarp_mpa.pdlength",
    "iwarp_mpa.privatedata",
    "iwarp_mpa.ulpdulength",
    "iwarp_mpa.pad",
    "iwarp_mpa.crc",
    "iwarp_mpa.crc_check",
    "iwarp_mpa.marker_fpduptr",
    "iwarp_ddp.tagged_flag",
    "iwarp_ddp.last_flag",
    "iwarp_ddp.rsvd",
    "iwarp_ddp.dv",
    "iwarp_ddp.stag",
    "iwarp_ddp.tagged_offset",
    "iwarp_ddp.qn",
    "iwarp_ddp.msn",
    "iwarp_ddp.mo",
    "iwarp_rdma.version",
    "iwarp_rdma.rsv",
    "iwarp_rdma.opcode",
    "iwarp_rdma.inval_stag",
    "iwarp_rdma.sinkstag",
    "iwarp_rdma.sinkto",
    "iwarp_rdma.rdmardsz",
    "iwarp_rdma.srcstag",
    "iwarp_rdma.srcto",
    "iwarp_rdma.term_layer",
    "iwarp_rdma.term_etype_rdma",
    "iwarp_rdma.term_etype_ddp",
    "iwarp_rdma.term_etype_llp",
    "iwarp_rdma.term_etype",
    "iwarp_rdma.term_errcode_rdma",
    "iwarp_rdma.term_errcode_ddp_tagged",
    "iwarp_rdma.term_errcode_ddp_untagged",
    "iwarp_rdma.term_errcode_llp",
    "iwarp_rdma.term_errcode",
    "iwarp_rdma.term_hdrct_m",
    "iwarp_rdma.hdrct_d",
    "iwarp_rdma.hdrct_r",
    "iwarp_rdma.term_rsvd",
    "iwarp_rdma.term_ddp_seg_len",
    "iwarp_rdma.term_ddp_h",
    "data.data",
];

/// The two warnings tshark 4.0 gives an MPA revision 2 startup frame.
const REVISION_2_WARNINGS: [&str; 2] = [
    "Res field is NOT set to zero as required by RFC 5044",
    "Rev field is NOT set to one as required by RFC 5044",
];

/// Field name to value as tshark prints it with `-T fields`.
type Fields = BTreeMap<&'static str, String>;

/// What one connection negotiates.
#[derive(Debug, Clone, Copy)]
struct Scenario {
    name: &'static str,
    revision: Revision,
    crc: bool,
    markers: bool,
}

/// One ULPDU to send and the DDP and RDMAP fields tshark must show for it.
struct Message {
    from_client: bool,
    ulpdu: Vec<u8>,
    /// How many octets at the end of the ULPDU tshark hands to its `data`
    /// dissector: the payload of a Send or tagged segment, else 0.
    data_len: usize,
    fields: Fields,
}

/// One FPDU as written to the capture.
struct WrittenFpdu {
    frame: u32,
    /// Stream offset of the first octet, for Marker placement.
    offset: u64,
    bytes: Vec<u8>,
    ulpdu: Vec<u8>,
}

/// A capture written for one test, and what tshark must make of it.
struct Connection {
    fpdus: Vec<WrittenFpdu>,
    /// The fields every frame must show, by frame number (empty for frames
    /// that carry no MPA).
    expected: BTreeMap<u32, Fields>,
}

/// A pcap path in the temporary directory, removed on drop.
struct TempPcap(PathBuf);

impl TempPcap {
    fn new(name: &str) -> Self {
        let file = format!("uwarp-tshark-{}-{name}.pcap", std::process::id());
        Self(std::env::temp_dir().join(file))
    }
}

impl Drop for TempPcap {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn flag(set: bool) -> String {
    u8::from(set).to_string()
}

fn fields(pairs: &[(&'static str, String)]) -> Fields {
    pairs.iter().cloned().collect()
}

// ---------------------------------------------------------------------------
// What uwarp sends.

/// The startup frame of `kind` for scenario `s`, as uwarp emits it.
fn startup_repr(kind: FrameKind, s: Scenario) -> StartupRepr<'static> {
    let enhanced = (s.revision == Revision::Enhanced).then_some(EnhancedBlock {
        ird: 4,
        ord: 4,
        ..EnhancedBlock::default()
    });
    StartupRepr {
        kind,
        markers: s.markers,
        crc: s.crc,
        reject: false,
        reserved_flags: 0,
        revision: s.revision,
        enhanced,
        private_data: b"uwarp",
    }
}

/// The fields tshark shows for a startup frame. tshark 4.0 knows RFC 5044
/// only, so RFC 6581's S bit (0x10) is part of its 5-bit Res field.
fn startup_fields(repr: &StartupRepr<'_>, bytes: &[u8]) -> Fields {
    let key = match repr.kind {
        FrameKind::Request => "iwarp_mpa.key.req",
        FrameKind::Reply => "iwarp_mpa.key.rep",
    };
    let mut out = fields(&[
        (key, hex(repr.kind.key())),
        ("iwarp_mpa.marker_flag", flag(repr.markers)),
        ("iwarp_mpa.crc_flag", flag(repr.crc)),
        ("iwarp_mpa.rej_flag", flag(repr.reject)),
        ("iwarp_mpa.res", format!("0x{:02x}", repr.flags() & 0x1F)),
        ("iwarp_mpa.rev", (repr.revision as u8).to_string()),
        ("iwarp_mpa.pdlength", repr.pd_length().to_string()),
    ]);
    if repr.pd_length() > 0 {
        out.insert("iwarp_mpa.privatedata", hex(&bytes[HEADER_LEN..]));
    }
    out
}

/// DDP and RDMAP fields every segment shows.
fn segment_fields(tagged: bool, last: bool, opcode: Opcode) -> Fields {
    fields(&[
        ("iwarp_ddp.tagged_flag", flag(tagged)),
        ("iwarp_ddp.last_flag", flag(last)),
        ("iwarp_ddp.rsvd", "0x00".into()),
        ("iwarp_ddp.dv", ddp::DDP_VERSION.to_string()),
        ("iwarp_rdma.version", "1".into()),
        ("iwarp_rdma.rsv", "0x00".into()),
        ("iwarp_rdma.opcode", format!("0x{:02x}", opcode as u8)),
    ])
}

/// A single-segment untagged message on the opcode's queue.
fn untagged(from_client: bool, opcode: Opcode, ulp_word: u32, msn: u32, payload: &[u8]) -> Message {
    let qn = opcode.queue_number().expect("an untagged opcode");
    let model = BufferModel::Untagged {
        ulp_word,
        qn,
        msn,
        mo: 0,
    };
    let ulpdu = RdmapSegment::whole_message(opcode, model, payload).to_vec();
    let mut fields = segment_fields(false, true, opcode);
    fields.insert("iwarp_ddp.qn", qn.to_string());
    fields.insert("iwarp_ddp.msn", msn.to_string());
    fields.insert("iwarp_ddp.mo", "0".into());
    if opcode.invalidates() {
        fields.insert("iwarp_rdma.inval_stag", ulp_word.to_string());
    }
    Message {
        from_client,
        ulpdu,
        data_len: 0,
        fields,
    }
}

/// A Send of any kind: its payload is left to tshark's `data` dissector.
fn send(from_client: bool, opcode: Opcode, inval_stag: u32, msn: u32, payload: &[u8]) -> Message {
    Message {
        data_len: payload.len(),
        ..untagged(from_client, opcode, inval_stag, msn, payload)
    }
}

/// One tagged segment (RDMA Write or Read Response).
fn tagged(
    from_client: bool,
    opcode: Opcode,
    stag: u32,
    to: u64,
    last: bool,
    payload: &[u8],
) -> Message {
    let ulpdu = RdmapSegment {
        ddp: DdpRepr {
            last,
            reserved: 0,
            ulp_control: 0,
            model: BufferModel::Tagged { stag, to },
        },
        control: RdmapControl::new(opcode),
        payload,
    }
    .to_vec();
    let mut fields = segment_fields(true, last, opcode);
    fields.insert("iwarp_ddp.stag", format!("0x{stag:08x}"));
    fields.insert("iwarp_ddp.tagged_offset", format!("0x{to:016x}"));
    Message {
        from_client,
        ulpdu,
        data_len: payload.len(),
        fields,
    }
}

/// An RDMA Write of `data` segmented at the MULPDU of a 1448-octet EMSS;
/// only the last segment has L set.
fn rdma_write(stag: u32, to: u64, data: &[u8], markers: bool) -> Vec<Message> {
    let mulpdu = fpdu::mulpdu(1448, markers);
    let lens: Vec<usize> = ddp::segment_payload_lens(data.len(), mulpdu, true).collect();
    let mut at = 0;
    let mut out = Vec::new();
    for (i, len) in lens.iter().enumerate() {
        let last = i + 1 == lens.len();
        let chunk = &data[at..at + len];
        out.push(tagged(
            true,
            Opcode::RdmaWrite,
            stag,
            to + at as u64,
            last,
            chunk,
        ));
        at += len;
    }
    out
}

fn read_request(from_client: bool, msn: u32, request: ReadRequest) -> Message {
    let mut message = untagged(
        from_client,
        Opcode::ReadRequest,
        0,
        msn,
        &request.to_bytes(),
    );
    message.fields.extend(fields(&[
        (
            "iwarp_rdma.sinkstag",
            format!("0x{:08x}", request.sink_stag),
        ),
        ("iwarp_rdma.sinkto", format!("0x{:016x}", request.sink_to)),
        ("iwarp_rdma.rdmardsz", request.size.to_string()),
        (
            "iwarp_rdma.srcstag",
            format!("0x{:08x}", request.source_stag),
        ),
        ("iwarp_rdma.srcto", format!("0x{:016x}", request.source_to)),
    ]));
    message
}

/// The fields tshark shows a Terminate's Error Type and Error Code in: they
/// are named after the Layer and, for DDP, the Error Type.
fn terminate_error_fields(layer: Layer, etype: u8) -> (&'static str, &'static str) {
    match (layer, etype) {
        (Layer::Ddp, 1) => (
            "iwarp_rdma.term_etype_ddp",
            "iwarp_rdma.term_errcode_ddp_tagged",
        ),
        (Layer::Ddp, 2) => (
            "iwarp_rdma.term_etype_ddp",
            "iwarp_rdma.term_errcode_ddp_untagged",
        ),
        _ => panic!("no Terminate of layer {layer:?} type {etype} is checked here"),
    }
}

/// A Terminate reporting `error` about the DDP segment `culprit`, which must
/// be header-only (M and D set; the whole segment is its header).
fn terminate(from_client: bool, msn: u32, error: TermError, culprit: &[u8]) -> Message {
    let segment_len = u16::try_from(culprit.len()).unwrap();
    let payload = TerminateRepr {
        ddp_segment_len: Some(segment_len),
        ddp_header: Some(culprit),
        ..TerminateRepr::new(error)
    }
    .to_vec()
    .unwrap();
    let mut message = untagged(from_client, Opcode::Terminate, 0, msn, &payload);
    let (layer, etype, code) = error.parts();
    let (etype_field, code_field) = terminate_error_fields(layer, etype);
    message.fields.extend(fields(&[
        ("iwarp_rdma.term_layer", format!("0x{:02x}", layer as u8)),
        (etype_field, format!("0x{etype:02x}")),
        (code_field, format!("0x{code:02x}")),
        ("iwarp_rdma.term_hdrct_m", flag(true)),
        ("iwarp_rdma.hdrct_d", flag(true)),
        ("iwarp_rdma.hdrct_r", flag(false)),
        ("iwarp_rdma.term_rsvd", "0x0000".into()),
        (
            "iwarp_rdma.term_ddp_seg_len",
            hex(&segment_len.to_be_bytes()),
        ),
        ("iwarp_rdma.term_ddp_h", hex(culprit)),
    ]));
    message
}

/// The messages of every connection, in sending order.
///
/// The server's first two Sends are sized for the Marker scenario: its first
/// FPDU starts at stream offset 0 (Marker, then 2 + 18 + 488 = 508 octets)
/// so the Marker at 512 falls between PAD and CRC; the second takes
/// 2 + 18 + 472 + 4 = 496 octets up to 1016, so the Marker at 1024 falls
/// inside the third FPDU's DDP header.
fn conversation(markers: bool) -> Vec<Message> {
    let mut out = vec![
        send(true, Opcode::Send, 0, 1, b"hello from uwarp!"),
        send(false, Opcode::Send, 0, 1, &[0x11; 488]),
        send(false, Opcode::Send, 0, 2, &[0x22; 472]),
        send(false, Opcode::Send, 0, 3, b"and hello back from the server"),
        send(true, Opcode::SendInvalidate, 0x0bad_cafe, 2, b"inval"),
        send(true, Opcode::SendSolicited, 0, 3, b"solicited"),
    ];
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    out.extend(rdma_write(0x00ab_cd01, 0x7f00_0000_1000, &data, markers));
    let request = ReadRequest {
        sink_stag: 0x0000_a100,
        sink_to: 0x7f00_0000_2000,
        size: 512,
        source_stag: 0x0000_b200,
        source_to: 0x0010_0000,
    };
    out.push(read_request(true, 1, request));
    let (sink_stag, sink_to) = (request.sink_stag, request.sink_to);
    out.push(tagged(
        false,
        Opcode::ReadResponse,
        sink_stag,
        sink_to,
        true,
        &[0x5a; 512],
    ));
    let zero_write = tagged(true, Opcode::RdmaWrite, 0xdead_0000, 0, true, &[]);
    let culprit = zero_write.ulpdu.clone();
    out.push(zero_write);
    out.push(terminate(
        false,
        1,
        TermError::DdpTaggedInvalidStag,
        &culprit,
    ));
    out
}

/// The FPDUPTR of every Marker in `len` octets written from stream offset
/// `start`, by RFC 5044 section 4.3: the distance back from the Marker to
/// the FPDU's ULPDU_Length field, 0 for a Marker just before the FPDU.
fn marker_pointers(start: u64, len: usize) -> Vec<u64> {
    let header = if start % MARKER_INTERVAL == 0 {
        start + MARKER_LEN as u64
    } else {
        start
    };
    let first = start.next_multiple_of(MARKER_INTERVAL);
    (first..start + len as u64)
        .step_by(MARKER_INTERVAL as usize)
        .map(|at| at.saturating_sub(header))
        .collect()
}

/// The ULPDU tshark 4.0 finds in `fpdu` as written (flipped octet included).
fn tshark_ulpdu(s: Scenario, fpdu: &WrittenFpdu) -> Vec<u8> {
    let unmarked = if s.markers {
        tshark_4_0_strip_markers(fpdu.offset, &fpdu.bytes)
    } else {
        fpdu.bytes.clone()
    };
    unmarked[LENGTH_FIELD_LEN..LENGTH_FIELD_LEN + fpdu.ulpdu.len()].to_vec()
}

/// What tshark 4.0 makes of the FPDU `marked`, written from stream offset
/// `start`, once it has taken the Markers out ("FPDU without Markers").
///
/// Its Marker removal is right up to the first Marker, but from one Marker
/// to the next it copies 512 octets where there are only 508 (the 512-octet
/// interval includes the 4-octet Marker). So in an FPDU with two or more
/// Markers after its first octet, every Marker but the first stays in the
/// copy and the 4 octets after it are lost; the DDP and RDMAP headers (which
/// end before the second Marker) and the CRC check (computed over the FPDU
/// as received) are not affected, the payload tshark shows is.
fn tshark_4_0_strip_markers(start: u64, marked: &[u8]) -> Vec<u8> {
    let count = marker_pointers(start, marked.len()).len();
    if count == 0 {
        return marked.to_vec();
    }
    let unmarked_len = marked.len() - MARKER_LEN * count;
    let mut at = (start.next_multiple_of(MARKER_INTERVAL) - start) as usize;
    let mut out = marked[..at].to_vec();
    while out.len() < unmarked_len {
        at += MARKER_LEN;
        let run = (MARKER_INTERVAL as usize).min(unmarked_len - out.len());
        out.extend_from_slice(&marked[at..at + run]);
        at += run;
    }
    out
}

/// Frames `message` as an FPDU at stream offset `offset` and returns the
/// octets with the MPA fields tshark must show.
fn frame(s: Scenario, offset: u64, message: &Message) -> (Vec<u8>, Fields) {
    let parts = [&message.ulpdu[..]];
    let bytes = if s.markers {
        marker::to_vec(offset, &parts, s.crc).unwrap()
    } else {
        fpdu::to_vec(&parts, s.crc).unwrap()
    };
    let mut out = message.fields.clone();
    out.insert("iwarp_mpa.ulpdulength", message.ulpdu.len().to_string());
    let pad = fpdu::pad_len(message.ulpdu.len());
    if pad > 0 {
        out.insert("iwarp_mpa.pad", "00".repeat(pad));
    }
    let crc_field: [u8; 4] = bytes[bytes.len() - 4..].try_into().unwrap();
    if s.crc {
        // tshark shows the field's four octets read most significant first.
        let shown = u32::from_be_bytes(crc_field);
        out.insert("iwarp_mpa.crc_check", format!("0x{shown:08x}"));
    } else {
        out.insert("iwarp_mpa.crc", "0x00000000".into());
    }
    let pointers: Vec<String> = marker_pointers(offset, bytes.len())
        .iter()
        .map(u64::to_string)
        .collect();
    if s.markers && !pointers.is_empty() {
        out.insert("iwarp_mpa.marker_fpduptr", pointers.join(","));
    }
    (bytes, out)
}

/// Writes scenario `s` to `path`: handshake, Request, Reply, the
/// conversation one FPDU per segment, then the close. When `flip` names an
/// FPDU (by index), the last payload octet of that FPDU is flipped after its
/// CRC was computed (unmarked streams only).
fn write_connection(path: &Path, s: Scenario, flip: Option<usize>) -> Connection {
    let client = "10.0.0.1:45000".parse().unwrap();
    let server = "10.0.0.2:35791".parse().unwrap();
    let file = BufWriter::new(File::create(path).unwrap());
    let mut writer = PcapTcpWriter::new(file, client, server).unwrap();
    writer.handshake().unwrap();
    let mut expected = BTreeMap::new();
    for (from_client, kind, number) in [
        (true, FrameKind::Request, REQUEST_FRAME),
        (false, FrameKind::Reply, REPLY_FRAME),
    ] {
        let repr = startup_repr(kind, s);
        let bytes = repr.to_vec().unwrap();
        writer.send(from_client, &bytes).unwrap();
        expected.insert(number, startup_fields(&repr, &bytes));
    }
    // Marker offsets count from the first octet after each side's startup
    // frame: [client to server, server to client].
    let mut offsets = [0u64; 2];
    let mut fpdus = Vec::new();
    for (index, message) in conversation(s.markers).iter().enumerate() {
        let offset = &mut offsets[usize::from(!message.from_client)];
        let (mut bytes, fields) = frame(s, *offset, message);
        *offset += bytes.len() as u64;
        if flip == Some(index) {
            assert!(!s.markers, "flip is for unmarked streams");
            bytes[LENGTH_FIELD_LEN + message.ulpdu.len() - 1] ^= 0x01;
        }
        writer.send(message.from_client, &bytes).unwrap();
        let written = WrittenFpdu {
            frame: REPLY_FRAME + 1 + fpdus.len() as u32,
            offset: *offset - bytes.len() as u64,
            bytes,
            ulpdu: message.ulpdu.clone(),
        };
        let mut fields = fields;
        if message.data_len > 0 {
            let shown = tshark_ulpdu(s, &written);
            let data = &shown[shown.len() - message.data_len..];
            fields.insert("data.data", hex(data));
        }
        expected.insert(written.frame, fields);
        fpdus.push(written);
    }
    writer.finish().unwrap();
    let last = REPLY_FRAME + fpdus.len() as u32 + CLOSING_FRAMES;
    for number in 1..=last {
        expected.entry(number).or_default();
    }
    Connection { fpdus, expected }
}

// ---------------------------------------------------------------------------
// What tshark makes of it.

/// Runs tshark on `pcap` with the options every run shares plus `extra`.
fn tshark(pcap: &Path, extra: &[&str]) -> String {
    let output = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-n", "-o", "tcp.check_checksum:TRUE"])
        .args(["--disable-protocol", "rpcordma"])
        .args(["--disable-protocol", "smb_direct"])
        .args(extra)
        .output()
        .unwrap_or_else(|e| match e.kind() {
            ErrorKind::NotFound => {
                panic!("tshark is not on PATH: run scripts/setup.sh to install it (CI does)")
            }
            _ => panic!("cannot run tshark: {e}"),
        });
    assert!(
        output.status.success(),
        "tshark {extra:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("tshark prints UTF-8")
}

/// The non-empty [`FIELDS`] of every frame, by frame number.
fn tshark_fields(pcap: &Path) -> BTreeMap<u32, Fields> {
    let mut args = vec!["-T", "fields", "-E", "separator=/t", "-E", "occurrence=a"];
    for field in FIELDS {
        args.extend(["-e", field]);
    }
    let text = tshark(pcap, &args);
    let mut frames = BTreeMap::new();
    for line in text.lines() {
        let values: Vec<&str> = line.split('\t').collect();
        assert_eq!(values.len(), FIELDS.len(), "odd tshark line {line:?}");
        let number: u32 = values[0].parse().unwrap();
        let fields = FIELDS[1..]
            .iter()
            .zip(&values[1..])
            .filter(|(_, value)| !value.is_empty())
            .map(|(name, value)| (*name, value.to_string()))
            .collect();
        frames.insert(number, fields);
    }
    frames
}

/// The `-V` text of every frame, by frame number.
fn tshark_verbose(pcap: &Path) -> BTreeMap<u32, String> {
    let text = tshark(pcap, &["-V"]);
    let mut frames: BTreeMap<u32, String> = BTreeMap::new();
    let mut current = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Frame ") {
            if let Some((number, _)) = rest.split_once(':') {
                current = number.parse().unwrap();
            }
        }
        let frame = frames.entry(current).or_default();
        frame.push_str(line);
        frame.push('\n');
    }
    frames
}

/// The "CRC check" values of one frame's `-V` text.
fn crc_checks(verbose: &str) -> Vec<String> {
    verbose
        .lines()
        .filter_map(|line| line.trim().strip_prefix("CRC check: "))
        .map(str::to_string)
        .collect()
}

/// One row of `-z expert`: severity section, protocol, summary.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Expert {
    severity: String,
    protocol: String,
    summary: String,
}

/// The expert items tshark collects over the whole capture.
fn tshark_experts(pcap: &Path) -> Vec<Expert> {
    let text = tshark(pcap, &["-q", "-z", "expert"]);
    let mut severity = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [section, count] if count.starts_with('(') => severity = section.to_string(),
            [frequency, _group, protocol, summary @ ..] if frequency.parse::<u32>().is_ok() => out
                .push(Expert {
                    severity: severity.clone(),
                    protocol: protocol.to_string(),
                    summary: summary.join(" "),
                }),
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The checks.

/// A field value for a failure message, long hex strings cut short.
fn clip(value: Option<&String>) -> String {
    match value {
        None => "(absent)".into(),
        Some(v) if v.len() > 64 => format!("{}... ({} chars)", &v[..64], v.len()),
        Some(v) => v.clone(),
    }
}

/// Every frame shows exactly the expected fields.
fn assert_fields_match(s: Scenario, connection: &Connection, got: &BTreeMap<u32, Fields>) {
    let frames: Vec<u32> = got.keys().copied().collect();
    let wanted: Vec<u32> = connection.expected.keys().copied().collect();
    assert_eq!(frames, wanted, "{}: frame numbers", s.name);
    let mut mismatches = Vec::new();
    for (number, expected) in &connection.expected {
        let shown = &got[number];
        let names: BTreeSet<&str> = expected.keys().chain(shown.keys()).copied().collect();
        for name in names {
            let (want, have) = (expected.get(name), shown.get(name));
            if want != have {
                let (want, have) = (clip(want), clip(have));
                mismatches.push(format!(
                    "frame {number} {name}: uwarp {want}, tshark {have}"
                ));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{}:\n{}",
        s.name,
        mismatches.join("\n")
    );
    let decoded = got
        .values()
        .filter(|f| f.contains_key("iwarp_mpa.ulpdulength"))
        .count();
    assert_eq!(decoded, connection.fpdus.len(), "{}: FPDUs decoded", s.name);
}

/// Good CRCs on every FPDU (or none shown when CRCs are off), except the
/// frame `bad` whose CRC must be reported bad with the CRC32c of what it
/// carries.
fn assert_crcs(
    s: Scenario,
    connection: &Connection,
    verbose: &BTreeMap<u32, String>,
    bad: Option<u32>,
) {
    for fpdu in &connection.fpdus {
        let checks = crc_checks(&verbose[&fpdu.frame]);
        let carried = u32::from_be_bytes(fpdu.bytes[fpdu.bytes.len() - 4..].try_into().unwrap());
        let wanted = if !s.crc {
            vec![]
        } else if bad == Some(fpdu.frame) {
            let computed = crc::crc32c(&fpdu.bytes[..fpdu.bytes.len() - 4]);
            let should = crc::to_wire(computed);
            let should = u32::from_be_bytes(should);
            vec![format!(
                "0x{carried:08x} (Bad CRC32, should be 0x{should:08x})"
            )]
        } else {
            vec![format!("0x{carried:08x} (Good CRC32)")]
        };
        assert_eq!(checks, wanted, "{}: frame {}", s.name, fpdu.frame);
    }
}

/// No malformed frame; no expert error; warnings exactly `warnings`; notes
/// and chats only from TCP.
fn assert_experts(
    s: Scenario,
    verbose: &BTreeMap<u32, String>,
    experts: &[Expert],
    warnings: &[&str],
) {
    for (number, text) in verbose {
        assert!(
            !text.contains("Malformed"),
            "{}: frame {number} malformed:\n{text}",
            s.name
        );
    }
    let mut warned: Vec<&str> = Vec::new();
    for expert in experts {
        match expert.severity.as_str() {
            "Warns" if expert.protocol == "IWARP_MPA" => warned.push(&expert.summary),
            "Notes" | "Chats" if expert.protocol == "TCP" => {}
            _ => panic!("{}: unexpected expert item {expert:?}", s.name),
        }
    }
    warned.sort_unstable();
    assert_eq!(warned, warnings, "{}: expert warnings", s.name);
}

/// Writes scenario `s` (with FPDU `flip` corrupted), runs tshark and checks
/// fields, CRC verdicts and expert items.
fn cross_check(s: Scenario, flip: Option<usize>, warnings: &[&str]) -> Connection {
    let pcap = TempPcap::new(s.name);
    let connection = write_connection(&pcap.0, s, flip);
    assert_fields_match(s, &connection, &tshark_fields(&pcap.0));
    let verbose = tshark_verbose(&pcap.0);
    let bad = flip.map(|i| connection.fpdus[i].frame);
    assert_crcs(s, &connection, &verbose, bad);
    assert_experts(s, &verbose, &tshark_experts(&pcap.0), warnings);
    connection
}

const REV1_CRC: Scenario = Scenario {
    name: "rev1-crc",
    revision: Revision::Rfc5044,
    crc: true,
    markers: false,
};

#[test]
fn revision_1_with_crc() {
    let connection = cross_check(REV1_CRC, None, &[]);
    assert_eq!(connection.fpdus.len(), 13);
}

#[test]
fn revision_1_without_crc() {
    let s = Scenario {
        name: "rev1-nocrc",
        crc: false,
        ..REV1_CRC
    };
    let connection = cross_check(s, None, &[]);
    assert!(connection
        .fpdus
        .iter()
        .all(|f| f.bytes.ends_with(&[0, 0, 0, 0])));
}

#[test]
fn markers_both_directions() {
    let s = Scenario {
        name: "markers",
        markers: true,
        ..REV1_CRC
    };
    let connection = cross_check(s, None, &[]);
    // The edge cases `conversation` is sized for: the server's first FPDU
    // has a Marker before its header and one between PAD and CRC; its third
    // has one 8 octets in, inside the DDP header.
    let pointers = |i: usize| {
        connection.expected[&connection.fpdus[i].frame]["iwarp_mpa.marker_fpduptr"].clone()
    };
    assert_eq!(pointers(1), "0,508");
    assert_eq!(pointers(3), "8");
    // uwarp's own reader gets every ULPDU back; tshark 4.0 (whose payloads
    // the checks above matched against `tshark_4_0_strip_markers`) garbles
    // exactly the FPDUs with two or more Markers inside: the first two RDMA
    // Write segments.
    let mut garbled = Vec::new();
    for fpdu in &connection.fpdus {
        let parsed = MarkedFpdu::parse(fpdu.offset, &fpdu.bytes).unwrap();
        assert_eq!(parsed.ulpdu(), &fpdu.ulpdu[..], "frame {}", fpdu.frame);
        assert_eq!(
            parsed.verify(true),
            CrcVerdict::Good,
            "frame {}",
            fpdu.frame
        );
        if tshark_ulpdu(s, fpdu) != fpdu.ulpdu {
            garbled.push(fpdu.frame);
        }
    }
    let first_write = connection.fpdus[6].frame;
    assert_eq!(garbled, [first_write, first_write + 1]);
}

/// tshark 4.0 predates RFC 6581 but still decodes every FPDU after a
/// revision 2 startup; it only warns about Rev and the S bit.
#[test]
fn revision_2_enhanced_block() {
    let s = Scenario {
        name: "rev2",
        revision: Revision::Enhanced,
        ..REV1_CRC
    };
    cross_check(s, None, &REVISION_2_WARNINGS);
}

/// Negative control: a payload octet flipped after the CRC was computed is
/// a bad CRC for tshark in that frame and no other.
#[test]
fn flipped_payload_octet_is_a_bad_crc() {
    let s = Scenario {
        name: "flipped",
        ..REV1_CRC
    };
    // The client's first Send.
    cross_check(s, Some(0), &[]);
}
