//! `uwarp-perf decode`: the options of the capture decoder (the files,
//! CRC handling, the Terminate layout) and what prints its records.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use clap::ValueEnum;
use uwarp_bench::capture::read_capture;
use uwarp_bench::decode::{decode_streams, CrcMode, DecodeOptions};
use uwarp_stack::wire::terminate::LayoutHint;

/// The options of `decode`.
#[derive(clap::Args)]
pub(super) struct DecodeArgs {
    /// Capture files (pcap or pcapng).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// One JSON object per line instead of text.
    #[arg(long)]
    json: bool,
    /// CRC handling: as negotiated (auto), always checked, or never.
    #[arg(long, value_enum, default_value_t = CrcArg::Auto)]
    crc: CrcArg,
    /// Terminate control-word layout: auto-detect, RFC 5040, or Linux siw's.
    #[arg(long, value_enum, default_value_t = LayoutArg::Auto)]
    terminate_layout: LayoutArg,
}

/// `--crc`: how the decoder treats MPA CRCs.
#[derive(Clone, Copy, ValueEnum)]
enum CrcArg {
    Auto,
    On,
    Off,
}

/// `--terminate-layout`: how Terminate control words are read.
#[derive(Clone, Copy, ValueEnum)]
enum LayoutArg {
    Auto,
    Rfc,
    Siw,
}

/// `decode`: every record of every file, one line each, on standard
/// output (a closed pipe ends it quietly).
pub(super) fn run(args: &DecodeArgs) -> Result<(), String> {
    let options = DecodeOptions {
        crc: match args.crc {
            CrcArg::Auto => CrcMode::Auto,
            CrcArg::On => CrcMode::On,
            CrcArg::Off => CrcMode::Off,
        },
        terminate_layout: match args.terminate_layout {
            LayoutArg::Auto => LayoutHint::Auto,
            LayoutArg::Rfc => LayoutHint::Rfc5040,
            LayoutArg::Siw => LayoutHint::Siw,
        },
    };
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    for file in &args.files {
        let streams = read_capture(file).map_err(|e| format!("{}: {e}", file.display()))?;
        if !args.json && args.files.len() > 1 {
            writeln!(out, "== {}", file.display()).map_err(|e| e.to_string())?;
        }
        for record in decode_streams(&streams, &options) {
            let line = if args.json {
                let mut json = record.to_json();
                if args.files.len() > 1 {
                    json["file"] = file.display().to_string().into();
                }
                json.to_string()
            } else {
                record.to_text()
            };
            if let Err(err) = writeln!(out, "{line}") {
                // A closed pipe (`| head`) is not an error worth reporting.
                return if err.kind() == io::ErrorKind::BrokenPipe {
                    Ok(())
                } else {
                    Err(err.to_string())
                };
            }
        }
    }
    out.flush().or_else(|e| {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Ok(())
        } else {
            Err(e.to_string())
        }
    })
}
